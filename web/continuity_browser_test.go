package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// A visitor picks hours on the calendar, signs up to book, and comes back
// to the same model, week, hours and quote; once paid up, one click books.
func TestBrowserSelectionSurvivesSignUp(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	run(
		chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1&week=2026-12-01"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="calendar-grid"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="slot-2026-12-02T10:00"]`)),
	)
	waitJS(t, ctx, `(document.querySelector('[data-testid="quote-hint"]') || {textContent: ""}).textContent.includes("last hour")`)
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="slot-2026-12-02T13:00"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="signup-to-book"]`)),
	)
	quoted := textOf(t, ctx, `[data-testid="quote"]`)
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="signup-to-book"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="signup-form"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="name"]`), "Zhao Lei"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "zhao@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), "a-good-password"),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="quote"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="quote"]`); got != quoted {
		t.Fatalf("quote after signing up:\n%s\nwant the one before:\n%s", got, quoted)
	}
	start, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="start"]').value + " " + document.querySelector('[data-testid="end"]').value`))
	if err != nil || start != "2026-12-02T10:00 2026-12-02T14:00" {
		t.Fatalf("selection after signing up = %q, %v", start, err)
	}
	// A new account has no money yet: top up (here, an admin's credit), and
	// the same page books.
	u, err := e.db.UserByEmail(t.Context(), "zhao@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Credit(t.Context(), nil, u.ID, gpuportal.CreditRequest{Amount: 100_000, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	run(
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="book"]`)),
	)
	// Before paying: the terms as dates, and what the button will do.
	terms := textOf(t, ctx, `[data-testid="cancellation-terms"]`)
	for _, want := range []string{"Free cancellation until 2026-12-01 10:00", "A fee of 50% of the price from 2026-12-01 10:00", "No refund from 2026-12-02 08:00"} {
		if !strings.Contains(terms, want) {
			t.Errorf("cancellation terms %q lack %q", terms, want)
		}
	}
	if got := textOf(t, ctx, `[data-testid="book"]`); got != "Confirm: book 1 GPU and pay ¥32.00 from your balance" {
		t.Errorf("book button = %q", got)
	}
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="book"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	)
	list, err := e.db.Reservations(t.Context(), u, store.ReservationFilter{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Count != 1 || list[0].Hours() != 4 {
		t.Fatalf("reservations after booking: %+v, %v", list, err)
	}
}
