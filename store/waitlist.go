package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
	"gpuportal/plan"
)

const waitColumns = `id, user_id, model_id, region_id, count, start_at, end_at, auto_book, status, created_at, offer_expires_at, reservation_id, note, duration_hours`

func scanWait(row interface{ Scan(...any) error }) (*gpuportal.WaitlistEntry, error) {
	var w gpuportal.WaitlistEntry
	var start, end, created int64
	var expires, res sql.NullInt64
	if err := row.Scan(&w.ID, &w.UserID, &w.Model, &w.Region, &w.Count, &start, &end, &w.AutoBook, &w.Status, &created, &expires, &res, &w.Note, &w.DurationHours); err != nil {
		return nil, err
	}
	w.Start, w.End, w.CreatedAt = fromUnix(start), fromUnix(end), fromUnix(created)
	if w.DurationHours > 0 {
		w.Flexible, w.Earliest, w.LatestEnd = true, &w.Start, &w.End
	}
	w.OfferExpiresAt = fromNullUnix(expires)
	if res.Valid {
		w.ReservationID = &res.Int64
	}
	return &w, nil
}

// JoinWaitlist puts a request for a window on the waitlist. It must be a
// request the user could book (same rules); whether it is full now does not
// matter — if it fits, the next tick offers (or books) it at once.
func (db *DB) JoinWaitlist(ctx context.Context, user *gpuportal.User, req gpuportal.BookingRequest, autoBook bool) (*gpuportal.WaitlistEntry, error) {
	req.Start, req.End = req.Start.UTC(), req.End.UTC()
	var out *gpuportal.WaitlistEntry
	err := db.inTx(ctx, "join waitlist", func(tx *sql.Tx) error {
		_, policy, err := db.catalogEntry(ctx, tx, req.Model, req.Region)
		if err != nil {
			return named("read catalog entry", err)
		}
		if err := gpuportal.ValidateBooking(req, policy, db.now().In(db.Location)); err != nil {
			return err
		}
		if err := db.checkWaitlistQuota(ctx, tx, user.ID); err != nil {
			return named("check waitlist quota", err)
		}
		// An entry holds capacity for its owner when it frees: only one
		// who could pay for it now may join (402 otherwise), and the
		// planner passes over entries their owners cannot pay then.
		model, _, err := db.catalogEntry(ctx, tx, req.Model, req.Region)
		if err != nil {
			return named("read catalog entry", err)
		}
		q := gpuportal.QuoteFor(*model, req.Count, req.Start, req.End, policy, db.Location)
		b, err := db.balanceIn(ctx, tx, user.ID, db.now())
		if err != nil {
			return named("read balance", err)
		}
		if b.Available < q.Total {
			return insufficient(q.Total, b.Available)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO waitlist_entries (user_id, model_id, region_id, count, start_at, end_at, auto_book, status, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'waiting', ?) RETURNING id`, user.ID, req.Model, req.Region, req.Count, unix(req.Start), unix(req.End), autoBook, unix(db.now())).Scan(&id); err != nil {
			return fmt.Errorf("join waitlist: %w", err)
		}
		out, err = waitFor(ctx, tx, user, id)
		return err
	})
	return out, db.kickAfter(ctx, err) // capacity may be free for it already
}

// JoinFlexibleWaitlist puts a flexible request on the waitlist: count GPUs
// for DurationHours anywhere in [Earliest, LatestEnd). The scheduler books
// the earliest window of that length that frees within the range, by
// itself (first fit over the entries in order), and tells the owner. The
// owner must be able to pay for the cheapest such window now (402
// otherwise).
func (db *DB) JoinFlexibleWaitlist(ctx context.Context, user *gpuportal.User, req gpuportal.OfferingRequest) (*gpuportal.WaitlistEntry, error) {
	var out *gpuportal.WaitlistEntry
	err := db.inTx(ctx, "join flexible waitlist", func(tx *sql.Tx) error {
		model, policy, err := db.catalogEntry(ctx, tx, req.Model, req.Region)
		if err != nil {
			return named("read catalog entry", err)
		}
		now := db.now()
		req.Sort, req.Limit = gpuportal.OfferingsByPrice, 1
		if req, err = gpuportal.NormalizeOfferingRequest(req, policy, now); err != nil {
			return err
		}
		if err := db.checkWaitlistQuota(ctx, tx, user.ID); err != nil {
			return named("check waitlist quota", err)
		}
		// The cheapest window of the range as if every hour were free.
		open := gpuportal.HourGrid{From: req.Earliest, Model: *model, Policy: policy, Loc: db.Location}
		for range int(req.LatestEnd.Sub(req.Earliest) / time.Hour) {
			open.Free = append(open.Free, req.Count)
		}
		cheapest := gpuportal.FindOfferings(open, req, now)
		if len(cheapest) == 0 {
			return gpuportal.FieldErrorf(gpuportal.EPOLICY, "earliest", "No window of %d hours in this range can be booked (bookings can start at most %d days ahead).", req.DurationHours, policy.MaxAdvanceDays)
		}
		b, err := db.balanceIn(ctx, tx, user.ID, now)
		if err != nil {
			return named("read balance", err)
		}
		if b.Available < cheapest[0].Total {
			return insufficient(cheapest[0].Total, b.Available)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO waitlist_entries (user_id, model_id, region_id, count, start_at, end_at, auto_book, status, created_at, duration_hours)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'waiting', ?, ?) RETURNING id`, user.ID, req.Model, req.Region, req.Count, unix(req.Earliest), unix(req.LatestEnd), true, unix(now), req.DurationHours).Scan(&id); err != nil {
			return fmt.Errorf("join waitlist: %w", err)
		}
		out, err = waitFor(ctx, tx, user, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := db.earliestPossible(ctx, db.read, out); err != nil {
		return nil, err
	}
	return out, db.kickAfter(ctx, nil) // a window may be free for it already
}

// earliestPossible fills in when a waiting flexible entry's window could
// start given the book today (inside its range or after it), so its owner
// sees how far the book is from giving it one.
func (db *DB) earliestPossible(ctx context.Context, q queryer, w *gpuportal.WaitlistEntry) error {
	if !w.Flexible || w.Status != gpuportal.WaitWaiting {
		return nil
	}
	model, policy, err := db.catalogEntry(ctx, q, w.Model, w.Region)
	if err != nil {
		return err
	}
	now := db.now()
	first, latest := policy.BookingWindow(now)
	if w.Start.After(first) {
		first = w.Start
	}
	end := latest.Add(time.Duration(w.DurationHours+1) * time.Hour).Truncate(time.Hour)
	if !end.After(first) {
		return nil
	}
	g, err := db.hourGrid(ctx, q, model, w.Region, policy, first, end)
	if err != nil {
		return err
	}
	found := gpuportal.FindOfferings(g, gpuportal.OfferingRequest{Count: w.Count, DurationHours: w.DurationHours, Earliest: first, LatestEnd: end,
		Sort: gpuportal.OfferingsByStart, Limit: 1}, now)
	if len(found) > 0 {
		w.EarliestPossible = &found[0].Start
	}
	return nil
}

func waitFor(ctx context.Context, q queryer, user *gpuportal.User, id int64) (*gpuportal.WaitlistEntry, error) {
	w, err := scanWait(q.QueryRowContext(ctx, `SELECT `+waitColumns+` FROM waitlist_entries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !user.CanSee(w.UserID)) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Waitlist entry %d not found.", id)
	} else if err != nil {
		return nil, err
	}
	if w.Status == gpuportal.WaitWaiting || w.Status == gpuportal.WaitOffered {
		// Position: how many live entries for the same model and region
		// joined before it, plus one.
		if err := q.QueryRowContext(ctx, `SELECT count(*) + 1 FROM waitlist_entries WHERE model_id = ? AND region_id = ? AND status IN ('waiting', 'offered') AND id < ?`,
			w.Model, w.Region, w.ID).Scan(&w.Position); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Waitlist lists the user's entries (an admin's: everybody's), newest
// first: the latest 500.
func (db *DB) Waitlist(ctx context.Context, user *gpuportal.User) ([]gpuportal.WaitlistEntry, error) {
	return db.WaitlistPage(ctx, user, Page{Limit: 500})
}

// WaitlistPage is a page of the user's entries (an admin's: everybody's),
// newest first.
func (db *DB) WaitlistPage(ctx context.Context, user *gpuportal.User, p Page) ([]gpuportal.WaitlistEntry, error) {
	query, args, err := visibleTo(user, "waitlist_entries").page(ctx, db, p, "id", "id DESC")
	if err != nil {
		return nil, err
	}
	ids, err := queryIDs(ctx, db.read, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list waitlist: %w", err)
	}
	out := []gpuportal.WaitlistEntry{}
	for _, id := range ids {
		w, err := waitFor(ctx, db.read, user, id)
		if err != nil {
			return nil, err
		}
		if w.UserID == user.ID { // an admin's list of everybody's skips the search
			if err := db.earliestPossible(ctx, db.read, w); err != nil {
				return nil, err
			}
		}
		out = append(out, *w)
	}
	return out, nil
}

// HeldOffers are the user's waitlist offers still open at now, the
// soonest to lapse first: the navigation counts them down on every page.
func (db *DB) HeldOffers(ctx context.Context, userID int64, now time.Time) ([]gpuportal.WaitlistEntry, error) {
	ids, err := queryIDs(ctx, db.read, `SELECT id FROM waitlist_entries WHERE user_id = ? AND status = 'offered' AND offer_expires_at > ? ORDER BY offer_expires_at, id`,
		userID, unix(now))
	if err != nil {
		return nil, fmt.Errorf("held offers: %w", err)
	}
	var out []gpuportal.WaitlistEntry
	for _, id := range ids {
		w, err := waitFor(ctx, db.read, nil, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *w)
	}
	return out, nil
}

// LeaveWaitlist cancels an entry; an offer's held capacity is freed at once.
func (db *DB) LeaveWaitlist(ctx context.Context, user *gpuportal.User, id int64) error {
	return db.kickAfter(ctx, db.inTx(ctx, "leave waitlist", func(tx *sql.Tx) error {
		w, err := waitFor(ctx, tx, user, id)
		if err != nil {
			return named("read waitlist entry", err)
		}
		switch w.Status {
		case gpuportal.WaitOffered:
			if err := releaseCapacity(ctx, tx, w.Model, w.Region, w.Start, w.End, w.Count); err != nil {
				return named("release capacity", err)
			}
		case gpuportal.WaitWaiting:
		default:
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Waitlist entry %d is %s already.", id, w.Status)
		}
		_, err = tx.ExecContext(ctx, `UPDATE waitlist_entries SET status = 'cancelled' WHERE id = ?`, id)
		return err
	}))
}

// ClaimOffer turns an offer into a confirmed reservation at the price of
// this moment. An offer that has expired (or was never made, or is taken)
// is gone (410).
func (db *DB) ClaimOffer(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Reservation, error) {
	var res *gpuportal.Reservation
	var gone error
	err := db.inTx(ctx, "claim offer", func(tx *sql.Tx) error {
		w, err := waitFor(ctx, tx, user, id)
		if err != nil {
			return named("read waitlist entry", err)
		}
		if w.UserID != user.ID {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Waitlist entry %d not found.", id)
		}
		now := db.now()
		switch {
		case w.Status == gpuportal.WaitWaiting:
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Entry %d has no offer yet; you will be told when capacity frees.", id)
		case w.Status != gpuportal.WaitOffered:
			return gpuportal.Errorf(gpuportal.EGONE, "The offer for entry %d is gone (%s).", id, w.Status)
		case !now.Before(*w.OfferExpiresAt):
			// Expired but not yet swept: expire it now, so the next waiter
			// gets it; the user is told it is gone.
			if err := db.expireOffer(ctx, tx, w); err != nil {
				return named("expire offer", err)
			}
			gone = gpuportal.Errorf(gpuportal.EGONE, "The offer for entry %d expired at %s.", id, gpuportal.SiteTime(*w.OfferExpiresAt, db.Location))
			return nil
		}
		if err := releaseCapacity(ctx, tx, w.Model, w.Region, w.Start, w.End, w.Count); err != nil {
			return named("release capacity", err)
		}
		res, err = db.book(ctx, tx, user.ID, user.MemberID(), gpuportal.BookingRequest{Model: w.Model, Region: w.Region, Count: w.Count, Start: w.Start, End: w.End})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE waitlist_entries SET status = 'claimed', reservation_id = ? WHERE id = ?`, res.ID, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	db.Kick(ctx) // an expired offer passes to the next waiter; a claim changes the book
	if gone != nil {
		return nil, gone
	}
	return res, nil
}

func (db *DB) expireOffer(ctx context.Context, tx *sql.Tx, w *gpuportal.WaitlistEntry) error {
	if err := releaseCapacity(ctx, tx, w.Model, w.Region, w.Start, w.End, w.Count); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE waitlist_entries SET status = 'expired', note = 'offer expired' WHERE id = ?`, w.ID); err != nil {
		return err
	}
	return db.notify(ctx, tx, w.UserID, gpuportal.NoteWaitlistExpired, gpuportal.NoteParams{EntryID: w.ID, Model: w.Model, Region: w.Region, Count: w.Count, Start: w.Start, End: w.End})
}

// noteAutoBookUnpaid tells the owner of an auto_book entry, once, that
// capacity freed but their balance cannot pay: it stays waiting (a top-up
// lets the next tick book it). An account that never paid anything in is
// not messaged about money (a ¥0 account is no way to send messages).
func (db *DB) noteAutoBookUnpaid(ctx context.Context, tx *sql.Tx, w *gpuportal.WaitlistEntry, params gpuportal.NoteParams) error {
	if w.Note == unpaidNote {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE waitlist_entries SET note = ? WHERE id = ?`, unpaidNote, w.ID); err != nil {
		return err
	}
	paid, err := everPaidIn(ctx, tx, w.UserID)
	if err != nil || !paid {
		return err
	}
	return db.notify(ctx, tx, w.UserID, gpuportal.NoteAutoBookUnpaid, params)
}

// everPaidIn reports whether money ever reached the user's balance (a
// top-up or an administrator's credit).
func everPaidIn(ctx context.Context, q queryer, userID int64) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM ledger_entries WHERE user_id = ? AND kind IN ('topup', 'credit') AND amount_fen < 0`, userID).Scan(&n)
	return n > 0, err
}

// waitlist carries out the planner's waitlist decisions: expiries, offers
// (the capacity is held for the claim window) and auto_book bookings.
func (a *applier) waitlist(ctx context.Context, decisions plan.Decisions) error {
	var done []plan.WaitlistAction
	for _, act := range decisions.Waitlist {
		var carried bool
		ok, err := a.each(ctx, a.aboutWaitlistEntry(act.EntryID), func() error {
			w, err := waitFor(ctx, a.tx, nil, act.EntryID)
			if err != nil {
				return err
			}
			carried, err = a.waitlistEntry(ctx, w, act)
			return err
		})
		if err != nil {
			return err
		}
		if ok && carried {
			done = append(done, act)
		}
	}
	a.applied.Waitlist = done
	return nil
}

// waitlistEntry carries out one decision; false: it was not, for a
// reason found in the transaction (the entry stays as it was).
func (a *applier) waitlistEntry(ctx context.Context, w *gpuportal.WaitlistEntry, act plan.WaitlistAction) (bool, error) {
	db, tx, now := a.db, a.tx, a.now
	params := gpuportal.NoteParams{EntryID: w.ID, Model: w.Model, Region: w.Region, Count: w.Count, Start: w.Start, End: w.End}
	switch act.Action {
	case plan.WaitlistExpireOffer:
		return true, db.expireOffer(ctx, tx, w)
	case plan.WaitlistExpireEntry:
		note := "the window started"
		if w.Flexible {
			note = "no window of its length can start in its range any more"
		}
		if _, err := tx.ExecContext(ctx, `UPDATE waitlist_entries SET status = 'expired', note = ? WHERE id = ?`, note, w.ID); err != nil {
			return true, err
		}
		return true, db.notify(ctx, tx, w.UserID, gpuportal.NoteWaitlistExpired, params)
	case plan.WaitlistBook:
		var r *gpuportal.Reservation
		err := inSavepoint(ctx, tx, func() error {
			var err error
			req := gpuportal.BookingRequest{Model: w.Model, Region: w.Region, Count: w.Count, Start: w.Start, End: w.End}
			if w.Flexible {
				req.Start, req.End = act.Start, act.End // the window the planner found in its range
			}
			r, err = db.book(ctx, tx, w.UserID, nil, req)
			return err
		})
		if gpuportal.ErrorCode(err) == gpuportal.EFUNDS {
			return false, db.noteAutoBookUnpaid(ctx, tx, w, params)
		}
		if code := gpuportal.ErrorCode(err); code == gpuportal.EPOLICY || code == gpuportal.EINVALID || code == gpuportal.ECAPACITY {
			// Not bookable for this user now (credit, lead time), or a
			// booking on another portal took the hours since the snapshot:
			// it stays waiting; its start expiring it eventually.
			return false, nil
		} else if err != nil {
			return true, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE waitlist_entries SET status = 'claimed', reservation_id = ?, offered_at = ? WHERE id = ?`, r.ID, unix(now), w.ID); err != nil {
			return true, err
		}
		params.ReservationID, params.Price, params.Start, params.End = r.ID, r.Price, r.Start, r.End
		return true, db.notify(ctx, tx, w.UserID, gpuportal.NoteWaitlistBooked, params)
	case plan.WaitlistUnpaid:
		return true, db.noteAutoBookUnpaid(ctx, tx, w, params)
	case plan.WaitlistOffer:
		_, policy, err := db.catalogEntry(ctx, tx, w.Model, w.Region)
		if err != nil {
			return true, err
		}
		capacity, err := db.reservableNow(ctx, tx, w.Model, w.Region, policy, false)
		if err != nil {
			return true, err
		}
		err = inSavepoint(ctx, tx, func() error {
			return db.takeCapacity(ctx, tx, w.Model, w.Region, w.Start, w.End, w.Count, capacity, db.Location)
		})
		if gpuportal.ErrorCode(err) == gpuportal.ECAPACITY {
			return false, nil // a booking on another portal took the hours since the snapshot
		} else if err != nil {
			return true, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE waitlist_entries SET status = 'offered', offered_at = ?, offer_expires_at = ? WHERE id = ?`, unix(now), unix(act.Expires), w.ID); err != nil {
			return true, err
		}
		params.Expires = act.Expires
		if err := db.emit(ctx, tx, w.UserID, gpuportal.EventWaitlistOffered, func() (any, error) {
			return scanWait(tx.QueryRowContext(ctx, `SELECT `+waitColumns+` FROM waitlist_entries WHERE id = ?`, w.ID))
		}); err != nil {
			return true, err
		}
		return true, db.notify(ctx, tx, w.UserID, gpuportal.NoteWaitlistOffer, params)
	}
	return true, fmt.Errorf("unknown waitlist action %q", act.Action)
}

// unpaidNote marks an auto-book entry whose owner could not pay when its
// capacity freed (they were told).
const unpaidNote = "not enough balance to book"

// inSavepoint runs fn inside tx so that, when it fails, what it wrote is
// undone and the transaction can go on: the scheduler's waitlist step
// skips an entry whose hours another portal's booking took meanwhile, and
// moves on to the next.
func inSavepoint(ctx context.Context, tx *sql.Tx, fn func() error) error {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT waitlist_entry`); err != nil {
		return err
	}
	if err := fn(); err != nil {
		if _, rbErr := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT waitlist_entry`); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		_, _ = tx.ExecContext(ctx, `RELEASE SAVEPOINT waitlist_entry`)
		return err
	}
	_, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT waitlist_entry`)
	return err
}
