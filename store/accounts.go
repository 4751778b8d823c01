package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// Accounts as admins see and set them: quotas (per-user overrides of
// gpuportal.DefaultQuotas), credit limits, disabling.

// quotasOf is a user's quotas: their overrides, else the defaults.
func (db *DB) quotasOf(ctx context.Context, q queryer, userID int64) (gpuportal.Quotas, error) {
	var gpus, hours, entries, tasks, volumeGiB sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT max_running_gpus, max_booked_gpu_hours, max_waitlist_entries, max_queued_tasks, max_volume_gib FROM users WHERE id = ?`, userID).Scan(&gpus, &hours, &entries, &tasks, &volumeGiB)
	if err != nil {
		return gpuportal.Quotas{}, fmt.Errorf("quotas: %w", err)
	}
	out := gpuportal.DefaultQuotas
	if gpus.Valid {
		out.MaxRunningGPUs = int(gpus.Int64)
	}
	if hours.Valid {
		out.MaxBookedGPUHours = int(hours.Int64)
	}
	if entries.Valid {
		out.MaxWaitlistEntries = int(entries.Int64)
	}
	if tasks.Valid {
		out.MaxQueuedTasks = int(tasks.Int64)
	}
	gib := int(volumeGiB.Int64)
	if !volumeGiB.Valid {
		policies, err := db.policies(ctx, q)
		if err != nil {
			return out, err
		}
		gib = policies.Global.MaxVolumeGiB
	}
	out.MaxVolumeGiB = &gib
	return out, nil
}

// lockAccount serialises one user's money and quota decisions on
// PostgreSQL, where bookings run side by side (on SQLite the writer is
// one anyway).
func (db *DB) lockAccount(ctx context.Context, tx *sql.Tx, userID int64) error {
	if db.dialect != "postgres" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT 1 FROM accounts WHERE user_id = ? FOR UPDATE`, userID)
	return err
}

// checkRunningQuota: the user's spot and on-demand GPUs (job tasks
// included) plus count stay within their quota.
func (db *DB) checkRunningQuota(ctx context.Context, q queryer, userID int64, count int) error {
	quotas, err := db.quotasOf(ctx, q, userID)
	if err != nil {
		return err
	}
	running, err := db.runningGPUsOf(ctx, q, userID)
	if err != nil {
		return err
	}
	if running+count > quotas.MaxRunningGPUs {
		return gpuportal.FieldErrorf(gpuportal.EPOLICY, "quota", "Your quota is %d GPUs running at once; %d run now.", quotas.MaxRunningGPUs, running)
	}
	return nil
}

// runningGPUsOf is what a user's spot and on-demand instances (job tasks
// included) hold or wait for.
func (db *DB) runningGPUsOf(ctx context.Context, q queryer, userID int64) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT coalesce(sum(count), 0) FROM instances WHERE user_id = ? AND kind IN ('spot', 'on_demand')
		AND status IN ('pending', 'running', 'interrupting')`, userID).Scan(&n)
	return n, err
}

// checkBookedQuota: the GPU-hours of the user's reservations that have
// not ended, plus gpuHours, stay within their quota. The count is kept in
// accounts as reservations are booked and end (see bookedHours).
func (db *DB) checkBookedQuota(ctx context.Context, q queryer, userID int64, gpuHours int) error {
	quotas, err := db.quotasOf(ctx, q, userID)
	if err != nil {
		return err
	}
	var booked int
	if err := q.QueryRowContext(ctx, `SELECT booked_gpu_hours FROM accounts WHERE user_id = ?`, userID).Scan(&booked); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if booked+gpuHours > quotas.MaxBookedGPUHours {
		return gpuportal.FieldErrorf(gpuportal.EPOLICY, "quota", "Your quota is %d GPU-hours booked ahead; %d are booked now.", quotas.MaxBookedGPUHours, booked)
	}
	return nil
}

// bookedHours moves a user's count of booked GPU-hours: + when a
// reservation is booked, − when it is cancelled or completes.
func (db *DB) bookedHours(ctx context.Context, tx *sql.Tx, userID int64, delta int) error {
	_, err := tx.ExecContext(ctx, `UPDATE accounts SET booked_gpu_hours = booked_gpu_hours + ? WHERE user_id = ?`, delta, userID)
	return err
}

// checkQueuedTaskQuota: the unfinished tasks of the user's jobs, plus
// tasks more, stay within their quota.
func (db *DB) checkQueuedTaskQuota(ctx context.Context, q queryer, userID int64, tasks int) error {
	quotas, err := db.quotasOf(ctx, q, userID)
	if err != nil {
		return err
	}
	var open int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM job_tasks t JOIN jobs j ON j.id = t.job_id
		WHERE j.user_id = ? AND j.status IN ('queued', 'running') AND t.status IN ('queued', 'running')`, userID).Scan(&open); err != nil {
		return err
	}
	if open+tasks > quotas.MaxQueuedTasks {
		return gpuportal.FieldErrorf(gpuportal.EPOLICY, "quota", "Your quota is %d job tasks waiting or running; you have %d.", quotas.MaxQueuedTasks, open)
	}
	return nil
}

// checkWaitlistQuota: the user's open waitlist entries stay within quota.
func (db *DB) checkWaitlistQuota(ctx context.Context, q queryer, userID int64) error {
	quotas, err := db.quotasOf(ctx, q, userID)
	if err != nil {
		return err
	}
	var open int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM waitlist_entries WHERE user_id = ? AND status IN ('waiting', 'offered')`, userID).Scan(&open); err != nil {
		return err
	}
	if open+1 > quotas.MaxWaitlistEntries {
		return gpuportal.FieldErrorf(gpuportal.EPOLICY, "quota", "Your quota is %d waitlist entries; you have %d.", quotas.MaxWaitlistEntries, open)
	}
	return nil
}

// AccountUpdate is what an admin may change of an account; nil: as is.
type AccountUpdate struct {
	CreditLimit *gpuportal.Fen    `json:"credit_limit_fen,omitempty"`
	Quotas      *gpuportal.Quotas `json:"quotas,omitempty"`
	Disabled    *bool             `json:"disabled,omitempty"`
}

// UpdateAccount sets a user's credit limit, quotas or disabled state.
// Disabling ends their sessions and tokens' use and stops everything the
// account runs (closeDownAccount). Audited.
func (db *DB) UpdateAccount(ctx context.Context, actor *gpuportal.User, userID int64, up AccountUpdate) (*gpuportal.Account, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	if up.CreditLimit != nil && (*up.CreditLimit < 0 || *up.CreditLimit > gpuportal.MaxCredit) {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "credit_limit_fen", "A credit limit is 0 to %s.", gpuportal.MaxCredit.String())
	}
	if up.Quotas != nil {
		if err := up.Quotas.Validate(); err != nil {
			return nil, err
		}
	}
	if up.Disabled != nil && *up.Disabled && userID == actor.ID {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "disabled", "You cannot disable your own account.")
	}
	var nodes []string
	err := db.inTx(ctx, "update account", func(tx *sql.Tx) error {
		before, err := adminUser(ctx, tx, db, userID)
		if err != nil {
			return named("check admin", err)
		}
		now := db.now()
		if up.CreditLimit != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE accounts SET credit_limit_fen = ? WHERE user_id = ?`, *up.CreditLimit, userID); err != nil {
				return named("update accounts", err)
			}
		}
		if q := up.Quotas; q != nil {
			// The policy's volume quota is kept as "the policy's" (NULL),
			// so a later policy change reaches this user too.
			if q.MaxVolumeGiB != nil {
				policies, err := db.policies(ctx, tx)
				if err != nil {
					return named("read policies", err)
				}
				if *q.MaxVolumeGiB == policies.Global.MaxVolumeGiB {
					q.MaxVolumeGiB = nil
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE users SET max_running_gpus = ?, max_booked_gpu_hours = ?, max_waitlist_entries = ?, max_queued_tasks = ?, max_volume_gib = ? WHERE id = ?`,
				q.MaxRunningGPUs, q.MaxBookedGPUHours, q.MaxWaitlistEntries, q.MaxQueuedTasks, q.MaxVolumeGiB, userID); err != nil {
				return err
			}
		}
		if up.Disabled != nil && *up.Disabled != before.User.Disabled {
			if *up.Disabled {
				if _, err := tx.ExecContext(ctx, `UPDATE users SET disabled_at = ?, session_version = session_version + 1 WHERE id = ?`, unix(now), userID); err != nil {
					return named("update users", err)
				}
				if err := db.closeDownAccount(ctx, tx, userID, now, &nodes); err != nil {
					return fmt.Errorf("stop what the disabled account runs: %w", err)
				}
			} else if _, err := tx.ExecContext(ctx, `UPDATE users SET disabled_at = NULL WHERE id = ?`, userID); err != nil {
				return err
			}
		}
		after, err := adminUser(ctx, tx, db, userID)
		if err != nil {
			return named("check admin", err)
		}
		return db.audit(ctx, tx, actor.ID, "account.update", fmt.Sprintf("user/%d", userID), accountAudit(before), accountAudit(after))
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, nodes...)
	db.Kick(ctx)
	return adminUser(ctx, db.read, db, userID)
}

// closeDownAccount stops everything a disabled account runs or would
// start: its spot and on-demand instances get the stop notice (no
// auto-restart after it), its reserved instances stop now, its jobs are
// cancelled and its waitlist entries (offers too, their hold given back).
// Its confirmed reservations stay booked and paid, holding their GPUs with
// nothing running on them; an administrator cancels them if the account
// stays closed (docs/operators: "Disabling an account").
func (db *DB) closeDownAccount(ctx context.Context, tx *sql.Tx, userID int64, now time.Time, nodes *[]string) error {
	policies, err := db.policies(ctx, tx)
	if err != nil {
		return err
	}
	if _, err := db.stopInstancesOf(ctx, tx, userID, gpuportal.ReasonAccountDisabled, now, policies, nodes); err != nil {
		return err
	}
	reserved, err := scanAll(ctx, tx, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT DISTINCT reservation_id FROM instances WHERE user_id = ? AND kind = 'reserved' AND status IN ('pending', 'running') AND stop_requested_at IS NULL`, userID)
	if err != nil {
		return err
	}
	for _, id := range reserved {
		if err := db.stopReservedInstances(ctx, tx, id, now, nodes); err != nil {
			return err
		}
	}
	jobs, err := scanAll(ctx, tx, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT id FROM jobs WHERE user_id = ? AND status IN ('queued', 'running')`, userID)
	if err != nil {
		return err
	}
	for _, id := range jobs {
		jobNodes, err := db.cancelJob(ctx, tx, id, now)
		if err != nil {
			return err
		}
		*nodes = append(*nodes, jobNodes...)
	}
	offers, err := scanEach(ctx, tx, scanWait, `SELECT `+waitColumns+` FROM waitlist_entries WHERE user_id = ? AND status = 'offered'`, userID)
	if err != nil {
		return err
	}
	for _, w := range offers {
		if err := releaseCapacity(ctx, tx, w.Model, w.Region, w.Start, w.End, w.Count); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE waitlist_entries SET status = 'cancelled', note = 'account disabled' WHERE user_id = ? AND status IN ('waiting', 'offered')`, userID); err != nil {
		return err
	}
	// Its bookings keep their GPUs (they are paid), but run nothing by
	// themselves at their start.
	_, err = tx.ExecContext(ctx, `UPDATE reservations SET launch_json = NULL WHERE user_id = ? AND status IN ('confirmed', 'active') AND launch_json IS NOT NULL`, userID)
	return err
}

func accountAudit(u *gpuportal.Account) map[string]any {
	return map[string]any{"credit_limit_fen": u.Balance.CreditLimit, "quotas": u.Quotas, "disabled": u.User.Disabled}
}

func adminUser(ctx context.Context, q queryer, db *DB, userID int64) (*gpuportal.Account, error) {
	u, err := scanUser(q.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "User %d not found.", userID)
	} else if err != nil {
		return nil, err
	}
	now := db.now()
	out := &gpuportal.Account{User: *u}
	if out.Balance, err = db.balanceIn(ctx, q, userID, now); err != nil {
		return nil, err
	}
	if out.Quotas, err = db.quotasOf(ctx, q, userID); err != nil {
		return nil, err
	}
	local := now.In(db.Location)
	month := time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, db.Location)
	if err := q.QueryRowContext(ctx, `SELECT coalesce(sum(amount_fen), 0) FROM ledger_entries WHERE user_id = ? AND at >= ? AND kind IN (`+spendKinds+`)`,
		userID, unix(month)).Scan(&out.SpendThisMonth); err != nil {
		return nil, err
	}
	return out, nil
}

// User list orders (GET /admin/users?sort=).
const (
	UsersByJoined  = "joined" // the default: oldest account first
	UsersByName    = "name"
	UsersByEmail   = "email"
	UsersByBalance = "balance" // the most money first
	UsersBySpend   = "spend"   // this month's biggest spender first
)

// usersOrder is each order's ORDER BY (month: the start of this month).
func usersOrder(sort string, month time.Time) (string, []any, error) {
	switch sort {
	case "", UsersByJoined:
		return "id", nil, nil
	case UsersByName:
		return "lower(name), id", nil, nil
	case UsersByEmail:
		return "lower(email), id", nil, nil
	case UsersByBalance:
		return "(SELECT coalesce(max(a.balance_fen), 0) FROM accounts a WHERE a.user_id = users.id) DESC, id", nil, nil
	case UsersBySpend:
		return "(SELECT coalesce(sum(l.amount_fen), 0) FROM ledger_entries l WHERE l.user_id = users.id AND l.at >= ? AND l.kind IN (" + spendKinds + ")) DESC, id",
			[]any{unix(month)}, nil
	}
	return "", nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "sort", "Sort users by joined, name, email, balance or spend.")
}

// AdminUsers lists users whose email or name holds search ("" all), in
// the order sort names ("" the oldest first), a page at a time, with their
// money and quotas.
func (db *DB) AdminUsers(ctx context.Context, actor *gpuportal.User, search, sort string, p Page) ([]gpuportal.Account, error) {
	return db.AdminAccounts(ctx, actor, search, sort, false, p)
}

// AdminAccounts is AdminUsers for people (teams false) or for teams'
// accounts (named by their teams).
func (db *DB) AdminAccounts(ctx context.Context, actor *gpuportal.User, search, sort string, teams bool, p Page) ([]gpuportal.Account, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	local := db.now().In(db.Location)
	order, orderArgs, err := usersOrder(sort, time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, db.Location))
	if err != nil {
		return nil, err
	}
	pattern := "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(strings.ToLower(strings.TrimSpace(search))) + "%"
	kind := "id NOT IN (SELECT account_id FROM teams)"
	if teams {
		kind = "id IN (SELECT account_id FROM teams WHERE deleted_at IS NULL)"
	}
	if err := db.count(ctx, p, "users", `(lower(email) LIKE ? ESCAPE '\' OR lower(name) LIKE ? ESCAPE '\') AND `+kind, pattern, pattern); err != nil {
		return nil, err
	}
	args := append([]any{pattern, pattern}, orderArgs...)
	ids, err := queryIDs(ctx, db.read, `SELECT id FROM users WHERE (lower(email) LIKE ? ESCAPE '\' OR lower(name) LIKE ? ESCAPE '\') AND `+kind+` ORDER BY `+order+` LIMIT ? OFFSET ?`,
		append(args, p.Limit, max(0, p.Offset))...)
	if err != nil {
		return nil, fmt.Errorf("search users: %w", err)
	}
	out := []gpuportal.Account{}
	for _, id := range ids {
		u, err := adminUser(ctx, db.read, db, id)
		if err != nil {
			return nil, err
		}
		if u.TeamID, err = db.TeamIDOfAccount(ctx, id); err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, nil
}

// AdminUser is one user's account, for an admin.
func (db *DB) AdminUser(ctx context.Context, actor *gpuportal.User, userID int64) (*gpuportal.Account, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	return adminUser(ctx, db.read, db, userID)
}
