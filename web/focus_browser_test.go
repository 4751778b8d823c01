package web

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 28) Keyboard focus stays where the customer is through htmx's
// swaps: a field of the quote, find-a-time or launch form that asks the
// server for a new panel is focused again in the new panel (htmx restores
// focus by id), not dropped to <body>.
func TestBrowserFocusSurvivesSwaps(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer) // signed in: the panels for a customer
	if err := chromedp.Do(ctx, logInAs(e.srv.URL, "alice@example.com")...); err != nil {
		t.Fatal(err)
	}
	// change sets a field as the keyboard would (focus, value, change
	// event), waits until the panel around it is a new one, and says
	// which element has the focus then.
	change := func(panel, field, value string) string {
		t.Helper()
		js := fmt.Sprintf(`(() => { document.getElementById(%q).dataset.old = "1"; const f = document.querySelector('[data-testid="%s"]'); f.focus(); f.value = %q;
			f.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, panel, field, value)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, fmt.Sprintf(`(() => { const p = document.getElementById(%q); return p && !p.dataset.old && !document.querySelector(".htmx-request") })()`, panel))
		focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement ? (document.activeElement.dataset.testid || document.activeElement.tagName) : ""`))
		if err != nil {
			t.Fatal(err)
		}
		return focused
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/calendar?model=h100-80g&region=cd-1"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="quote-panel"]`)),
	); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ panel, field, value string }{
		{"quote", "count", "3"},
		{"quote", "start-date", "2026-12-03"},
		{"quote", "start-hour", "10"},
		{"quote", "end-date", "2026-12-03"},
		{"quote", "end-hour", "16"},
	} {
		if got := change(tt.panel, tt.field, tt.value); got != tt.field {
			t.Errorf("after %s = %s the focus is on %s, not the field", tt.field, tt.value, got)
		}
	}
	// The quote the last change asked for is shown (the swaps happened).
	waitJS(t, ctx, `!!document.querySelector('[data-testid="quote"]')`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/instances"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-form"]`)),
	); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ panel, field, value string }{
		{"launch-form", "launch-count", "4"},
		{"launch-form", "launch-model", "h100-80g"},
	} {
		if got := change(tt.panel, tt.field, tt.value); got != tt.field {
			t.Errorf("after %s = %s the focus is on %s, not the field", tt.field, tt.value, got)
		}
	}
}
