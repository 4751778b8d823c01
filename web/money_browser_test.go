package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 16) A customer with an empty account tops up through the test
// provider, sees the balance, books, cancels, and finds the refund in the
// balance and in the month's CSV statement.
func TestBrowserTopUpBookCancel(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "alice@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), storetest.Password),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="nav-balance"]`); got != "¥0.00" {
		t.Fatalf("balance in the navigation %q", got)
	}
	// A quote it cannot pay offers a top-up instead of booking.
	quote := e.srv.URL + "/calendar?model=a100-80g&region=cd-1&week=2026-12-01&start=2026-12-01T10:00&end=2026-12-01T14:00&count=2"
	if err := chromedp.Do(ctx,
		chromedp.Navigate(quote),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="quote-missing"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="topup-link"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="topup-form"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="topup-amount"]`), "100"),
		chromedp.Click(chromedp.CSS(`[data-testid="topup-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pay-confirm"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="pay-confirm"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="balance-card"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="available"]`); got != "¥100.00" {
		t.Fatalf("available after the top-up %q", got)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(quote),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="book"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="book"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="nav-balance"]`); got != "¥36.00" {
		t.Fatalf("balance after booking ¥64 %q", got)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/reservations/1/cancel"),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		chromedp.Navigate(e.srv.URL+"/ledger"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="ledger-refund"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="available"]`); got != "¥100.00" {
		t.Fatalf("available after the free cancellation %q", got)
	}
	// The statement link downloads what the page shows (fetched from the
	// page: the session cookie is HttpOnly).
	csv, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector('[data-testid="statement-csv"]').href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Top-up,Top-up #1,100.00", "Refund,Refund for reservation #1,64.00", "-64.00,reservation/1"} {
		if !strings.Contains(csv, want) {
			t.Fatalf("statement lacks %q:\n%s", want, csv)
		}
	}
}
