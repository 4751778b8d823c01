package store_test

import (
	"context"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 28) A monthly budget: the spend counts charges less refunds
// (never top-ups), by day in site time; the tick tells the owner once at
// 80 % and once at 100 % a month, afresh when the budget changes and in
// the next month; a budget stops nothing.
func TestBudgetNotices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	topUp(t, db, u, 100_000_00)
	start := storetest.Epoch.Truncate(time.Hour).Add(26 * time.Hour)
	req := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)}
	q, err := db.Quote(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// A budget of five bookings; none spent yet.
	if b, err := db.SetBudget(ctx, u, q.Total*5); err != nil || b.Spent != 0 || b.Monthly != q.Total*5 {
		t.Fatalf("set budget = %+v, %v", b, err)
	}
	if _, err := db.SetBudget(ctx, u, -1); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Fatalf("a negative budget: %v", err)
	}
	budgetNotes := func() int {
		t.Helper()
		if _, err := db.Tick(ctx, clock.Now()); err != nil {
			t.Fatal(err)
		}
		notes, err := db.InAppPage(ctx, u.ID, store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, note := range notes {
			if note.Kind == gpuportal.NoteBudgetReached {
				n++
			}
		}
		return n
	}
	booked := 0
	book := func(n int) {
		t.Helper()
		for range n {
			r := req
			week := time.Duration(booked) * 7 * 24 * time.Hour // the same hours a week on: the same price
			r.Start, r.End = req.Start.Add(week), req.End.Add(week)
			if _, err := db.Book(ctx, u, r); err != nil {
				t.Fatal(err)
			}
			booked++
		}
	}
	for _, step := range []struct {
		book, notices int
		why           string
	}{
		{3, 0, "60 %: nothing to tell"},
		{1, 1, "80 %: told"},
		{0, 1, "a second tick: not told again"},
		{1, 2, "100 %: told"},
		{1, 2, "120 %: nothing more"},
	} {
		book(step.book)
		if n := budgetNotes(); n != step.notices {
			t.Fatalf("after %d bookings (%s): %d budget notices, want %d", booked, step.why, n, step.notices)
		}
	}
	b, err := db.Budget(ctx, u.ID)
	if err != nil || b.Spent != q.Total*6 || b.Percent != 120 {
		t.Fatalf("budget = %+v, %v; want six bookings spent, 120 %%", b, err)
	}
	// Raised to ten bookings: 60 %, nothing to tell; at 10 of 10 the
	// raised budget's highest level reached is told, once (not 80 % too).
	if _, err := db.SetBudget(ctx, u, q.Total*10); err != nil {
		t.Fatal(err)
	}
	if n := budgetNotes(); n != 2 {
		t.Fatalf("budget raised, 60 %% spent: %d notices; want none new", n)
	}
	book(4)
	if n := budgetNotes(); n != 3 {
		t.Fatalf("raised budget reached at once: %d notices; want one more", n)
	}
	// By day: the spend is on the day it was charged (site time); top-ups
	// are not spend.
	days, err := db.SpendByDay(ctx, u.ID, clock.Now().AddDate(0, 0, -2), clock.Now().Add(time.Hour))
	if err != nil || len(days) != 3 || days[2].Spent != q.Total*10 || days[0].Spent != 0 {
		t.Fatalf("spend by day = %+v, %v", days, err)
	}
	// The next month starts afresh: nothing spent yet, nothing told.
	clock.Set(time.Date(2027, 1, 1, 0, 30, 0, 0, storetest.Shanghai))
	if b, _ := db.Budget(ctx, u.ID); b.Spent != 0 || b.Level() != 0 {
		t.Fatalf("budget in January = %+v", b)
	}
}
