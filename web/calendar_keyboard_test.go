package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// A customer books with the keyboard alone: Tab into the calendar (one tab
// stop), arrows to Wednesday 10:00, Enter, three hours down, Enter — the
// quote is there — Escape clears and the same again, then Tab to the book
// button and Enter.
func TestBrowserBookWithTheKeyboard(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	active := func() string {
		t.Helper()
		id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.dataset.testid || document.activeElement.tagName`))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	key := func(k string, times int) {
		t.Helper()
		for range times {
			run(chromedp.KeyEvent(k))
		}
	}
	run(logInAs(e.srv.URL, "alice@example.com")...)
	run(
		chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1&week=2026-12-01"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="calendar-grid"]`)),
	)
	// Tab until the focus is in the grid: it takes one stop.
	for range 40 {
		if len(active()) > 5 && active()[:5] == "slot-" {
			break
		}
		key(kb.Tab, 1)
	}
	if got := active(); len(got) < 5 || got[:5] != "slot-" {
		t.Fatalf("tabbing never reached the calendar (at %s)", got)
	}
	// From wherever it starts, go to the top-left hour, then to Wed 10:00.
	key(kb.ArrowUp, 24)
	key(kb.Home, 1)
	key(kb.ArrowRight, 2)
	key(kb.ArrowDown, 10)
	if got := active(); got != "slot-2026-12-02T10:00" {
		t.Fatalf("focus after the arrows: %s", got)
	}
	key(kb.Enter, 1)
	waitJS(t, ctx, `(document.querySelector('[data-testid="quote-hint"]') || {textContent: ""}).textContent.includes("last hour")`)
	key(kb.ArrowDown, 3)
	key(" ", 1)
	run(chromedp.WaitVisible(chromedp.CSS(`[data-testid="book"]`)))
	if got := active(); got != "slot-2026-12-02T13:00" {
		t.Fatalf("focus after picking the last hour: %s (it should stay in the grid)", got)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('td[aria-selected="true"]').length`))
	if err != nil || n != 4 {
		t.Fatalf("%d hours marked selected, %v", n, err)
	}
	key(kb.Escape, 1)
	waitJS(t, ctx, `document.querySelectorAll('td[aria-selected="true"]').length === 0`)
	key(kb.ArrowUp, 3)
	key(kb.Enter, 1)
	waitJS(t, ctx, `(document.querySelector('[data-testid="quote-hint"]') || {textContent: ""}).textContent.includes("last hour")`)
	key(kb.ArrowDown, 3)
	key(kb.Enter, 1)
	run(chromedp.WaitVisible(chromedp.CSS(`[data-testid="book"]`)))
	for range 20 {
		if active() == "book" {
			break
		}
		key(kb.Tab, 1)
	}
	if active() != "book" {
		t.Fatalf("tabbing from the grid never reached the book button (at %s)", active())
	}
	key(kb.Enter, 1)
	run(chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)))
	list, err := e.db.Reservations(t.Context(), u, store.ReservationFilter{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Hours() != 4 || list[0].Start.In(storetest.Shanghai).Format("2006-01-02T15:04") != "2026-12-02T10:00" {
		t.Fatalf("booked with the keyboard: %+v, %v", list, err)
	}
}

// Typing a date and a 24-hour hour (no AM/PM, whatever the browser's
// locale) quotes those hours, and a date in another week moves the
// calendar there.
func TestBrowserTypedHoursMoveTheWeek(t *testing.T) {
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
	typeIn := func(testid, value string) chromedp.Action[chromedp.Void] {
		// As a person would, after the form the last answer swapped in is
		// wired (htmx does so as the swap settles).
		return chromedp.Evaluate[chromedp.Void](`(() => { const el = document.querySelector('[data-testid="` + testid + `"]');
			htmx.process(el.form); el.value = "` + value + `"; el.dispatchEvent(new Event("change", {bubbles: true})); })()`)
	}
	run(
		chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1&week=2026-12-01"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="calendar-grid"]`)),
	)
	hours, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="start-hour"] option')).map(o => o.textContent)`))
	if err != nil || len(hours) != 25 || hours[14] != "13:00" {
		t.Fatalf("start hours offered: %q, %v", hours, err)
	}
	run(typeIn("start-date", "2026-12-10"), typeIn("start-hour", "9"))
	waitJS(t, ctx, `(document.querySelector('[data-testid="week-label"]') || {textContent: ""}).textContent.startsWith("2026-12-07")`)
	waitJS(t, ctx, `document.querySelector('[data-testid="start"]').value === "2026-12-10T09:00" && (document.querySelector('[data-testid="quote-hint"]') || {textContent: ""}).textContent.includes("last hour")`)
	run(typeIn("end-date", "2026-12-10"), typeIn("end-hour", "13"))
	run(chromedp.WaitVisible(chromedp.CSS(`[data-testid="quote"]`)))
	if got := textOf(t, ctx, `[data-testid="quote"]`); !strings.Contains(got, "2026-12-10") || !strings.Contains(got, "09:00 – 13:00") {
		t.Fatalf("quote for typed hours: %q", got)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('td[aria-selected="true"]').length`))
	if err != nil || n != 4 {
		t.Fatalf("%d hours highlighted for 09:00–13:00, %v", n, err)
	}
}
