package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// One customer's bad data never halts the tick for others (DESIGN §8):
// the applier carries out each decision (a reservation's start, a
// placement, an interruption, a book-keeping step) in a savepoint of its
// own. A decision that fails is rolled back to its savepoint, recorded in
// tick_failures, its owner told once, and the rest of the tick commits.
// Only a failure of the transaction itself (the savepoint cannot be
// rolled back to) ends the tick.

// decision names one decision of a tick: the step it belongs to
// (scheduler.Step*), what it is about ("reservation 12") and whose it is
// (0: nobody's in particular, such as a book-keeping step).
type decision struct {
	step    string
	subject string
	userID  int64
	// Where the owner is read when the decision fails and userID is 0:
	// the row of the tick's own table it is about (the owner is wanted
	// only then, and most decisions never fail).
	ownerTable string
	ownerRow   int64
	// What the owner's notice links to, when the decision is about it.
	reservationID, instanceID, jobID int64
}

// decisionFault, when set (tests only), is asked before each decision
// runs; the error it returns fails that decision as if its own writes had.
type decisionFault func(step, subject string) error

// each runs fn as one decision: in a savepoint, recovering a panic as a
// failure. A failure is recorded and reported (false, nil); the error
// returned is only ever the transaction's own.
func (a *applier) each(ctx context.Context, d decision, fn func() error) (bool, error) {
	if _, err := a.tx.ExecContext(ctx, `SAVEPOINT decision`); err != nil {
		return false, fmt.Errorf("savepoint: %w", err)
	}
	// What fn adds to the applier's own counters is undone with its writes.
	nodes, launched, balanceStops := len(a.nodes), a.launched, a.balanceStops
	err := a.runDecision(d, fn)
	if err == nil {
		if _, err := a.tx.ExecContext(ctx, `RELEASE SAVEPOINT decision`); err != nil {
			return false, fmt.Errorf("release savepoint: %w", err)
		}
		return true, nil
	}
	if _, rbErr := a.tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT decision`); rbErr != nil {
		return false, fmt.Errorf("%s %s: %w (and its rollback: %v)", d.step, d.subject, err, rbErr)
	}
	if _, relErr := a.tx.ExecContext(ctx, `RELEASE SAVEPOINT decision`); relErr != nil {
		return false, fmt.Errorf("release savepoint: %w", relErr)
	}
	a.nodes, a.launched, a.balanceStops = a.nodes[:nodes], launched, balanceStops
	if err := a.db.recordFailure(ctx, a.tx, d, err, a.now); err != nil {
		return false, fmt.Errorf("record the failure of %s %s: %w", d.step, d.subject, err)
	}
	a.failed++
	return false, nil
}

func (a *applier) runDecision(d decision, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	if a.db.decisionFault != nil {
		if err := a.db.decisionFault(d.step, d.subject); err != nil {
			return err
		}
	}
	return fn()
}

// recordFailure keeps a failed decision in tick_failures and, the first
// time a decision fails, tells its owner what did not happen and why.
// The reason they read is the error's own message when it is one they can
// act on (a suspended volume, a missing image), never an internal one.
func (db *DB) recordFailure(ctx context.Context, tx *sql.Tx, d decision, cause error, now time.Time) error {
	if d.userID == 0 && d.ownerTable != "" {
		// A row that cannot be read leaves the failure nobody's in particular.
		_ = tx.QueryRowContext(ctx, `SELECT user_id FROM `+d.ownerTable+` WHERE id = ?`, d.ownerRow).Scan(&d.userID)
	}
	var owner sql.NullInt64
	if d.userID != 0 {
		owner = sql.NullInt64{Int64: d.userID, Valid: true}
	}
	var times int
	err := tx.QueryRowContext(ctx, `INSERT INTO tick_failures (step, subject, user_id, error, first_at, last_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (step, subject) DO UPDATE SET error = excluded.error, last_at = excluded.last_at, times = tick_failures.times + 1
		RETURNING times`, d.step, d.subject, owner, cause.Error(), unix(now), unix(now)).Scan(&times)
	if err != nil {
		return err
	}
	if times > 1 || d.userID == 0 {
		return nil
	}
	p := gpuportal.NoteParams{Kind: d.step, Reason: customerReason(cause), Subject: d.subject, ReservationID: d.reservationID, InstanceID: d.instanceID, JobID: d.jobID}
	if d.step != gpuportal.StepLaunch {
		return db.notify(ctx, tx, d.userID, gpuportal.NoteScheduleFailed, p)
	}
	r, err := reservationFor(ctx, tx, nil, d.reservationID)
	if err != nil {
		return err
	}
	p.Model, p.Region, p.Count, p.Start, p.End = r.Model, r.Region, r.Count, r.Start, r.End
	return db.notify(ctx, tx, d.userID, gpuportal.NoteReservationLaunchFailed, p)
}

// customerReason is what a customer is told of a failure: the message of
// an error they can act on, or a plain "internal error" (the details are
// the operators').
func customerReason(err error) string {
	var e *gpuportal.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "an internal error (the operators have been alerted)"
}

// TickFailure is one recorded failed decision (the admin's view).
type TickFailure struct {
	Step    string    `json:"step"`
	Subject string    `json:"subject"`
	UserID  *int64    `json:"user_id"`
	Error   string    `json:"error"`
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
	Times   int       `json:"times"`
}

// TickFailures lists the decisions that failed since since, latest first
// (at most limit).
func (db *DB) TickFailures(ctx context.Context, since time.Time, limit int) ([]TickFailure, error) {
	return scanAll(ctx, db.read, func(r *sql.Rows, f *TickFailure) error {
		var first, last int64
		var owner sql.NullInt64
		if err := r.Scan(&f.Step, &f.Subject, &owner, &f.Error, &first, &last, &f.Times); err != nil {
			return err
		}
		if owner.Valid {
			f.UserID = &owner.Int64
		}
		f.FirstAt, f.LastAt = fromUnix(first), fromUnix(last)
		return nil
	}, `SELECT step, subject, user_id, error, first_at, last_at, times FROM tick_failures WHERE last_at >= ? ORDER BY last_at DESC, id DESC LIMIT ?`, unix(since), limit)
}

// aboutReservation names a decision about a reservation; its owner is
// read should the decision fail (a decision about a row that cannot be
// read is still made, and fails on its own).
func (a *applier) aboutReservation(step string, id int64) decision {
	d := about(step, "reservations", "reservation", id)
	d.reservationID = id
	return d
}

func (a *applier) aboutInstance(step string, id int64) decision {
	d := about(step, "instances", "instance", id)
	d.instanceID = id
	return d
}

func (a *applier) aboutJob(step string, id int64) decision {
	d := about(step, "jobs", "job", id)
	d.jobID = id
	return d
}

// about names a decision about row id of table (one of the tick's own
// tables, never input), whose owner is that row's user.
func about(step, table, noun string, id int64) decision {
	return decision{step: step, subject: fmt.Sprintf("%s %d", noun, id), ownerTable: table, ownerRow: id}
}

func (a *applier) aboutWaitlistEntry(id int64) decision {
	return about(gpuportal.StepWaitlist, "waitlist_entries", "waitlist entry", id)
}
