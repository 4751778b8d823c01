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
	); err != nil {
		t.Fatal(err)
	}
	// (issue 28) The form asks for what the quote misses, not ¥500, and
	// says the payer comes back to the quote.
	prefilled, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="topup-amount"]').value`))
	if err != nil || prefilled != "64.00" {
		t.Fatalf("top-up amount from the quote = %q (%v); want the ¥64.00 missing", prefilled, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="topup-back"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="topup-amount"]`), "100"),
		chromedp.Click(chromedp.CSS(`[data-testid="topup-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pay-confirm"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="pay-confirm"]`)),
		// Paid, the customer is back on the same quote, now bookable.
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="book"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="nav-balance"]`); got != "¥100.00" {
		t.Fatalf("balance after the top-up %q", got)
	}
	back, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[document.querySelector('[data-testid="count"]').value, document.querySelector('[data-testid="start"]').value, document.querySelector('[data-testid="end"]').value, location.pathname].join(" ")`))
	if err != nil || back != "2 2026-12-01T10:00 2026-12-01T14:00 /calendar" {
		t.Fatalf("after paying: %q (%v); want the quote of 2 GPUs 10:00–14:00 on the calendar", back, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(quote),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="book"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="book"]`)),
		// Booked: the reservation's own page says so (not the calendar
		// page still there while the booking is on its way).
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="how-to-use"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="nav-balance"]`); got != "¥36.00" {
		t.Fatalf("balance after booking ¥64 %q", got)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/reservations/1/cancel"),
		chromedp.Evaluate[chromedp.Void](`window.confirm = function () { return true; }`),
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
	for _, want := range []string{"Top-up,Top-up #1,100.00", `Refund,"Reservation #1 cancelled: what you paid, back",64.00`, "-64.00,reservation/1"} {
		if !strings.Contains(csv, want) {
			t.Fatalf("statement lacks %q:\n%s", want, csv)
		}
	}
}

// (issue 28) A waitlist offer the balance cannot pay says what is
// missing; "Top up" asks for exactly that (in whole yuan) and, once paid,
// returns to the offer, still held, to claim it.
func TestBrowserTopUpFromAWaitlistOffer(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	bobUser := storetest.MustCreatePoorUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	bob := e.tokenFor(bobUser)
	// Bob has what the window costs (joining and an offer need it).
	var req gpuportal.BookingRequest
	decodeInto(t, bookBody("a100-80g", 2, at(1, 10), at(1, 14)), &req)
	q, err := e.db.Quote(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	_, body := e.apiCall("POST", "/api/v1/reservations", alice, bookBody("a100-80g", 8, at(1, 10), at(1, 14)))
	full := decodeReservation(t, body)
	if _, err := e.db.Credit(t.Context(), nil, bobUser.ID, gpuportal.CreditRequest{Amount: q.Total, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	join := strings.Replace(bookBody("a100-80g", 2, at(1, 10), at(1, 14)), "}", `,"auto_book":false}`, 1)
	if st, body := e.apiCall("POST", "/api/v1/waitlist", bob, join); st != 201 {
		t.Fatalf("join = %d %s", st, body)
	}
	e.apiCall("POST", "/api/v1/reservations/"+itoa(int(full.ID))+"/cancel", alice, "")
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, body := e.apiCall("GET", "/api/v1/waitlist", bob, ""); !strings.Contains(body, `"status":"offered"`) {
		t.Fatalf("no offer: %s", body)
	}
	// Offered, Bob spends half of it elsewhere before claiming.
	if st, body := e.apiCall("POST", "/api/v1/reservations", bob, bookBody("a100-80g", 1, at(1, 16), at(1, 20))); st != 201 {
		t.Fatalf("bob's other booking = %d %s", st, body)
	}
	b, _ := e.db.Balance(t.Context(), bobUser)
	if err := chromedp.Do(ctx, logInAs(e.srv.URL, "bob@example.com")...); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/waitlist"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="offer-missing"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="offer-topup"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="topup-back"]`)),
	); err != nil {
		t.Fatal(err)
	}
	prefilled, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="topup-amount"]').value`))
	if want := gpuportal.TopUpFor(q.Total - b.Available).Decimal(); err != nil || prefilled != want {
		t.Fatalf("top-up amount from the offer = %q (%v); want %s", prefilled, err, want)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="topup-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="pay-confirm"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="pay-confirm"]`)),
		// Back on the waitlist: the offer, still held, can be claimed.
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="claim"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="offer-left"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="claim"]`)),
		// Claimed, the reservation's own page says so. (Waiting for any
		// flash would find the top-up's, still on the waitlist page.)
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="how-to-use"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="flash"]`); !strings.Contains(got, "confirmed") {
		t.Fatalf("after claiming: %q", got)
	}
}

// (issue 28) Money over time: the dashboard and the ledger draw each
// day's spend; a budget set on the ledger shows how much of it is spent,
// in both languages.
func TestBrowserSpendChartAndBudget(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	if st, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 2, at(1, 10), at(1, 14))); st != 201 {
		t.Fatalf("book = %d %s", st, body)
	}
	if err := chromedp.Do(ctx, logInAs(e.srv.URL, "alice@example.com")...); err != nil {
		t.Fatal(err)
	}
	bars := func() int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('[data-testid="spend-chart"] rect')].filter(r => +r.getAttribute("height") > 0).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard-spend"] [data-testid="spend-chart"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if n := bars(); n != 1 {
		t.Fatalf("dashboard chart: %d days with a bar; want today's booking", n)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/ledger"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="budget-form"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="budget-amount"]`), "128"),
		chromedp.Click(chromedp.CSS(`[data-testid="budget-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="budget"]`); !strings.Contains(got, "¥64.00 of your ¥128.00 budget (50 %)") {
		t.Fatalf("budget on the ledger %q", got)
	}
	if n := bars(); n != 1 {
		t.Fatalf("ledger chart: %d days with a bar", n)
	}
	if err := chromedp.Do(ctx,
		pickLang("zh-CN"),
		chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="budget"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="budget"]`); !strings.Contains(got, "预算 ¥128.00") {
		t.Fatalf("budget in Chinese %q", got)
	}
}
