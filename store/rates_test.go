package store_test

import (
	"context"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

func TestRateBuckets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rate float64
		want string
	}{{0, "<5%"}, {0.0499, "<5%"}, {0.05, "5-10%"}, {0.0999, "5-10%"}, {0.10, "10-15%"}, {0.15, "15-20%"}, {0.1999, "15-20%"}, {0.20, ">20%"}, {1, ">20%"}} {
		if got := gpuportal.RateBucket(tt.rate); got != tt.want {
			t.Errorf("RateBucket(%v) = %q; want %q", tt.rate, got, tt.want)
		}
	}
}

// Hand-built history: 20 instances ran in the last 30 days (plus old ones
// that do not count), one was interrupted — exactly 5 %.
func TestRatesFromHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t) // now: Mon 2026-11-30 08:00 Shanghai (00:00 UTC)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	now := clock.Now()
	var runs []store.SpotRunForTest
	for i := int64(1); i <= 20; i++ {
		start := now.Add(-time.Duration(i)*24*time.Hour - 12*time.Hour) // 20:00 Shanghai
		runs = append(runs, store.SpotRunForTest{Instance: i, GPUs: 1, Start: start, End: start.Add(2 * time.Hour)})
	}
	// Older than 30 days: not counted.
	runs = append(runs, store.SpotRunForTest{Instance: 99, GPUs: 1, Start: now.Add(-40 * 24 * time.Hour), End: now.Add(-39 * 24 * time.Hour)})
	// One hour with 4 GPU-hours of spot on Monday 09:00–10:00 Shanghai a
	// week ago (01:00 UTC), and its interruptions: three chained within 3
	// minutes (one burst), one 10 minutes later (another burst).
	mon := time.Date(2026, 11, 23, 9, 0, 0, 0, storetest.Shanghai)
	runs = append(runs, store.SpotRunForTest{Instance: 50, GPUs: 4, Start: mon, End: mon.Add(time.Hour)})
	ints := []store.InterruptionForTest{
		{Instance: 50, At: mon.Add(10 * time.Minute), Reason: gpuportal.ReasonReservation},
		{Instance: 50, At: mon.Add(12 * time.Minute), Reason: gpuportal.ReasonReservation},
		{Instance: 50, At: mon.Add(14*time.Minute + 30*time.Second), Reason: gpuportal.ReasonOnDemand},
		{Instance: 50, At: mon.Add(25 * time.Minute), Reason: gpuportal.ReasonAdmin},
	}
	if err := db.InsertSpotHistoryForTest(ctx, u.ID, "a100-80g", "cd-1", runs, ints); err != nil {
		t.Fatal(err)
	}
	if err := db.RollupAll(ctx, now); err != nil {
		t.Fatal(err)
	}
	r, err := db.Rates(ctx, "a100-80g", "cd-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	// 21 ran (20 + instance 50), 1 interrupted.
	if r.Trailing.Instances != 21 || r.Trailing.Interrupted != 1 {
		t.Fatalf("trailing = %+v", r.Trailing)
	}
	if r.Bursts != 2 {
		t.Fatalf("bursts = %d; want 2 (three within 3 minutes count once)", r.Bursts)
	}
	if r.Reasons[gpuportal.ReasonReservation] != 2 || r.Reasons[gpuportal.ReasonOnDemand] != 1 || r.Reasons[gpuportal.ReasonAdmin] != 1 {
		t.Fatalf("reasons = %v", r.Reasons)
	}
	// Monday 09:00 Shanghai is cell 9: 4 interruptions per 4 GPU-hours.
	if r.GPUHours[9] != 4 || r.ByHour[9] != 100 {
		t.Fatalf("cell 9 = %v interruptions/100 GPU-h over %v GPU-h", r.ByHour[9], r.GPUHours[9])
	}
	for i, v := range r.ByHour {
		if i != 9 && v != 0 {
			t.Fatalf("cell %d = %v", i, v)
		}
	}
	if len(r.ByHour) != 168 {
		t.Fatalf("%d cells", len(r.ByHour))
	}
}

func TestRateEdgeExactlyFivePercent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	now := clock.Now()
	var runs []store.SpotRunForTest
	for i := int64(1); i <= 20; i++ {
		runs = append(runs, store.SpotRunForTest{Instance: i, GPUs: 1, Start: now.Add(-time.Duration(i) * time.Hour)}) // still running
	}
	if err := db.InsertSpotHistoryForTest(ctx, u.ID, "h100-80g", "cd-1", runs, []store.InterruptionForTest{{Instance: 7, At: now.Add(-time.Minute), Reason: gpuportal.ReasonReservation}}); err != nil {
		t.Fatal(err)
	}
	r, err := db.Rates(ctx, "h100-80g", "cd-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Trailing.Rate != 0.05 || r.Trailing.Bucket != "5-10%" {
		t.Fatalf("trailing = %+v", r.Trailing)
	}
}

// safe_until comes from the reservation book.
func TestSafeUntilFromTheBook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	if r, _ := db.Rates(ctx, "a100-80g", "cd-1", 2); r.SafeUntil != nil {
		t.Fatalf("empty book: safe until %v", r.SafeUntil)
	}
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, storetest.Shanghai)
	if _, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 6, Start: start, End: start.Add(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// 2 GPUs fit beside the 6 booked; 3 do not.
	if r, _ := db.Rates(ctx, "a100-80g", "cd-1", 2); r.SafeUntil != nil {
		t.Fatalf("2 GPUs: safe until %v", r.SafeUntil)
	}
	if r, _ := db.Rates(ctx, "a100-80g", "cd-1", 3); r.SafeUntil == nil || !r.SafeUntil.Equal(start) {
		t.Fatalf("3 GPUs: safe until %v; want %v", r.SafeUntil, start)
	}
}

// The demo's history gives every page something to show.
func TestSeedDemoHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	if err := db.SeedDemoHistory(ctx, []*gpuportal.User{u}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	r, err := db.Rates(ctx, "a100-80g", "cd-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Trailing.Instances < 200 || r.Trailing.Interrupted == 0 || r.Bursts == 0 || r.Reasons[gpuportal.ReasonReservation] == 0 {
		t.Fatalf("rates after seeding: %+v", r.Trailing)
	}
	// Weekday daytime is interrupted more than weekday nights.
	day, night := 0.0, 0.0
	for d := 0; d < 5; d++ {
		for h := 0; h < 24; h++ {
			if h >= 8 && h < 20 {
				day += r.ByHour[d*24+h]
			} else {
				night += r.ByHour[d*24+h]
			}
		}
	}
	if day <= night {
		t.Fatalf("no daily rhythm: day %v night %v", day, night)
	}
	list, _ := db.Reservations(ctx, u, store.ReservationFilter{Limit: 1000})
	if len(list) < 30 {
		t.Fatalf("%d reservations seeded", len(list))
	}
	// Seeding twice does nothing.
	if err := db.SeedDemoHistory(ctx, []*gpuportal.User{u}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if again, _ := db.Reservations(ctx, u, store.ReservationFilter{Limit: 1000}); len(again) != len(list) {
		t.Fatal("seeded twice")
	}
}

// The trailing counts come from the daily roll-up plus what it has not
// taken in yet, and count an instance once either way.
func TestTrailingCountsBeforeAndAfterTheRollup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	now := clock.Now()
	runs := []store.SpotRunForTest{
		{Instance: 1, GPUs: 1, Start: now.Add(-50 * time.Hour), End: now.Add(-48 * time.Hour)}, // ended
		{Instance: 1, GPUs: 1, Start: now.Add(-3 * time.Hour)},                                 // and running again
		{Instance: 2, GPUs: 1, Start: now.Add(-5 * time.Hour), End: now.Add(-4 * time.Hour)},
		{Instance: 3, GPUs: 1, Start: now.Add(-45 * 24 * time.Hour), End: now.Add(-44 * 24 * time.Hour)}, // long ago
	}
	ints := []store.InterruptionForTest{
		{Instance: 2, At: now.Add(-4*time.Hour - time.Minute), Reason: gpuportal.ReasonReservation},
		{Instance: 2, At: now.Add(-5 * time.Hour), Reason: gpuportal.ReasonReservation},
	}
	if err := db.InsertSpotHistoryForTest(ctx, u.ID, "a100-80g", "cd-1", runs, ints); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		r, err := db.Rates(ctx, "a100-80g", "cd-1", 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Trailing.Instances != 2 || r.Trailing.Interrupted != 1 {
			t.Fatalf("%s: %+v", when, r.Trailing)
		}
	}
	check("before the roll-up")
	if err := db.RollupAll(ctx, now); err != nil {
		t.Fatal(err)
	}
	check("after the roll-up")
	if err := db.RollupAll(ctx, now); err != nil {
		t.Fatal(err)
	}
	check("after a second roll-up")
}
