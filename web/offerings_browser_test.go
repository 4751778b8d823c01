package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 25) "Find a time" on the calendar: 8 GPUs for 48 hours,
// cheapest first; booking the first is done at the price shown. A full
// window shows where the same request fits instead. "Extend" on the
// reservation page adds hours at the price the option said.
func TestBrowserFindATimeBookAndExtend(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	if err := chromedp.Do(ctx, logInAs(e.srv.URL, "alice@example.com")...); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/calendar?model=h100-80g&region=cd-1"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="find-form"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="find-count"]`), "8"),
		chromedp.SetValue(chromedp.CSS(`[data-testid="find-hours"]`), "48"),
		chromedp.Click(chromedp.CSS(`[data-testid="find"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="offering-0"]`)),
	); err != nil {
		t.Fatal(err)
	}
	shown := textOf(t, ctx, `[data-testid="offering-0"] [data-testid="offering-total"]`)
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="offering-0"] [data-testid="book-this"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	list, err := e.db.Reservations(context.Background(), alice, store.ReservationFilter{Limit: 10})
	if err != nil || len(list) != 1 {
		t.Fatalf("reservations after booking an offering: %v, %v", list, err)
	}
	r := list[0]
	if r.Price.String() != shown || r.Count != 8 || r.Hours() != 48 {
		t.Fatalf("booked %d × %d h at %s; the offering showed %s", r.Count, r.Hours(), r.Price.String(), shown)
	}
	// The same window again is full: its quote panel names the nearest
	// windows that fit.
	start, end := r.Start.In(storetest.Shanghai), r.End.In(storetest.Shanghai).Add(-44*time.Hour)
	full := e.srv.URL + "/calendar?model=h100-80g&region=cd-1&count=8&week=" + start.Format("2006-01-02") +
		"&start=" + start.Format("2006-01-02T15:04") + "&end=" + end.Format("2006-01-02T15:04")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(full),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="alternatives"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="alternative-0"]`)),
	); err != nil {
		t.Fatal(err)
	}
	// Extend the reservation by the largest option offered.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+resPath(r.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="extend-form"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="extend-hours"]`), "3"),
	); err != nil {
		t.Fatal(err)
	}
	option, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const s = document.querySelector('[data-testid="extend-hours"]'); return s.options[s.selectedIndex].text; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="extend-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	got, _ := e.db.Reservation(context.Background(), alice, r.ID)
	added := got.Price - r.Price
	if !got.End.Equal(r.End.Add(3*time.Hour)) || !strings.HasSuffix(option, added.String()) {
		t.Fatalf("extended to %s for %s; the option read %q", got.End, added.String(), option)
	}
}
