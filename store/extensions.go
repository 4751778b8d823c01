package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gpuportal"
)

// extensionOf is how r could be extended now (gpuportal.ExtensionFor over
// the hours after its end, up to the policy's longest booking).
func (db *DB) extensionOf(ctx context.Context, q queryer, r *gpuportal.Reservation) (gpuportal.Extension, gpuportal.Policy, *gpuportal.Model, error) {
	model, policy, err := db.catalogEntry(ctx, q, r.Model, r.Region)
	if err != nil {
		return gpuportal.Extension{}, policy, nil, err
	}
	room := max(0, policy.MaxDurationHours-r.Hours())
	g, err := db.hourGrid(ctx, q, model, r.Region, policy, r.End, r.End.Add(time.Duration(room)*time.Hour))
	if err != nil {
		return gpuportal.Extension{}, policy, nil, err
	}
	return gpuportal.ExtensionFor(r, g), policy, model, nil
}

// Extension says how many hours the user's reservation could be extended
// by now, and what each option costs (GET /reservations/{id}/extension).
func (db *DB) Extension(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Reservation, gpuportal.Extension, error) {
	r, err := reservationFor(ctx, db.read, user, id)
	if err != nil {
		return nil, gpuportal.Extension{}, err
	}
	if err := gpuportal.CanExtend(r, db.now()); err != nil {
		return r, gpuportal.Extension{}, err
	}
	ext, _, _, err := db.extensionOf(ctx, db.read, r)
	return r, ext, err
}

// Extend adds hours to a confirmed or active reservation, all or nothing:
// every added hour's capacity is taken (409 naming the first full one),
// the added hours are priced now and paid from the balance (402), the
// quote, price and calendar sequence updated, and the change audited. An
// active reservation keeps its GPUs and its instances: nothing ends at the
// old end, because the end the scheduler reads has moved. The end
// reminder is due again for the new end.
func (db *DB) Extend(ctx context.Context, user *gpuportal.User, id int64, hours int) (*gpuportal.Reservation, error) {
	var nodes []string
	err := db.inTx(ctx, "extend", func(tx *sql.Tx) error {
		r, err := reservationFor(ctx, tx, user, id)
		if err != nil {
			return named("read reservation", err)
		}
		if r.UserID != user.ID {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only the reservation's owner can extend it (it is paid from their balance).")
		}
		now := db.now()
		if err := gpuportal.CanExtend(r, now); err != nil {
			return err
		}
		ext, policy, model, err := db.extensionOf(ctx, tx, r)
		if err != nil {
			return named("read extension", err)
		}
		if err := gpuportal.ValidateExtension(r, hours, ext, policy, db.Location); err != nil {
			return err
		}
		if err := db.lockAccount(ctx, tx, r.UserID); err != nil {
			return named("lock account", err)
		}
		if err := db.checkBookedQuota(ctx, tx, r.UserID, r.Count*hours); err != nil {
			return named("check booked quota", err)
		}
		if err := db.bookedHours(ctx, tx, r.UserID, r.Count*hours); err != nil {
			return named("booked hours", err)
		}
		newEnd := r.End.Add(time.Duration(hours) * time.Hour)
		capacity, err := db.reservableNow(ctx, tx, r.Model, r.Region, policy, true)
		if err != nil {
			return named("count reservable GPUs", err)
		}
		if err := db.takeCapacity(ctx, tx, r.Model, r.Region, r.End, newEnd, r.Count, capacity, db.Location); err != nil {
			return named("take capacity", err)
		}
		added := gpuportal.QuoteFor(*model, r.Count, r.End, newEnd, policy, db.Location)
		quote := gpuportal.QuoteFor(*model, r.Count, r.Start, newEnd, policy, db.Location)
		if r.Quote != nil {
			// The hours booked keep the prices they were booked at.
			quote = *r.Quote
			quote.End = newEnd
			quote.Hours = append(quote.Hours, added.Hours...)
			quote.ListTotal += added.ListTotal
			quote.Total += added.Total
		}
		quoteJSON, _ := json.Marshal(quote)
		if _, err := tx.ExecContext(ctx, `UPDATE reservations SET end_at = ?, price_fen = price_fen + ?, quote_json = ?, reminded_end = 0,
			sequence = sequence + 1, modified_at = ? WHERE id = ?`, unix(newEnd), added.Total, string(quoteJSON), unix(now), r.ID); err != nil {
			return fmt.Errorf("extend reservation %d: %w", r.ID, err)
		}
		desc := fmt.Sprintf("Reservation #%d extended by %d h: %d × %s, %s", r.ID, hours, r.Count, model.Name, r.Region)
		if err := db.charge(ctx, tx, ledgerPost{userID: r.UserID, at: now, kind: gpuportal.LedgerReservation, amount: added.Total, reservationID: &r.ID, desc: desc}); err != nil {
			return err
		}
		if err := db.audit(ctx, tx, user.ID, "reservation.extend", fmt.Sprintf("reservation/%d", r.ID),
			map[string]any{"end": r.End, "price_fen": r.Price},
			map[string]any{"end": newEnd, "price_fen": r.Price + added.Total, "added_hours": hours, "added_fen": added.Total}); err != nil {
			return err
		}
		// Its instances' agents may be counting down to the old end (the
		// stop notice before it): tell them now that it moved.
		nodes, err = scanColumn[string](tx.QueryContext(ctx, `SELECT DISTINCT node_id FROM instances WHERE reservation_id = ? AND status IN ('pending', 'running') AND node_id IS NOT NULL`, r.ID))
		if err != nil {
			return named("read instances", err)
		}
		for _, n := range nodes {
			if err := bumpNode(ctx, tx, n); err != nil {
				return named("bump node", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, nodes...)
	db.Kick(ctx)
	return db.Reservation(ctx, user, id)
}

// extendableHours is how many hours r could be extended by now, for the
// end reminder; 0 when it cannot be (or the answer is not known).
func (db *DB) extendableHours(ctx context.Context, q queryer, r *gpuportal.Reservation) int {
	ext, _, _, err := db.extensionOf(ctx, q, r)
	if err != nil {
		return 0
	}
	return ext.MaxHours
}
