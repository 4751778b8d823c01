package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// catalogEntry checks that a model and region exist and returns the model
// (its list price) and the policy that applies to it. Unknown names are
// invalid input, naming the field.
func (db *DB) catalogEntry(ctx context.Context, q queryer, modelID, regionID string) (*gpuportal.Model, gpuportal.Policy, error) {
	// One query for the three: it runs in every quote and booking, and on
	// PostgreSQL each query is a round trip.
	var m gpuportal.Model
	var regions int
	var doc string
	err := q.QueryRowContext(ctx, `SELECT id, name, memory_gib, list_price_fen,
			(SELECT count(*) FROM regions WHERE id = ?),
			coalesce((SELECT document FROM policies WHERE id = 1), '')
		FROM models WHERE id = ?`, regionID, modelID).Scan(&m.ID, &m.Name, &m.MemoryGiB, &m.ListPrice, &regions, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.Policy{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "model", "Unknown GPU model %q.", modelID)
	} else if err != nil {
		return nil, gpuportal.Policy{}, fmt.Errorf("read model: %w", err)
	}
	if regions == 0 {
		return nil, gpuportal.Policy{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "region", "Unknown region %q.", regionID)
	}
	p, err := decodePolicies(doc)
	if err != nil {
		return nil, gpuportal.Policy{}, err
	}
	return &m, p.For(modelID), nil
}

// Availability returns one slot per hour of [from, to) for a model in a
// region: capacity, reserved, free and the price of that hour. It reads one
// row per hour asked for, whatever the size of the book.
func (db *DB) Availability(ctx context.Context, modelID, regionID string, from, to time.Time) ([]gpuportal.Slot, error) {
	from, to = from.UTC().Truncate(time.Hour), to.UTC()
	if t := to.Truncate(time.Hour); !t.Equal(to) {
		to = t.Add(time.Hour)
	}
	if !to.After(from) {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "to", "The end of the window must be after its start.")
	}
	if to.Sub(from) > gpuportal.MaxAvailabilityHours*time.Hour {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "to", "Ask for at most %d days at a time.", gpuportal.MaxAvailabilityHours/24)
	}
	model, policy, err := db.catalogEntry(ctx, db.read, modelID, regionID)
	if err != nil {
		return nil, err
	}
	capacity, err := db.reservableNow(ctx, db.read, modelID, regionID, policy, false)
	if err != nil {
		return nil, err
	}
	reserved, err := reservedByHour(ctx, db.read, modelID, regionID, from, to)
	if err != nil {
		return nil, err
	}
	maintenance, why, err := db.maintenanceByHour(ctx, db.read, modelID, regionID, from, to)
	if err != nil {
		return nil, err
	}
	now := db.now()
	earliest, latest := policy.BookingWindow(now)
	slots := make([]gpuportal.Slot, 0, int(to.Sub(from)/time.Hour))
	for t := from; t.Before(to); t = t.Add(time.Hour) {
		price, discount := gpuportal.HourPrice(model.ListPrice, policy, t, db.Location)
		r, m := reserved[unix(t)], maintenance[unix(t)]
		slots = append(slots, gpuportal.Slot{
			// A window's GPUs are counted in reserved (they are taken),
			// shown apart.
			Start: t, End: t.Add(time.Hour), Capacity: capacity, Reserved: max(0, r-m), Free: gpuportal.FreeInHour(capacity, r),
			PricePerGPU: price, DiscountPercent: discount, OffPeak: discount > 0,
			Bookable:        !t.Before(earliest) && !t.After(latest),
			MaintenanceGPUs: m, MaintenanceReason: why[unix(t)],
		})
	}
	return slots, nil
}

// Quote prices a booking request without booking it. It applies the same
// validation as Book, so a quote that succeeds can be booked unless the
// capacity or the user's credit runs out meanwhile.
func (db *DB) Quote(ctx context.Context, req gpuportal.BookingRequest) (gpuportal.Quote, error) {
	model, policy, err := db.catalogEntry(ctx, db.read, req.Model, req.Region)
	if err != nil {
		return gpuportal.Quote{}, err
	}
	if err := gpuportal.ValidateBooking(req, policy, db.now().In(db.Location)); err != nil {
		return gpuportal.Quote{}, err
	}
	// A quote for a full window says so (and offers the waitlist) before
	// anyone clicks "book".
	capacity, err := db.reservableNow(ctx, db.read, req.Model, req.Region, policy, false)
	if err != nil {
		return gpuportal.Quote{}, err
	}
	if err := db.checkFits(ctx, db.read, req.Model, req.Region, req.Start.UTC(), req.End.UTC(), req.Count, capacity, db.Location); err != nil {
		return gpuportal.Quote{}, err
	}
	return gpuportal.QuoteFor(*model, req.Count, req.Start, req.End, policy, db.Location), nil
}

// Price is what booking req would cost, its capacity unchecked: for a
// waitlist offer, whose window is held for the one it is offered to (a
// Quote would count the hold as taken).
func (db *DB) Price(ctx context.Context, req gpuportal.BookingRequest) (gpuportal.Quote, error) {
	model, policy, err := db.catalogEntry(ctx, db.read, req.Model, req.Region)
	if err != nil {
		return gpuportal.Quote{}, err
	}
	return gpuportal.QuoteFor(*model, req.Count, req.Start, req.End, policy, db.Location), nil
}

// Book turns a request into a confirmed reservation, all or nothing: the
// rules are checked, then in one write transaction the capacity of every
// hour is taken (never beyond the bookable capacity, whatever the
// concurrency), the reservation stored with its price and the tiers it was
// booked under, and the charge entered in the user's ledger.
func (db *DB) Book(ctx context.Context, user *gpuportal.User, req gpuportal.BookingRequest) (*gpuportal.Reservation, error) {
	req.Start, req.End = req.Start.UTC(), req.End.UTC()
	var res *gpuportal.Reservation
	book := func(tx *sql.Tx) error {
		var err error
		if res, err = db.book(ctx, tx, user.ID, user.MemberID(), req); err != nil {
			return err
		}
		// Its price is the member's spend now (booked for a team).
		return db.checkMemberSpend(ctx, tx, user, 0)
	}
	var err error
	if user.Acting != nil {
		// A member's limit is read and held in one step: one at a time.
		err = db.inTx(ctx, "book", book)
	} else {
		err = db.inConcurrentTx(ctx, "book", book)
	}
	return res, db.kickAfter(ctx, err) // the book changed: waiters, reservations starting soon
}

// book is Book inside a transaction (the waitlist books through it too).
func (db *DB) book(ctx context.Context, tx *sql.Tx, userID int64, createdBy *int64, req gpuportal.BookingRequest) (*gpuportal.Reservation, error) {
	now := db.now()
	model, policy, err := db.catalogEntry(ctx, tx, req.Model, req.Region)
	if err != nil {
		return nil, err
	}
	if err := gpuportal.ValidateBooking(req, policy, now.In(db.Location)); err != nil {
		return nil, err
	}
	// What its launch names is checked before credit, quota and capacity:
	// a booking whose launch can never run says so, not "full".
	var launchJSON sql.NullString
	if req.Launch != nil {
		if err := req.Launch.Validate(); err != nil {
			return nil, err
		}
		if id := req.Launch.ResumeInstanceID; id != nil {
			if _, err := canResume(ctx, tx, userID, req.Model, req.Region, req.Count, *id, "launch.resume_instance_id"); err != nil {
				return nil, err
			}
		} else if _, err := imageForLaunch(ctx, tx, userID, req.Region, req.Launch.Image); err != nil {
			if e, ok := err.(*gpuportal.Error); ok && e.Field == "image" {
				e.Field = "launch.image"
			}
			return nil, err
		}
		if _, err := db.resolveMounts(ctx, tx, userID, req.Region, req.Launch.Volumes); err != nil {
			return nil, err
		}
		if _, err := policy.DiskFor(req.Launch.DiskGiB, "launch.disk_gib"); err != nil {
			return nil, err
		}
		raw, _ := json.Marshal(req.Launch)
		launchJSON = sql.NullString{String: string(raw), Valid: true}
	}
	if err := db.checkCredit(ctx, tx, userID, policy, now); err != nil {
		return nil, err
	}
	if err := db.lockAccount(ctx, tx, userID); err != nil {
		return nil, err
	}
	gpuHours := req.Count * int(req.End.Sub(req.Start)/time.Hour)
	if err := db.checkBookedQuota(ctx, tx, userID, gpuHours); err != nil {
		return nil, err
	}
	if err := db.bookedHours(ctx, tx, userID, gpuHours); err != nil {
		return nil, err
	}
	capacity, err := db.reservableNow(ctx, tx, req.Model, req.Region, policy, true)
	if err != nil {
		return nil, err
	}
	if err := db.takeCapacity(ctx, tx, req.Model, req.Region, req.Start, req.End, req.Count, capacity, db.Location); err != nil {
		return nil, err
	}
	quote := gpuportal.QuoteFor(*model, req.Count, req.Start, req.End, policy, db.Location)
	quoteJSON, _ := json.Marshal(quote)
	tiersJSON, _ := json.Marshal(policy.CancellationTiers)
	res := &gpuportal.Reservation{
		UserID: userID, Model: req.Model, Region: req.Region, Count: req.Count, Start: req.Start, End: req.End,
		Status: gpuportal.ReservationConfirmed, Price: quote.Total, Quote: &quote,
		CancellationTiers: policy.CancellationTiers, CreatedAt: now,
	}
	res.Launch = req.Launch
	res.CreatedBy = createdBy
	res.Labels = req.Labels
	err = tx.QueryRowContext(ctx, `INSERT INTO reservations (user_id, model_id, region_id, count, start_at, end_at, status, price_fen, quote_json, tiers_json, created_at, launch_json, created_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		userID, req.Model, req.Region, req.Count, unix(req.Start), unix(req.End), res.Status, res.Price, string(quoteJSON), string(tiersJSON), unix(now), launchJSON, createdBy).Scan(&res.ID)
	if err != nil {
		return nil, fmt.Errorf("insert reservation: %w", err)
	}
	if err := saveLabels(ctx, tx, labelReservation, res.ID, req.Labels); err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("Reservation #%d: %d × %s, %s, %d h", res.ID, res.Count, model.Name, req.Region, res.Hours())
	// Paid from the balance now, all or nothing with the booking.
	if err := db.charge(ctx, tx, ledgerPost{userID: userID, at: now, kind: gpuportal.LedgerReservation, amount: res.Price, reservationID: &res.ID, desc: desc}); err != nil {
		return nil, err
	}
	if err := db.notify(ctx, tx, userID, gpuportal.NoteBookingConfirmed, gpuportal.NoteParams{ReservationID: res.ID, Model: res.Model, Region: res.Region,
		Count: res.Count, Start: res.Start, End: res.End, Price: res.Price}); err != nil {
		return nil, err
	}
	if err := db.emitReservation(ctx, tx, res.ID, gpuportal.EventReservationConfirm); err != nil {
		return nil, err
	}
	return res, nil
}

// takeCapacity adds count to every hour of [start, end), failing with
// capacity_unavailable (naming the first full hour) if any hour would go
// over capacity. The conditional UPDATE is what guarantees it: under
// SQLite's single writer and under PostgreSQL's row locks alike, two
// bookings cannot both pass it for the last GPUs of an hour. On failure
// some hours may have been taken: the caller rolls back (a booking) or goes
// back to a savepoint (a waitlist offer, see inSavepoint).
func (db *DB) takeCapacity(ctx context.Context, tx *sql.Tx, model, region string, start, end time.Time, count, capacity int, loc *time.Location) error {
	if err := db.ensureUsageRows(ctx, tx, model, region, start, end); err != nil {
		return err
	}
	if err := db.checkFits(ctx, tx, model, region, start, end, count, capacity, loc); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE hourly_usage SET reserved = reserved + ?
		WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ? AND reserved + ? <= ?`,
		count, model, region, unix(start), unix(end), count, capacity)
	if err != nil {
		return fmt.Errorf("take capacity: %w", err)
	}
	if n, _ := res.RowsAffected(); int(n) != int(end.Sub(start)/time.Hour) {
		// A booking on another portal took the last GPUs of an hour
		// between the check and the update.
		return capacityError(start, 0, count, loc)
	}
	return nil
}

// checkFits reports capacity_unavailable, naming the first hour of
// [start, end) where count more GPUs would not fit
// (gpuportal.FitsInHour, written in SQL); nil when all fit.
func (db *DB) checkFits(ctx context.Context, q queryer, model, region string, start, end time.Time, count, capacity int, loc *time.Location) error {
	if !gpuportal.FitsInHour(capacity, 0, count) {
		return capacityError(start, capacity, count, loc)
	}
	var full int64
	var reserved int
	err := q.QueryRowContext(ctx, `SELECT hour, reserved FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ?
		AND reserved + ? > ? ORDER BY hour LIMIT 1`, model, region, unix(start), unix(end), count, capacity).Scan(&full, &reserved)
	if err == nil {
		return capacityError(fromUnix(full), gpuportal.FreeInHour(capacity, reserved), count, loc)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("check capacity: %w", err)
	}
	return nil
}

func capacityError(hour time.Time, free, count int, loc *time.Location) error {
	return gpuportal.FieldErrorf(gpuportal.ECAPACITY, "start", "Not enough GPUs free at %s (%s): %d free, %d asked for. You can join the waitlist for this window.",
		hour.In(loc).Format("2006-01-02 15:04"), loc.String(), free, count)
}

// ensureUsageRows makes sure every hour of [start, end) has a row, so the
// conditional UPDATE sees (and locks) them all.
func (db *DB) ensureUsageRows(ctx context.Context, tx *sql.Tx, model, region string, start, end time.Time) error {
	var b strings.Builder
	b.WriteString(`INSERT INTO hourly_usage (model_id, region_id, hour, reserved) VALUES `)
	args := make([]any, 0, 3*int(end.Sub(start)/time.Hour))
	for t := start; t.Before(end); t = t.Add(time.Hour) {
		if len(args) > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, 0)")
		args = append(args, model, region, unix(t))
	}
	b.WriteString(` ON CONFLICT (model_id, region_id, hour) DO NOTHING`)
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("ensure hourly usage rows: %w", err)
	}
	return nil
}

// releaseCapacity gives back count GPUs for every hour of [start, end).
func releaseCapacity(ctx context.Context, tx *sql.Tx, model, region string, start, end time.Time, count int) error {
	if !end.After(start) {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE hourly_usage SET reserved = reserved - ? WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ?`,
		count, model, region, unix(start), unix(end))
	if err != nil {
		return fmt.Errorf("release capacity: %w", err)
	}
	return nil
}

// checkCredit refuses users with more late cancellations in the trailing 30
// days than the policy allows, telling them when they can book again.
func (db *DB) checkCredit(ctx context.Context, q queryer, userID int64, p gpuportal.Policy, now time.Time) error {
	times, err := scanAll(ctx, q, func(r *sql.Rows, t *time.Time) error {
		var at int64
		err := r.Scan(&at)
		*t = fromUnix(at)
		return err
	}, `SELECT cancelled_at FROM reservations WHERE user_id = ? AND late_cancel = 1 AND cancelled_at > ?`, userID, unix(now.Add(-gpuportal.CreditWindow)))
	if err != nil {
		return fmt.Errorf("read late cancellations: %w", err)
	}
	if until := gpuportal.CreditBlockedUntil(times, p.LateCancelLimit30d, now); !until.IsZero() {
		return gpuportal.FieldErrorf(gpuportal.EPOLICY, "credit", "You have cancelled late more than %d times in 30 days, so you cannot book until %s.",
			p.LateCancelLimit30d, gpuportal.SiteTime(until, db.Location))
	}
	return nil
}

const reservationColumns = `id, user_id, model_id, region_id, count, start_at, end_at, status, price_fen, quote_json, tiers_json, created_at, cancelled_at, fee_fen, refund_fen, sequence, modified_at, launch_json,
	created_by, (SELECT t.id FROM teams t WHERE t.account_id = reservations.user_id) AS team_id`

func scanReservation(row interface{ Scan(...any) error }) (*gpuportal.Reservation, error) {
	var r gpuportal.Reservation
	var start, end, created int64
	var quoteJSON, tiersJSON string
	var cancelled, fee, refund, modified sql.NullInt64
	var launch sql.NullString
	if err := row.Scan(&r.ID, &r.UserID, &r.Model, &r.Region, &r.Count, &start, &end, &r.Status, &r.Price, &quoteJSON, &tiersJSON, &created, &cancelled, &fee, &refund,
		&r.Sequence, &modified, &launch, &r.CreatedBy, &r.TeamID); err != nil {
		return nil, err
	}
	if launch.Valid && launch.String != "" {
		r.Launch = &gpuportal.LaunchSpec{}
		if err := json.Unmarshal([]byte(launch.String), r.Launch); err != nil {
			return nil, fmt.Errorf("decode launch of reservation %d: %w", r.ID, err)
		}
	}
	r.Start, r.End, r.CreatedAt = fromUnix(start), fromUnix(end), fromUnix(created)
	r.ModifiedAt = r.CreatedAt
	if modified.Valid {
		r.ModifiedAt = fromUnix(modified.Int64)
	}
	r.CancelledAt = fromNullUnix(cancelled)
	if fee.Valid {
		f, rf := gpuportal.Fen(fee.Int64), gpuportal.Fen(refund.Int64)
		r.Fee, r.Refund = &f, &rf
	}
	var q gpuportal.Quote
	if err := json.Unmarshal([]byte(quoteJSON), &q); err != nil {
		return nil, fmt.Errorf("decode quote of reservation %d: %w", r.ID, err)
	}
	r.Quote = &q
	if err := json.Unmarshal([]byte(tiersJSON), &r.CancellationTiers); err != nil {
		return nil, fmt.Errorf("decode tiers of reservation %d: %w", r.ID, err)
	}
	return &r, nil
}

// ReservationFilter narrows a reservation list.
type ReservationFilter struct {
	Status  gpuportal.ReservationStatus // one status, or "" for all
	StartAt time.Time                   // only those starting at this time, unless zero
	// Tab: "upcoming" (confirmed and active, soonest first) or "past"
	// (completed and cancelled, latest first); "" for all, latest first.
	Tab    string
	Limit  int // default 200, at most 1000
	Offset int
	Total  *int // set: also how many the whole list has
	// UserID: only this user's (an admin's view of one customer); 0: all
	// the caller may see.
	UserID int64
	// Labels: only those with every one of these labels.
	Labels gpuportal.LabelFilter
}

// Reservation list tabs.
const (
	TabUpcoming = "upcoming"
	TabPast     = "past"
)

// Reservations lists the user's reservations (an admin's: everybody's),
// latest start first.
func (db *DB) Reservations(ctx context.Context, user *gpuportal.User, f ReservationFilter) ([]gpuportal.Reservation, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 200
	}
	q := visibleTo(user, "reservations").ofUser(f.UserID).labelled(labelReservation, f.Labels)
	if f.Status != "" {
		switch f.Status {
		case gpuportal.ReservationConfirmed, gpuportal.ReservationActive, gpuportal.ReservationCompleted, gpuportal.ReservationCancelled:
		default:
			return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "status", "Unknown status %q.", f.Status)
		}
		q.and("status = ?", f.Status)
	}
	if !f.StartAt.IsZero() {
		q.and("start_at = ?", unix(f.StartAt))
	}
	order := "start_at DESC, id DESC"
	switch f.Tab {
	case "":
	case TabUpcoming:
		q.and("status IN ('confirmed', 'active')")
		order = "start_at, id"
	case TabPast:
		q.and("status IN ('completed', 'cancelled')")
	default:
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "tab", "Unknown list %q: upcoming or past.", f.Tab)
	}
	query, args, err := q.page(ctx, db, Page{Limit: f.Limit, Offset: f.Offset, Total: f.Total}, reservationColumns, order)
	if err != nil {
		return nil, err
	}
	list, err := scanEach(ctx, db.read, scanReservation, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", err)
	}
	if err := reservationLabels(ctx, db.read, list); err != nil {
		return nil, err
	}
	out := make([]gpuportal.Reservation, len(list))
	for k, r := range list {
		out[k] = *r
	}
	for k := range out {
		if out[k].Status == gpuportal.ReservationActive {
			if out[k].GPUs, err = db.ReservationGPUs(ctx, out[k].ID); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Reservation returns one reservation the user may see (their own, or any
// for an admin). Another customer's is not_found, exactly like a missing one.
func (db *DB) Reservation(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Reservation, error) {
	r, err := reservationFor(ctx, db.read, user, id)
	if err != nil {
		return nil, err
	}
	if err := reservationLabels(ctx, db.read, []*gpuportal.Reservation{r}); err != nil {
		return nil, err
	}
	if r.Status == gpuportal.ReservationActive {
		if r.GPUs, err = db.ReservationGPUs(ctx, r.ID); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func reservationFor(ctx context.Context, q queryer, user *gpuportal.User, id int64) (*gpuportal.Reservation, error) {
	r, err := scanReservation(q.QueryRowContext(ctx, `SELECT `+reservationColumns+` FROM reservations WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !user.CanSee(r.UserID)) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Reservation %d not found.", id)
	}
	return r, err
}

// CancellationPreview is what cancelling now would cost.
type CancellationPreview = gpuportal.CancellationPreview

// PreviewCancellation tells the fee and refund of cancelling now, under the
// tiers the reservation was booked with.
func (db *DB) PreviewCancellation(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Reservation, CancellationPreview, error) {
	r, err := db.Reservation(ctx, user, id)
	if err != nil {
		return nil, CancellationPreview{}, err
	}
	if err := cancellable(r); err != nil {
		return r, CancellationPreview{}, err
	}
	return r, gpuportal.PreviewCancellation(r, db.now()), nil
}

func cancellable(r *gpuportal.Reservation) error {
	switch r.Status {
	case gpuportal.ReservationConfirmed, gpuportal.ReservationActive:
		return nil
	}
	return gpuportal.Errorf(gpuportal.ECONFLICT, "Reservation %d is %s and cannot be cancelled.", r.ID, r.Status)
}

// markCancelled records a reservation's cancellation with its fee and
// refund, and gives back what it held: its booked hours, the capacity of
// every hour left (from the current one on for one under way), and the
// GPUs of one under way — its reserved instances get the normal stop, so
// nothing keeps running on cancelled hours (nodes: theirs, to wake).
func (db *DB) markCancelled(ctx context.Context, tx *sql.Tx, r *gpuportal.Reservation, p gpuportal.CancellationPreview, now time.Time, nodes *[]string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE reservations SET status = 'cancelled', cancelled_at = ?, fee_fen = ?, refund_fen = ?, late_cancel = ?,
		sequence = sequence + 1, modified_at = ? WHERE id = ?`,
		unix(now), p.Fee, p.Refund, p.Late, unix(now), r.ID); err != nil {
		return fmt.Errorf("cancel reservation: %w", err)
	}
	if err := db.bookedHours(ctx, tx, r.UserID, -r.Count*r.Hours()); err != nil {
		return named("booked hours", err)
	}
	from := r.Start
	if now.After(from) {
		from = now.Truncate(time.Hour)
	}
	if err := releaseCapacity(ctx, tx, r.Model, r.Region, from, r.End, r.Count); err != nil {
		return named("release capacity", err)
	}
	if r.Status == gpuportal.ReservationActive {
		if err := db.releaseReservationGPUs(ctx, tx, r.ID, now, nodes); err != nil {
			return fmt.Errorf("cancel reservation %d: %w", r.ID, err)
		}
	}
	return nil
}

// Cancel cancels a reservation: the fee of its booked tiers is kept, the
// rest refunded, the capacity of its remaining hours freed at once, and a
// fee-bearing cancellation counted against the user's credit and audited.
func (db *DB) Cancel(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Reservation, error) {
	var out *gpuportal.Reservation
	var nodes []string
	err := db.inTx(ctx, "cancel", func(tx *sql.Tx) error {
		r, err := reservationFor(ctx, tx, user, id)
		if err != nil {
			return named("read reservation", err)
		}
		if err := cancellable(r); err != nil {
			return err
		}
		now := db.now()
		p := gpuportal.PreviewCancellation(r, now)
		if err := db.markCancelled(ctx, tx, r, p, now, &nodes); err != nil {
			return err
		}
		if err := db.post(ctx, tx, r.UserID, now, &r.ID, p.Postings(r.ID, r.Price)); err != nil {
			return named("post to the ledger", err)
		}
		if err := db.notify(ctx, tx, r.UserID, gpuportal.NoteBookingCancelled, gpuportal.NoteParams{ReservationID: r.ID, Model: r.Model, Region: r.Region,
			Count: r.Count, Start: r.Start, End: r.End, Price: r.Price, Fee: p.Fee, Refund: p.Refund}); err != nil {
			return err
		}
		if err := db.emitReservation(ctx, tx, r.ID, gpuportal.EventReservationCancel); err != nil {
			return err
		}
		if p.Fee > 0 {
			if err := db.audit(ctx, tx, user.ID, "reservation.cancel_with_fee", fmt.Sprintf("reservation/%d", r.ID),
				map[string]any{"status": r.Status, "price_fen": r.Price},
				map[string]any{"status": "cancelled", "fee_fen": p.Fee, "refund_fen": p.Refund}); err != nil {
				return err
			}
		}
		out, err = reservationFor(ctx, tx, user, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, nodes...)
	db.Kick(ctx) // the freed hours go to waiters now, not at the next minute
	return out, nil
}
