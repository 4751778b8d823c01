package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

func TestCalendarPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	b := e.browser()
	p := b.get("/calendar?model=a100-80g&region=cd-1&week=2026-12-01")
	if p.status != 200 || !strings.Contains(p.body, "2026-11-30 – 2026-12-06") {
		t.Fatalf("calendar = %d", p.status)
	}
	// 168 cells; Tuesday 02:00 is off-peak at ¥5.60, Tuesday 10:00 ¥8.00.
	if n := strings.Count(p.body, `data-testid="slot-`); n != 168 {
		t.Fatalf("%d cells; want 168", n)
	}
	cell := cellHTML(t, p.body, "2026-12-01T02:00")
	if !strings.Contains(cell, "offpeak") || !strings.Contains(cell, "¥5.60") || !strings.Contains(cell, `<span class="free">8</span>`) {
		t.Fatalf("Tue 02:00 cell = %s", cell)
	}
	// Monday before 09:00 (the clock is Mon 08:00) is not bookable.
	if cell := cellHTML(t, p.body, "2026-11-30T08:00"); !strings.Contains(cell, "past") {
		t.Fatalf("Mon 08:00 cell = %s", cell)
	}
	// Quote fragment (htmx) and full page agree.
	q := b.get("/calendar/quote?model=a100-80g&region=cd-1&count=2&start=2026-12-01T06:00&end=2026-12-01T10:00")
	if !strings.Contains(q.body, `data-testid="quote-total"`) || !strings.Contains(q.body, "¥54.40") || strings.Contains(q.body, "<html") {
		t.Fatalf("quote fragment = %s", q.body)
	}
	q = b.get("/calendar/quote?model=a100-80g&region=cd-1&count=2&start=2026-12-01T06:00&end=2026-12-01T08:00")
	if !strings.Contains(q.body, `data-testid="quote-error"`) || !strings.Contains(q.body, "minimum booking is 4 hours") {
		t.Fatalf("short quote = %s", q.body)
	}
	if p := b.get("/calendar?model=v100"); p.status != http.StatusBadRequest {
		t.Fatalf("unknown model page = %d", p.status)
	}
	if p := b.get("/calendar/grid?model=a100-80g&region=cd-1&week=2026-12-08"); !strings.Contains(p.body, "2026-12-07 – 2026-12-13") || strings.Contains(p.body, "<html") {
		t.Fatalf("grid fragment for the next week")
	}
}

func cellHTML(t *testing.T, body, local string) string {
	t.Helper()
	i := strings.Index(body, `data-testid="slot-`+local+`"`)
	if i < 0 {
		t.Fatalf("no cell %s", local)
	}
	start := strings.LastIndex(body[:i], "<td")
	end := strings.Index(body[i:], "</td>")
	return body[start : i+end]
}

func TestBookAndCancelThroughPages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	form := url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "count": {"2"}, "start": {at(1, 10)}, "end": {at(1, 14)}}
	p := b.post("/reservations", form)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/reservations/") {
		t.Fatalf("book = %d %s", p.status, p.body)
	}
	detail := b.get(p.location)
	if !strings.Contains(detail.body, "Booked: reservation #1") || !strings.Contains(detail.body, "¥64.00") || !strings.Contains(detail.body, "24 h or more before the start: free, all you paid refunded") ||
		!strings.Contains(detail.body, "2 to 24 h before the start: a 50% fee, 50% of what you paid refunded") || !strings.Contains(detail.body, "less than 2 h before the start: no refund") {
		t.Fatalf("detail page:\n%s", detail.body)
	}
	// Before its start, the page says when it starts and how to use it.
	if !strings.Contains(detail.body, `data-testid="how-to-use"`) || !strings.Contains(detail.body, "Starts in") || !strings.Contains(detail.body, "launch on them") || strings.Contains(detail.body, "/api/v1") {
		t.Fatalf("detail page before the start lacks how to use it:\n%s", detail.body)
	}
	list := b.get("/reservations")
	if !strings.Contains(list.body, `data-testid="reservation-1"`) {
		t.Fatalf("list lacks the booking")
	}
	// A refused booking shows the calendar with the reason.
	form.Set("count", "7")
	if p := b.post("/reservations", form); p.status != http.StatusConflict || !strings.Contains(p.body, `data-testid="quote-error"`) || !strings.Contains(p.body, `data-testid="waitlist-offer"`) {
		t.Fatalf("full window = %d", p.status)
	}
	// Cancel: the htmx fragment shows the fee, the POST cancels.
	e.clock.Set(day0.AddDate(0, 0, 1).Add(7 * time.Hour)) // 3 h before: 50 %
	req, _ := http.NewRequest("GET", e.srv.URL+"/reservations/1/cancel", nil)
	req.Header.Set("HX-Request", "true")
	frag := b.do(req)
	if !strings.Contains(frag.body, `data-testid="cancel-fee">¥32.00`) || strings.Contains(frag.body, "<html") {
		t.Fatalf("cancel fragment = %s", frag.body)
	}
	if p := b.post("/reservations/1/cancel", nil); p.status != http.StatusSeeOther {
		t.Fatalf("cancel = %d", p.status)
	}
	if p := b.get("/reservations"); !strings.Contains(p.body, "fee ¥32.00, refund ¥32.00") {
		t.Fatalf("no cancellation flash")
	}
	ledger := b.get("/ledger")
	if !strings.Contains(ledger.body, `data-testid="available">`+(storetest.TestBalance-3200).String()) || !strings.Contains(ledger.body, `data-testid="ledger-cancellation_fee"`) {
		t.Fatalf("ledger page:\n%s", ledger.body)
	}
	// Another customer sees none of it.
	storetest.MustCreateUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	bob := e.browser()
	bob.login("bob@example.com", storetest.Password)
	for _, path := range []string{"/reservations/1", "/reservations/1/cancel", "/reservations/1/ics"} {
		if p := bob.get(path); p.status != http.StatusNotFound {
			t.Errorf("bob GET %s = %d", path, p.status)
		}
	}
	if p := bob.get("/reservations"); strings.Contains(p.body, `data-testid="reservation-1"`) {
		t.Error("bob's list shows alice's reservation")
	}
}

// A person logs in, selects hours on the calendar, sees the quote, books,
// finds the booking in their reservations and cancels it with the fee shown.
func TestBrowserBookAndCancel(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	run(
		chromedp.Navigate(e.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "alice@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), storetest.Password),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="nav-calendar"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="calendar-grid"]`)),
		// Monday 20:00–24:00 (the clock is Monday 08:00): 12 h ahead.
		chromedp.Click(chromedp.CSS(`[data-testid="slot-2026-11-30T20:00"]`)),
	)
	// Wait for the first click's quote panel before the second click.
	waitJS(t, ctx, `(document.querySelector('[data-testid="quote-hint"]') || {textContent: ""}).textContent.includes("last hour")`)
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="slot-2026-11-30T23:00"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="quote-total"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="quote-total"]`); got != "¥32.00" {
		t.Fatalf("quote total = %q", got)
	}
	if got := textOf(t, ctx, `[data-testid="book"]`); !strings.Contains(got, "¥32.00") {
		t.Fatalf("book button = %q", got)
	}
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="book"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="nav-reservations"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="reservation-1"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="reservation-1"] [data-testid="cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="cancel-fee"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="cancel-fee"]`); got != "¥16.00" {
		t.Fatalf("fee shown = %q", got)
	}
	// Cancelling asks first, naming what was paid, the fee and the refund.
	run(
		chromedp.Evaluate[chromedp.Void](`window.confirm = function (m) { sessionStorage.asked = m; return true; }`),
		chromedp.Click(chromedp.CSS(`[data-testid="confirm-cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="reservations-false"] [data-testid="reservation-1"]`)),
	)
	asked, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.asked || ""`))
	if err != nil || asked != "Cancel reservation #1? You paid ¥32.00; the fee is ¥16.00; your refund is ¥16.00." {
		t.Errorf("the question before cancelling: %q", asked)
	}
	if got := textOf(t, ctx, `[data-testid="reservation-1"] [data-testid="status"]`); got != "Cancelled" {
		t.Fatalf("status = %q", got)
	}
	r, err := e.db.Reservation(context.Background(), &gpuportal.User{Role: gpuportal.RoleAdmin}, 1)
	if err != nil || r.Status != "cancelled" || *r.Fee != 1600 {
		t.Fatalf("stored = %+v %v", r, err)
	}
}
