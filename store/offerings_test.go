package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

func h100(count int, start, end time.Time) gpuportal.BookingRequest {
	return gpuportal.BookingRequest{Model: "h100-80g", Region: "cd-1", Count: count, Start: start, End: end}
}

// Offerings come from the book as it is: no window over a booked hour,
// each priced as its quote, cheapest first.
func TestOfferingsFromTheBook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "h100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	e := storetest.Epoch
	// Tuesday 00:00–08:00 Shanghai (the cheap night) is taken.
	night := e.Add(16 * time.Hour)
	if _, err := db.Book(ctx, u, h100(6, night, night.Add(8*time.Hour))); err != nil {
		t.Fatal(err)
	}
	got, err := db.Offerings(ctx, gpuportal.OfferingRequest{Model: "h100-80g", Region: "cd-1", Count: 4, DurationHours: 4,
		Earliest: e.Add(time.Hour), LatestEnd: e.Add(48 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != gpuportal.DefaultOfferings {
		t.Fatalf("%d offerings; want %d", len(got), gpuportal.DefaultOfferings)
	}
	for k, o := range got {
		if o.Start.Before(night.Add(8*time.Hour)) && o.End.After(night) {
			t.Errorf("offering %d (%s) overlaps the full night", k, o.Start)
		}
		q, err := db.Quote(ctx, o.Booking("h100-80g", "cd-1"))
		if err != nil || q.Total != o.Total {
			t.Errorf("offering %d costs %d; its quote: %d, %v", k, o.Total, q.Total, err)
		}
		if k > 0 && o.Total < got[k-1].Total {
			t.Errorf("offering %d is cheaper than the one before it", k)
		}
	}
	// The cheapest left are Wednesday's night hours.
	if want := e.Add(40 * time.Hour); !got[0].Start.Equal(want) || got[0].OffPeakHours != 4 {
		t.Errorf("cheapest starts %s with %d off-peak hours; want %s, 4", got[0].Start, got[0].OffPeakHours, want)
	}
	// Booking it is an ordinary booking at the price shown.
	r, err := db.Book(ctx, u, got[0].Booking("h100-80g", "cd-1"))
	if err != nil || r.Price != got[0].Total {
		t.Fatalf("book the cheapest: %v, %+v", err, r)
	}
	if _, err := db.Offerings(ctx, gpuportal.OfferingRequest{Model: "h100-80g", Region: "cd-1", Count: 1, DurationHours: 2}); gpuportal.ErrorField(err) != "duration_hours" {
		t.Errorf("2 h under a 4 h minimum: %v", err)
	}
	if _, err := db.Offerings(ctx, gpuportal.OfferingRequest{Model: "x", Region: "cd-1", Count: 1, DurationHours: 4}); gpuportal.ErrorField(err) != "model" {
		t.Errorf("unknown model: %v", err)
	}
	// A full window: the nearest windows either side, and how many GPUs
	// its hours still have.
	alt, err := db.AlternativesFor(ctx, h100(8, night, night.Add(4*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if alt.MostFree != 2 || len(alt.Offerings) != 3 {
		t.Fatalf("alternatives = %+v", alt)
	}
	// The nearest earlier window ends as the night starts, the nearest
	// later one starts as it ends, and the cheapest nearby is a later
	// night (the part of it not booked above).
	for k, want := range []time.Time{night.Add(-4 * time.Hour), night.Add(8 * time.Hour), night.Add(28 * time.Hour)} {
		if !alt.Offerings[k].Start.Equal(want) {
			t.Errorf("alternative %d starts %s; want %s", k, alt.Offerings[k].Start, want)
		}
	}
}

// Two customers book the same best offering at once: exactly one wins,
// the other gets 409 and the hour is never over capacity.
func TestTwoCustomersBookTheSameOffering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "h100-80g", 1, 8)
	users := []*gpuportal.User{
		storetest.MustCreateUser(t, db, "a@example.com", gpuportal.RoleCustomer),
		storetest.MustCreateUser(t, db, "b@example.com", gpuportal.RoleCustomer),
	}
	for round := 0; round < 5; round++ {
		best, err := db.Offerings(ctx, gpuportal.OfferingRequest{Model: "h100-80g", Region: "cd-1", Count: 8, DurationHours: 4, Limit: 1})
		if err != nil || len(best) != 1 {
			t.Fatalf("round %d: %v, %v", round, best, err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(users))
		for k, u := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[k] = db.Book(ctx, u, best[0].Booking("h100-80g", "cd-1"))
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch gpuportal.ErrorCode(err) {
			case "":
				won++
			case gpuportal.ECAPACITY:
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d bookings of the same 8 GPUs won; want exactly 1", round, won)
		}
		slots, _ := db.Availability(ctx, "h100-80g", "cd-1", best[0].Start, best[0].End)
		for _, s := range slots {
			if s.Reserved > s.Capacity {
				t.Fatalf("hour %s overbooked: %d of %d", s.Start, s.Reserved, s.Capacity)
			}
		}
	}
}

// Extension: up to the next full hour and no further (409, nothing
// changed), at the price of the added hours, in the ledger and audit log.
func TestExtendUpToTheNextFullHour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "h100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	e := storetest.Epoch
	start := e.Add(26 * time.Hour) // Tuesday 10:00 Shanghai
	r, err := db.Book(ctx, u, h100(4, start, start.Add(8*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	// Two hours after its end another customer takes 6 of the 8 GPUs.
	if _, err := db.Book(ctx, other, h100(6, start.Add(10*time.Hour), start.Add(14*time.Hour))); err != nil {
		t.Fatal(err)
	}
	_, ext, err := db.Extension(ctx, u, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ext.MaxHours != 2 || ext.LimitedBy != gpuportal.ExtensionLimitCapacity || len(ext.Options) != 2 {
		t.Fatalf("extension = %+v; want 2 hours, limited by capacity", ext)
	}
	before, _ := db.Balance(ctx, u)
	if _, err := db.Extend(ctx, u, r.ID, 3); gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		t.Fatalf("extend into the full hour: %v", err)
	}
	if _, err := db.Extend(ctx, other, r.ID, 1); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("another customer extends it: %v", err)
	}
	if _, err := db.Extend(ctx, u, r.ID, 0); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Fatalf("extend by 0: %v", err)
	}
	if _, err := db.Extend(ctx, u, r.ID, 400); gpuportal.ErrorCode(err) != gpuportal.EPOLICY {
		t.Fatalf("extend past the maximum duration: %v", err)
	}
	same, _ := db.Reservation(ctx, u, r.ID)
	after, _ := db.Balance(ctx, u)
	if !same.End.Equal(r.End) || same.Price != r.Price || after.Available != before.Available {
		t.Fatalf("a refused extension changed something: end %s price %d balance %d→%d", same.End, same.Price, before.Available, after.Available)
	}
	q := quoteOf(t, db, h100(4, r.End, r.End.Add(2*time.Hour)))
	got, err := db.Extend(ctx, u, r.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !got.End.Equal(r.End.Add(2*time.Hour)) || got.Price != r.Price+ext.Options[1].Price || got.Hours() != 10 {
		t.Fatalf("extended = end %s price %d; want end %s price %d", got.End, got.Price, r.End.Add(2*time.Hour), r.Price+ext.Options[1].Price)
	}
	if ext.Options[1].Price != q.Total {
		t.Errorf("the option's price %d is not the quote's %d", ext.Options[1].Price, q.Total)
	}
	final, _ := db.Balance(ctx, u)
	if final.Available != before.Available-ext.Options[1].Price {
		t.Errorf("balance %d → %d; want %d less", before.Available, final.Available, ext.Options[1].Price)
	}
	entries, sum, _ := db.Ledger(ctx, u.ID, 10)
	if entries[0].Amount != ext.Options[1].Price || entries[0].ReservationID == nil || *entries[0].ReservationID != r.ID || sum != final.Balance {
		t.Errorf("ledger = %+v (sum %d, balance %d)", entries[0], sum, final.Balance)
	}
	if log, _ := db.Audit(ctx, gpuportal.AuditFilter{Action: "reservation.extend"}); len(log) != 1 {
		t.Errorf("audit entries for the extension: %d", len(log))
	}
	// The next hour is now full for it.
	if _, ext, _ := db.Extension(ctx, u, r.ID); ext.MaxHours != 0 {
		t.Errorf("after extending to the full hour: %+v", ext)
	}
	if _, err := db.Extend(ctx, u, r.ID, 1); gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		t.Errorf("one more hour: %v", err)
	}
	// The hours it took are booked: nobody else gets them.
	slots, _ := db.Availability(ctx, "h100-80g", "cd-1", r.End, r.End.Add(2*time.Hour))
	for _, s := range slots {
		if s.Reserved != 4 {
			t.Errorf("hour %s: %d reserved; want 4", s.Start, s.Reserved)
		}
	}
}

// An active reservation extended keeps its GPUs and its reserved instance
// through the old end; they stop at the new one.
func TestExtendedActiveReservationKeepsItsGPUsAndInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "h100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Add(2 * time.Hour)
	r, err := db.Book(ctx, u, h100(4, start, start.Add(4*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	// The other 4 GPUs are booked from the old end on: the extension must
	// not hand over this reservation's GPUs at the old end.
	if _, err := db.Book(ctx, other, h100(4, start.Add(4*time.Hour), start.Add(10*time.Hour))); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start)
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindReserved, Count: 4, Command: "train", ReservationID: &r.ID})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start.Add(time.Minute))
	fakeAgent{t, db}.runAll()
	gpus, _ := db.ReservationGPUs(ctx, r.ID)
	tick(t, db, clock, start.Add(3*time.Hour+21*time.Minute)) // the end reminder, 40 minutes before
	// Inside the last half hour the instance has its stop notice...
	clock.Set(start.Add(3*time.Hour + 40*time.Minute))
	i := getInstance(t, db, inst.ID)
	if d, _ := db.DesiredFor(ctx, i.Node); d.Workloads[0].Interrupt == nil {
		t.Fatal("no stop notice before the old end")
	}
	// ...which the extension withdraws.
	if _, err := db.Extend(ctx, u, r.ID, 3); err != nil {
		t.Fatal(err)
	}
	if d, _ := db.DesiredFor(ctx, i.Node); d.Workloads[0].Interrupt != nil {
		t.Fatalf("after the extension the instance still has a notice: %+v", d.Workloads[0].Interrupt)
	}
	tick(t, db, clock, start.Add(4*time.Hour))
	tick(t, db, clock, start.Add(5*time.Hour))
	if got, _ := db.Reservation(ctx, u, r.ID); got.Status != gpuportal.ReservationActive || len(got.GPUs) != 4 {
		t.Fatalf("past the old end: %+v", got)
	}
	if now, _ := db.ReservationGPUs(ctx, r.ID); !sameSet(now, gpus) {
		t.Errorf("GPUs moved: %v → %v", gpus, now)
	}
	if i := getInstance(t, db, inst.ID); i.Status != gpuportal.InstanceRunning || !sameSet(i.GPUs, gpus) {
		t.Fatalf("instance past the old end: %s on %v", i.Status, i.GPUs)
	}
	if d, _ := db.DesiredFor(ctx, i.Node); len(notStopping(d)) == 0 {
		t.Fatal("the agent is asked to stop it at the old end")
	}
	// The end reminder comes again for the new end, saying how many hours
	// could be added then.
	tick(t, db, clock, start.Add(6*time.Hour+20*time.Minute))
	notes, _ := db.InApp(ctx, u.ID, 50)
	reminders := 0
	for _, n := range notes {
		if n.Kind == gpuportal.NoteReservationEnds {
			reminders++
			if n.Params.End.Equal(start.Add(7*time.Hour)) && n.Params.ExtendHours != 336-7 {
				t.Errorf("the reminder for the new end says %d hours could be added; want %d", n.Params.ExtendHours, 336-7)
			}
		}
	}
	if reminders != 2 {
		t.Errorf("%d end reminders; want one for each end", reminders)
	}
	tick(t, db, clock, start.Add(7*time.Hour))
	if got, _ := db.Reservation(ctx, u, r.ID); got.Status != gpuportal.ReservationCompleted {
		t.Errorf("at the new end: %s", got.Status)
	}
	if d, _ := db.DesiredFor(ctx, i.Node); len(notStopping(d)) != 0 {
		t.Error("still running at the new end")
	}
}

// quoteOf prices a request by the quote rule whether or not it fits now.
func quoteOf(t *testing.T, db *store.DB, req gpuportal.BookingRequest) gpuportal.Quote {
	t.Helper()
	m, err := db.Model(context.Background(), req.Model)
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.Policies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return gpuportal.QuoteFor(*m, req.Count, req.Start, req.End, p.For(req.Model), db.Location)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}

// A flexible waitlist entry books, by itself, the earliest window of its
// length that a cancellation frees within its range.
func TestFlexibleWaitlistBooksTheEarliestWindowThatFrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "h100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	e := storetest.Epoch
	a, err := db.Book(ctx, other, h100(8, e.Add(2*time.Hour), e.Add(14*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Book(ctx, other, h100(8, e.Add(14*time.Hour), e.Add(26*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	req := gpuportal.OfferingRequest{Model: "h100-80g", Region: "cd-1", Count: 8, DurationHours: 8, Earliest: e.Add(2 * time.Hour), LatestEnd: e.Add(26 * time.Hour)}
	w, err := db.JoinFlexibleWaitlist(ctx, u, req)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Flexible || w.Position != 1 || w.DurationHours != 8 || w.EarliestPossible == nil || !w.EarliestPossible.Equal(e.Add(26*time.Hour)) {
		t.Fatalf("entry = %+v (earliest possible %v); want position 1, earliest possible start right after the range", w, w.EarliestPossible)
	}
	tick(t, db, clock, e.Add(time.Minute))
	if list, _ := db.Waitlist(ctx, u); list[0].Status != gpuportal.WaitWaiting {
		t.Fatalf("booked while everything is full: %+v", list[0])
	}
	// The later booking is cancelled: the entry gets its first 8 hours.
	if _, err := db.Cancel(ctx, other, b.ID); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, e.Add(2*time.Minute))
	list, _ := db.Waitlist(ctx, u)
	if list[0].Status != gpuportal.WaitClaimed || list[0].ReservationID == nil {
		t.Fatalf("after the cancellation: %+v", list[0])
	}
	r, _ := db.Reservation(ctx, u, *list[0].ReservationID)
	if !r.Start.Equal(e.Add(14*time.Hour)) || !r.End.Equal(e.Add(22*time.Hour)) || r.Count != 8 {
		t.Fatalf("booked %s–%s × %d; want the earliest freed window %s–%s", r.Start, r.End, r.Count, e.Add(14*time.Hour), e.Add(22*time.Hour))
	}
	if q := quoteOf(t, db, h100(8, r.Start, r.End)); r.Price != q.Total {
		t.Errorf("price %d; the quote says %d", r.Price, q.Total)
	}
	_ = a
	// An entry whose range can no longer hold a window expires.
	w2, err := db.JoinFlexibleWaitlist(ctx, u, gpuportal.OfferingRequest{Model: "h100-80g", Region: "cd-1", Count: 8, DurationHours: 4, Earliest: e.Add(3 * time.Hour), LatestEnd: e.Add(12 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, e.Add(8*time.Hour))
	list, _ = db.Waitlist(ctx, u)
	for _, x := range list {
		if x.ID == w2.ID && x.Status != gpuportal.WaitExpired {
			t.Errorf("entry whose last start passed: %s", x.Status)
		}
	}
	// Bad requests change nothing.
	for _, bad := range []gpuportal.OfferingRequest{
		{Model: "h100-80g", Region: "cd-1", Count: 8, DurationHours: 2},
		{Model: "h100-80g", Region: "cd-1", Count: 8, DurationHours: 8, Earliest: e.Add(30 * time.Hour), LatestEnd: e.Add(32 * time.Hour)},
		{Model: "h100-80g", Region: "cd-1", Count: 0, DurationHours: 8},
	} {
		if _, err := db.JoinFlexibleWaitlist(ctx, u, bad); err == nil {
			t.Errorf("joined with %+v", bad)
		}
	}
	if after, _ := db.Waitlist(ctx, u); len(after) != len(list) {
		t.Errorf("bad requests added entries: %d → %d", len(list), len(after))
	}
}

// An extension the balance cannot pay is 402 and changes nothing: not the
// end, not the hours taken, not the balance.
func TestExtensionTheBalanceCannotPay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "h100-80g", 1, 8)
	poor := storetest.MustCreatePoorUser(t, db, "poor@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Add(26 * time.Hour)
	req := h100(1, start, start.Add(4*time.Hour))
	q := quoteOf(t, db, req)
	if _, err := db.Credit(ctx, nil, poor.ID, gpuportal.CreditRequest{Amount: q.Total, Note: "exactly one booking"}); err != nil {
		t.Fatal(err)
	}
	r, err := db.Book(ctx, poor, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Extend(ctx, poor, r.ID, 2); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Fatalf("extend with nothing left = %v; want insufficient_funds", err)
	}
	got, _ := db.Reservation(ctx, poor, r.ID)
	slots, _ := db.Availability(ctx, "h100-80g", "cd-1", r.End, r.End.Add(2*time.Hour))
	b, _ := db.Balance(ctx, poor)
	if !got.End.Equal(r.End) || got.Price != r.Price || slots[0].Reserved != 0 || b.Available != 0 {
		t.Fatalf("the refused extension changed something: end %s, price %d, reserved %d, available %d", got.End, got.Price, slots[0].Reserved, b.Available)
	}
}
