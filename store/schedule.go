package store

import (
	"context"
	"database/sql"
	"fmt"
	"gpuportal/plan"
	"time"

	"gpuportal"
)

// TickResult counts what one scheduler tick did.
type TickResult = plan.TickResult

// Tick does whatever is due by now, in one transaction: it loads a
// snapshot of what may be due (loadSnapshot), lets the planner decide
// (plan.Plan) and applies the decisions (applyPlan), which then keeps
// the books (lapsed top-ups, the rates' daily roll-up).
// Each decision is applied in a savepoint of its own: one that fails is
// recorded and the rest commits (decisions.go). It is idempotent: a
// second tick at the same time does nothing.
func (db *DB) Tick(ctx context.Context, now time.Time) (TickResult, error) {
	var res TickResult
	var nodes []string
	// Maintenance first: the spot instances on a window's nodes get their
	// notice for the window (its reason, not a booking's), before the
	// planner sees the window's hours taken.
	maintained, err := db.maintenanceStep(ctx, now)
	if err != nil {
		return res, fmt.Errorf("tick at %s: %w", now.Format(time.RFC3339), err)
	}
	err = db.inTx(ctx, "plan and apply", func(tx *sql.Tx) error {
		snap, err := db.loadSnapshot(ctx, tx, now)
		if err != nil {
			return named("load snapshot", err)
		}
		res, nodes, err = db.applyPlan(ctx, tx, now, db.planner()(snap, now))
		if err != nil {
			return named("apply plan", err)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("tick at %s: %w", now.Format(time.RFC3339), err)
	}
	db.wake(ctx, append(nodes, maintained...)...)
	if res.Launched > 0 {
		db.Kick(ctx) // place the instances reservations launched by themselves
	}
	return res, nil
}

// Planner decides a tick over its snapshot: plan.Plan unless set
// (simulations and what-ifs may pass another planner to compare).
type Planner func(plan.Snapshot, time.Time) plan.Decisions

func (db *DB) planner() Planner {
	if db.Planner != nil {
		return db.Planner
	}
	return plan.Plan
}

func queryIDs(ctx context.Context, q queryer, query string, args ...any) ([]int64, error) {
	return scanColumn[int64](q.QueryContext(ctx, query, args...))
}

// scanColumn reads every row of a one-column result.
func scanColumn[T any](rows *sql.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// releaseReservationGPUs ends a reservation's hold on its GPUs (it
// completed or was cancelled): the assignment goes at once, and its
// reserved instances get the normal stop. Their GPUs stay held by the
// instances until their agents report them stopped and the GPUs free.
func (db *DB) releaseReservationGPUs(ctx context.Context, tx *sql.Tx, reservationID int64, now time.Time, nodes *[]string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM reservation_gpus WHERE reservation_id = ?`, reservationID); err != nil {
		return fmt.Errorf("release GPUs: %w", err)
	}
	if err := db.stopReservedInstances(ctx, tx, reservationID, now, nodes); err != nil {
		return fmt.Errorf("stop reserved instances: %w", err)
	}
	return nil
}

func (db *DB) stopReservedInstances(ctx context.Context, tx *sql.Tx, reservationID int64, now time.Time, nodes *[]string) error {
	type inst struct {
		id   int64
		node string
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, i *inst) error { return r.Scan(&i.id, &i.node) },
		`SELECT id, coalesce(node_id, '') FROM instances WHERE reservation_id = ? AND status IN ('pending', 'running') AND stop_requested_at IS NULL`, reservationID)
	if err != nil {
		return err
	}
	for _, i := range list {
		if i.node == "" {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'stopped', ended_at = ?, stop_requested_at = ? WHERE id = ?`, unix(now), unix(now), i.id); err != nil {
				return err
			}
			if err := db.emitInstance(ctx, tx, i.id, gpuportal.EventInstanceStopped); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET stop_requested_at = ? WHERE id = ?`, unix(now), i.id); err != nil {
			return err
		}
		if err := bumpNode(ctx, tx, i.node); err != nil {
			return err
		}
		*nodes = append(*nodes, i.node)
	}
	return nil
}

// shortReservation records that a reservation lacks missing GPUs from now on
// and refunds their share of the hours left, saying why (cause:
// gpuportal.Short*).
func (db *DB) shortReservation(ctx context.Context, tx *sql.Tx, r *gpuportal.Reservation, missing int, cause string, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE reservations SET short_gpus = short_gpus + ? WHERE id = ?`, missing, r.ID); err != nil {
		return err
	}
	refund, hoursLeft := gpuportal.ShortfallRefund(r, missing, now)
	if err := db.notify(ctx, tx, r.UserID, gpuportal.NoteReservationShorted, gpuportal.NoteParams{ReservationID: r.ID, Model: r.Model, Region: r.Region,
		Count: r.Count, Start: r.Start, End: r.End, Missing: missing, Refund: refund, Reason: cause}); err != nil {
		return err
	}
	if refund <= 0 {
		return nil
	}
	return db.addLedger(ctx, tx, r.UserID, now, gpuportal.LedgerRefund, -refund, &r.ID,
		fmt.Sprintf("Reservation #%d: %d GPUs could not be provided for the last %d h (%s): refund", r.ID, missing, hoursLeft, gpuportal.ShortfallCauseText(cause)))
}

// scanEach reads every row of a query through a scanner that returns the
// value (scanInstance, scanJob, scanReservation).
func scanEach[T any](ctx context.Context, q queryer, scan func(interface{ Scan(...any) error }) (T, error), query string, args ...any) ([]T, error) {
	return scanAll(ctx, q, func(r *sql.Rows, v *T) error {
		var err error
		*v, err = scan(r)
		return err
	}, query, args...)
}

// scanAll reads every row of a query, each through scan.
func scanAll[T any](ctx context.Context, q queryer, scan func(*sql.Rows, *T) error, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
