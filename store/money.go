package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// Money. The ledger is the one source of truth: every entry goes through
// postLedger, which also moves the cached balance in accounts in the same
// transaction, so balance = −Σ amount_fen always (a test checks it).
// What a customer can spend is that balance plus their credit limit,
// minus what their running instances have cost so far (held until each
// run ends and is posted).

// ledgerPost is one ledger entry to write.
type ledgerPost struct {
	userID        int64
	at            time.Time
	kind          string
	amount        gpuportal.Fen // > 0 takes money out of the balance
	reservationID *int64
	instanceID    *int64
	topUpID       *int64
	volumeID      *int64
	desc          string
}

// postLedger writes an entry and moves the user's cached balance.
func (db *DB) postLedger(ctx context.Context, tx *sql.Tx, e ledgerPost) error {
	if err := insertLedger(ctx, tx, e); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance_fen = balance_fen - ? WHERE user_id = ?`, e.amount, e.userID); err != nil {
		return fmt.Errorf("balance: %w", err)
	}
	return nil
}

// charge posts a charge only if the user has it available, in the same
// transaction: the conditional UPDATE holds the account's row, so two
// charges at once cannot both spend the last of it (on SQLite the writer
// is one anyway). Not enough: insufficient_funds, naming what is missing.
func (db *DB) charge(ctx context.Context, tx *sql.Tx, e ledgerPost) error {
	held, _, err := db.heldFor(ctx, tx, e.userID, e.at)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE accounts SET balance_fen = balance_fen - ? WHERE user_id = ? AND balance_fen + credit_limit_fen - ? >= ?`,
		e.amount, e.userID, held, e.amount)
	if err != nil {
		return fmt.Errorf("charge: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		b, err := db.balanceIn(ctx, tx, e.userID, e.at)
		if err != nil {
			return err
		}
		return insufficient(e.amount, b.Available)
	}
	return insertLedger(ctx, tx, e)
}

// insertLedger writes an entry, with created_by: the member who made what
// it charges for (a team's instance, reservation or volume).
func insertLedger(ctx context.Context, tx *sql.Tx, e ledgerPost) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_entries (user_id, at, kind, amount_fen, reservation_id, instance_id, topup_id, volume_id, description, created_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce((SELECT created_by FROM instances WHERE id = ?), (SELECT created_by FROM reservations WHERE id = ?), (SELECT created_by FROM volumes WHERE id = ?)))`,
		e.userID, unix(e.at), e.kind, e.amount, e.reservationID, e.instanceID, e.topUpID, e.volumeID, e.desc, e.instanceID, e.reservationID, e.volumeID); err != nil {
		return fmt.Errorf("ledger %s: %w", e.kind, err)
	}
	return nil
}

func insufficient(need, available gpuportal.Fen) error {
	return gpuportal.FieldErrorf(gpuportal.EFUNDS, "balance", "This needs %s and %s is available: top up %s to go ahead.",
		need.String(), max(available, 0).String(), gpuportal.TopUpNeeded(need, available).String())
}

// launchRoom is what a user has left for new launches: what is
// available less an hour of everything they already run or wait to run
// (gpuportal.LaunchFunds with nothing new).
func (db *DB) launchRoom(ctx context.Context, q queryer, userID int64, now time.Time) (room, available gpuportal.Fen, err error) {
	b, err := db.balanceIn(ctx, q, userID, now)
	if err != nil {
		return 0, 0, err
	}
	var pending gpuportal.Fen
	if err := q.QueryRowContext(ctx, `SELECT coalesce(sum(price_fen * `+billedUnits+`), 0) FROM instances WHERE user_id = ? AND status = 'pending'
		AND kind IN ('spot', 'on_demand') AND stop_requested_at IS NULL`, userID).Scan(&pending); err != nil {
		return 0, 0, fmt.Errorf("pending instances: %w", err)
	}
	return b.Available - gpuportal.LaunchFunds(0, b.BurnPerHour, pending), b.Available, nil
}

// requireLaunchFunds checks that what is available pays an hour of a new
// launch (hour) beside an hour of everything the user already runs or
// waits to run (gpuportal.LaunchFunds).
func (db *DB) requireLaunchFunds(ctx context.Context, tx *sql.Tx, userID int64, hour gpuportal.Fen, now time.Time) error {
	room, available, err := db.launchRoom(ctx, tx, userID, now)
	if err != nil {
		return err
	}
	if room < hour {
		return insufficient(available-room+hour, available)
	}
	return nil
}

// billedUnits is gpuportal.BilledUnits of an instances row, in SQL.
const billedUnits = "CASE WHEN count = 0 THEN 1 ELSE count END"

// heldFor is what the user's running instances have cost so far (not
// posted yet) and what they cost an hour.
func (db *DB) heldFor(ctx context.Context, q queryer, userID int64, now time.Time) (held, burn gpuportal.Fen, err error) {
	runs, err := runningCosts(ctx, q, "AND user_id = ?", userID)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range runs {
		h, b := r.accrued(now)
		held, burn = held+h, burn+b
	}
	return held, burn, nil
}

// runningCost is what one running spot or on-demand instance costs.
type runningCost struct {
	userID  int64
	kind    gpuportal.InstanceKind
	count   int
	price   gpuportal.Fen
	started sql.NullInt64
}

// accrued is what the run has cost by now (not posted yet) and costs an
// hour.
func (r runningCost) accrued(now time.Time) (held, burn gpuportal.Fen) {
	burn = r.price * gpuportal.Fen(gpuportal.BilledUnits(r.count))
	if r.started.Valid {
		held = gpuportal.RunCost(r.price, r.count, gpuportal.BillableMinutes(fromUnix(r.started.Int64), now, r.kind, false, false, 0))
	}
	return held, burn
}

// accruedAtMost bounds what runs costing burn an hour in all, none started
// before earliest, can have cost by now: each run is charged by the minute
// begun (accrued), and none has run more minutes than the earliest.
func accruedAtMost(burn gpuportal.Fen, earliest sql.NullInt64, now time.Time) gpuportal.Fen {
	if !earliest.Valid {
		return 0
	}
	return gpuportal.RunCost(burn, 1, gpuportal.BillableMinutes(fromUnix(earliest.Int64), now, "", false, false, 0))
}

func runningCosts(ctx context.Context, q queryer, where string, args ...any) ([]runningCost, error) {
	runs, err := scanAll(ctx, q, func(r *sql.Rows, c *runningCost) error {
		return r.Scan(&c.userID, &c.kind, &c.count, &c.price, &c.started)
	}, `SELECT user_id, kind, count, price_fen, started_at FROM instances
		WHERE status IN ('running', 'interrupting') AND kind IN ('spot', 'on_demand') `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("running instances: %w", err)
	}
	return runs, nil
}

func (db *DB) balanceIn(ctx context.Context, q queryer, userID int64, now time.Time) (gpuportal.Balance, error) {
	var balance, credit gpuportal.Fen
	err := q.QueryRowContext(ctx, `SELECT balance_fen, credit_limit_fen FROM accounts WHERE user_id = ?`, userID).Scan(&balance, &credit)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return gpuportal.Balance{}, fmt.Errorf("balance: %w", err)
	}
	held, burn, err := db.heldFor(ctx, q, userID, now)
	if err != nil {
		return gpuportal.Balance{}, err
	}
	return gpuportal.NewBalance(balance, held, credit, burn, now), nil
}

// Balance is a user's money: posted, held, credit, available, burn.
func (db *DB) Balance(ctx context.Context, user *gpuportal.User) (gpuportal.Balance, error) {
	return db.balanceIn(ctx, db.read, user.ID, db.now())
}

// LedgerSum is −Σ amount_fen of a user's ledger: what the balance must be.
func (db *DB) LedgerSum(ctx context.Context, userID int64) (gpuportal.Fen, error) {
	var sum gpuportal.Fen
	err := db.read.QueryRowContext(ctx, `SELECT -coalesce(sum(amount_fen), 0) FROM ledger_entries WHERE user_id = ?`, userID).Scan(&sum)
	return sum, err
}

// stopInstancesOf gives the user's spot and on-demand instances the stop
// notice (their balance ran out, or an admin disabled the account); it
// returns how many got it now.
func (db *DB) stopInstancesOf(ctx context.Context, tx *sql.Tx, userID int64, reason gpuportal.InterruptReason, now time.Time, policies gpuportal.Policies, nodes *[]string) (int, error) {
	// Each with the notice its launch asked for (0: the policy's).
	type stoppable struct {
		*gpuportal.Instance
		asked int
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, s *stoppable) error {
		var err error
		s.Instance, err = scanInstance(r, &s.asked)
		return err
	}, `SELECT `+instanceColumns+`, coalesce(notice_seconds, 0) FROM instances WHERE user_id = ? AND kind IN ('spot', 'on_demand')
		AND status IN ('pending', 'running') AND stop_requested_at IS NULL`, userID)
	if err != nil {
		return 0, err
	}
	for _, s := range list {
		i := s.Instance
		if i.Node == "" {
			// Not placed yet: it simply does not start.
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'stopped', stop_requested_at = ?, ended_at = ?, error = ? WHERE id = ?`,
				unix(now), unix(now), "stopped before it started: "+reason, i.ID); err != nil {
				return 0, err
			}
			if err := db.emitInstance(ctx, tx, i.ID, gpuportal.EventInstanceStopped); err != nil {
				return 0, err
			}
			if i.JobID != nil {
				if err := db.taskAttemptEnded(ctx, tx, i, gpuportal.InstanceInterrupted, nil, "", false, endReported, now); err != nil {
					return 0, err
				}
			}
			continue
		}
		p := policies.For(i.Model)
		if err := db.interrupt(ctx, tx, i, reason, now, now.Add(time.Duration(p.NoticeFor(s.asked))*time.Second), p.SpotGraceSeconds); err != nil {
			return 0, err
		}
		*nodes = append(*nodes, i.Node)
	}
	return len(list), nil
}

// callOffBalanceStops takes back the stop notices a user's instances got
// for lack of balance, now that there is money again: those whose
// deadline has not come yet run on.
func (db *DB) callOffBalanceStops(ctx context.Context, tx *sql.Tx, userID int64, nodes *[]string) error {
	type stopped struct {
		id      int64
		node    string
		started bool
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, s *stopped) error { return r.Scan(&s.id, &s.node, &s.started) },
		`SELECT id, node_id, started_at IS NOT NULL FROM instances WHERE user_id = ? AND status = 'interrupting' AND interrupt_reason = ?
		AND notice_wall_at + (deadline_at - notice_at) > ?`, userID, gpuportal.ReasonBalance, db.Wall.Now().Unix())
	if err != nil {
		return err
	}
	for _, s := range list {
		status := gpuportal.InstanceRunning
		if !s.started {
			status = gpuportal.InstancePending
		}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = ?, notice_at = NULL, notice_wall_at = NULL, deadline_at = NULL, grace_seconds = NULL,
			interrupt_reason = NULL WHERE id = ?`, status, s.id); err != nil {
			return err
		}
		if err := bumpNode(ctx, tx, s.node); err != nil {
			return err
		}
		*nodes = append(*nodes, s.node)
	}
	return nil
}
