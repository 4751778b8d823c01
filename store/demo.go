package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"gpuportal"
)

// SeedDemoHistory writes 30 days of plausible history before now for the
// demo: completed and cancelled reservations, and spot runs whose
// interruptions follow a daily and weekly rhythm (busy weekday daytimes
// reclaim more), so every page has something to show on first start. It
// does nothing when there is spot history already.
func (db *DB) SeedDemoHistory(ctx context.Context, customers []*gpuportal.User, now time.Time) error {
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM spot_runs`).Scan(&n); err != nil || n > 0 || len(customers) == 0 {
		return err
	}
	models, err := db.Models(ctx)
	if err != nil {
		return err
	}
	pol, err := db.Policies(ctx)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(2026, 11))
	err = db.inTx(ctx, "seed demo history", func(tx *sql.Tx) error {
		for _, m := range models {
			policy := pol.For(m.ID)
			spotPrice := policy.SpotPriceOf(m)
			for day := 30; day >= 1; day-- {
				date := now.In(db.Location).AddDate(0, 0, -day)
				midnight := time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, db.Location)
				weekend := date.Weekday() == time.Saturday || date.Weekday() == time.Sunday
				// Reservations: more on weekdays.
				bookings := 2 + rng.IntN(3)
				if weekend {
					bookings = 1 + rng.IntN(2)
				}
				for b := 0; b < bookings; b++ {
					u := customers[rng.IntN(len(customers))]
					start := midnight.Add(time.Duration(6+rng.IntN(12)) * time.Hour)
					end := start.Add(time.Duration(4+rng.IntN(9)) * time.Hour)
					count := 4 << rng.IntN(3)
					q := gpuportal.QuoteFor(m, count, start, end, policy, db.Location)
					if err := db.seedReservation(ctx, tx, u.ID, m, q, policy, start.Add(-time.Duration(24+rng.IntN(200))*time.Hour), rng.IntN(8) == 0); err != nil {
						return named("seed reservation", err)
					}
				}
				// Spot runs, with interruptions likelier on weekday daytimes.
				runs := 8 + rng.IntN(10)
				for r := 0; r < runs; r++ {
					u := customers[rng.IntN(len(customers))]
					start := midnight.Add(time.Duration(rng.IntN(24*60)) * time.Minute)
					length := time.Duration(30+rng.IntN(8*60)) * time.Minute
					gpus := 1 << rng.IntN(4)
					local := start.In(db.Location)
					p := 0.04
					if !weekend && local.Hour() >= 8 && local.Hour() < 20 {
						p = 0.22
					}
					var at time.Time
					var reason gpuportal.InterruptReason
					if rng.Float64() < p {
						at = start.Add(time.Duration(rng.Int64N(int64(length))))
						switch x := rng.IntN(20); {
						case x < 14:
							reason = gpuportal.ReasonReservation
						case x < 18:
							reason = gpuportal.ReasonOnDemand
						case x < 19:
							reason = gpuportal.ReasonNodeFailure
						default:
							reason = gpuportal.ReasonAdmin
						}
					}
					if err := db.seedSpotRun(ctx, tx, u.ID, m.ID, "cd-1", gpus, spotPrice, start, start.Add(length), at, reason); err != nil {
						return named("seed spot run", err)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed demo history: %w", err)
	}
	return db.RollupAll(ctx, now)
}

func (db *DB) seedReservation(ctx context.Context, tx *sql.Tx, userID int64, m gpuportal.Model, q gpuportal.Quote, policy gpuportal.Policy, created time.Time, cancel bool) error {
	quoteJSON, _ := json.Marshal(q)
	tiersJSON, _ := json.Marshal(policy.CancellationTiers)
	status := gpuportal.ReservationCompleted
	if cancel {
		status = gpuportal.ReservationCancelled
	}
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO reservations (user_id, model_id, region_id, count, start_at, end_at, status, price_fen, quote_json, tiers_json, created_at, reminded_start, reminded_end)
		VALUES (?, ?, 'cd-1', ?, ?, ?, ?, ?, ?, ?, ?, 1, 1) RETURNING id`, userID, m.ID, q.Count, unix(q.Start), unix(q.End), status, q.Total, string(quoteJSON), string(tiersJSON), unix(created)).Scan(&id); err != nil {
		return err
	}
	if err := db.addLedger(ctx, tx, userID, created, "reservation", q.Total, &id, fmt.Sprintf("Reservation #%d: %d × %s, cd-1, %d h", id, q.Count, m.Name, len(q.Hours))); err != nil {
		return err
	}
	if !cancel {
		return nil
	}
	// Early enough to be free: demo customers keep their credit.
	at := q.Start.Add(-30 * time.Hour)
	r := &gpuportal.Reservation{Price: q.Total, CancellationTiers: policy.CancellationTiers, Start: q.Start}
	p := gpuportal.PreviewCancellation(r, at)
	if _, err := tx.ExecContext(ctx, `UPDATE reservations SET cancelled_at = ?, fee_fen = ?, refund_fen = ?, late_cancel = ?, sequence = sequence + 1, modified_at = ? WHERE id = ?`, unix(at), p.Fee, p.Refund, p.Late, unix(at), id); err != nil {
		return err
	}
	return db.post(ctx, tx, userID, at, &id, p.Postings(id, q.Total))
}

func (db *DB) seedSpotRun(ctx context.Context, tx *sql.Tx, userID int64, model, region string, gpus int, price gpuportal.Fen, start, end, interruptedAt time.Time, reason gpuportal.InterruptReason) error {
	status := gpuportal.InstanceStopped
	if !interruptedAt.IsZero() {
		status, end = gpuportal.InstanceInterrupted, interruptedAt.Add(2*time.Minute)
	}
	minutes := gpuportal.BillableMinutes(start, end, gpuportal.KindSpot, !interruptedAt.IsZero(), false, 0)
	cost := gpuportal.RunCost(price, gpus, minutes)
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO instances (user_id, kind, model_id, region_id, count, command, status, attempt, checkpoint_key, price_fen, created_at, started_at, ended_at, billed_minutes, cost_fen)
		VALUES (?, 'spot', ?, ?, ?, 'python train.py --resume $GPUPORTAL_CHECKPOINT_DIR', ?, 1, '', ?, ?, ?, ?, ?, ?) RETURNING id`,
		userID, model, region, gpus, status, price, unix(start), unix(start), unix(end), minutes, cost).Scan(&id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE instances SET checkpoint_key = ? WHERE id = ?`, fmt.Sprintf("instance-%d", id), id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO spot_runs (instance_id, attempt, model_id, region_id, gpus, started_at, ended_at) VALUES (?, 1, ?, ?, ?, ?, ?)`,
		id, model, region, gpus, unix(start), unix(end)); err != nil {
		return err
	}
	if !interruptedAt.IsZero() {
		if _, err := tx.ExecContext(ctx, `INSERT INTO interruptions (instance_id, user_id, model_id, region_id, gpus, notice_at, deadline_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			id, userID, model, region, gpus, unix(interruptedAt), unix(interruptedAt.Add(2*time.Minute)), reason); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET notice_at = ?, deadline_at = ?, interrupt_reason = ? WHERE id = ?`, unix(interruptedAt), unix(interruptedAt.Add(2*time.Minute)), reason, id); err != nil {
			return err
		}
	}
	if cost > 0 {
		return db.postLedger(ctx, tx, ledgerPost{userID: userID, at: end, kind: gpuportal.LedgerInstance, amount: cost, instanceID: &id,
			desc: fmt.Sprintf("Instance #%d (spot, %d × %s): %d min", id, gpus, model, minutes)})
	}
	return nil
}

// EnsureDefaultImage puts im at the head of the image catalog — the image
// instances get when they name none — unless the catalog has it already.
// The demo uses it for the image it builds on the spot (its nodes cannot
// pull the catalog's registry images).
func (db *DB) EnsureDefaultImage(ctx context.Context, im gpuportal.Image) error {
	if err := im.Validate(); err != nil {
		return err
	}
	return db.inTx(ctx, "ensure default image", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM images WHERE id = ?`, im.ID).Scan(&n); err != nil || n > 0 {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO images (id, name, reference, description, position, created_at)
			VALUES (?, ?, ?, ?, (SELECT coalesce(min(position), 1) - 1 FROM images), ?)`, im.ID, im.Name, im.Reference, im.Description, unix(db.now()))
		return err
	})
}
