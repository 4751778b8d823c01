package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// headerRows counts the rows the header's top-level items sit on (items
// whose vertical middles lie within 20 px of each other share a row).
const headerRows = `(() => {
	const mids = Array.from(document.querySelectorAll('body > header nav > ul > li')).filter(li => li.offsetParent !== null)
		.map(li => { const r = li.getBoundingClientRect(); return (r.top + r.bottom) / 2; }).sort((a, b) => a - b);
	let rows = 0, last = -1e9;
	for (const m of mids) { if (m - last > 20) { rows++; last = m; } }
	return rows; })()`

// strayBullets lists the header's visible items that would draw a list
// marker.
const strayBullets = `Array.from(document.querySelectorAll('body > header li')).filter(li => {
	const cs = getComputedStyle(li); return li.offsetParent !== null && cs.display === 'list-item' && cs.listStyleType !== 'none';
}).map(li => li.outerHTML.slice(0, 80))`

// (issue 28) The account's menu opens, closes on Escape and on a click
// elsewhere, and logs out; the admin menu leads to the fleet. (That the
// header is one row at 1280 px and draws no stray bullet on a phone,
// TestBrowserMainPages checks on every main page.)
func TestBrowserAccountMenu(t *testing.T) {
	t.Parallel()
	e := screensEnv(t)
	ctx := browse(t, e, gpuportal.LangEnglish, 1280)
	menuOpen := func() bool {
		open, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="account-menu"]').open`))
		return open
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="account-menu-open"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-settings"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\x1b")); err != nil { // Escape
		t.Fatal(err)
	}
	if menuOpen() {
		t.Error("Escape left the account menu open")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="account-menu-open"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-settings"]`)),
		chromedp.Click(chromedp.CSS(`h1`))); err != nil {
		t.Fatal(err)
	}
	if menuOpen() {
		t.Error("a click elsewhere left the account menu open")
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="admin-menu"] summary`)),
		chromedp.Click(chromedp.CSS(`[data-testid="nav-fleet"]`)),
		chromedp.WaitVisible(chromedp.CSS(`h1`)),
	); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="account-menu-open"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="logout"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-login"]`)),
	); err != nil {
		t.Fatal(err)
	}
}

// (issue 28, honest alerts) A held waitlist offer counts down in the
// navigation of every page, with what claiming it costs, in both
// languages; it leads to the waitlist.
func TestBrowserOfferCountsDownInTheNavigation(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	_, body := e.apiCall("POST", "/api/v1/reservations", alice, bookBody("a100-80g", 8, at(1, 10), at(1, 14)))
	full := decodeReservation(t, body)
	join := strings.Replace(bookBody("a100-80g", 2, at(1, 10), at(1, 14)), "}", `,"auto_book":false}`, 1)
	if st, body := e.apiCall("POST", "/api/v1/waitlist", bob, join); st != 201 {
		t.Fatalf("join = %d %s", st, body)
	}
	ctx := chromium(t)
	if err := chromedp.Do(ctx, logInAs(e.srv.URL, "bob@example.com")...); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/reservations"), chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		t.Fatal(err)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="nav-offer"]').length`)); n != 0 {
		t.Fatal("an offer in the navigation before any is made")
	}
	e.apiCall("POST", "/api/v1/reservations/"+itoa(int(full.ID))+"/cancel", alice, "")
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	var req gpuportal.BookingRequest
	decodeInto(t, bookBody("a100-80g", 2, at(1, 10), at(1, 14)), &req)
	q, err := e.db.Price(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/reservations"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-offer"]`))); err != nil {
		t.Fatal(err)
	}
	got := textOf(t, ctx, `[data-testid="nav-offer"]`)
	if !strings.Contains(got, "Offer "+q.Total.String()) || !strings.Contains(got, "min") || !strings.Contains(got, "left") {
		t.Fatalf("the navigation says %q; want the offer's price %s and the time left", got, q.Total)
	}
	left := func() string {
		v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="nav-offer"]').dataset.left`))
		return v
	}
	first := left()
	waitJS(t, ctx, `document.querySelector('[data-testid="nav-offer"]').dataset.left !== "`+first+`"`)
	if err := chromedp.Do(ctx, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="nav-offer"]`))); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="nav-offer"]`); !strings.Contains(got, "候补机会 "+q.Total.String()) || !strings.Contains(got, "分") {
		t.Fatalf("in Chinese the navigation says %q", got)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="nav-offer"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="offer-left"]`))); err != nil {
		t.Fatal(err)
	}
}
