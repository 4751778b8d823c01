package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 28) On a phone the quote is below the grid: a bar at the bottom
// of the screen says at once what a tap selected, then its price; on a
// wide screen there is no bar. In English and in Chinese (with the CJK
// font the machine has), the week fits 390 px.
func TestBrowserPhoneQuoteBar(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	for _, lang := range []string{gpuportal.LangEnglish, gpuportal.LangChinese} {
		ctx := chromium(t)
		steps := append(logInAs(e.srv.URL, "alice@example.com"), chromedp.EmulateViewport(390, 800),
			chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1&week=2026-12-01"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="calendar-grid"]`)))
		if lang == gpuportal.LangChinese {
			steps = append(steps, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="calendar-grid"]`)))
		}
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
		widths, _ := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if len(widths) != 2 || widths[0] > widths[1] {
			t.Errorf("%s: the calendar is %v px wide at 390", lang, widths)
		}
		if shown, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.querySelector('[data-testid="quote-bar"]')).display !== 'none'`)); shown {
			t.Errorf("%s: a quote bar before anything is selected", lang)
		}
		// The first tap: the bar says it at once, in the same turn.
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
			document.querySelector('[data-testid="slot-2026-12-01T10:00"]').click();
			const bar = document.querySelector('[data-testid="quote-bar"]'), r = bar.getBoundingClientRect();
			return [String(getComputedStyle(bar).display !== 'none'), bar.querySelector('.quote-bar-when').textContent, String(r.bottom <= window.innerHeight + 1 && r.top >= 0)]; })()`))
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != "true" || got[1] != "12-01 10:00 → …" || got[2] != "true" {
			t.Errorf("%s: after the first tap the bar is %v", lang, got)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="slot-2026-12-01T15:00"]`))); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, `document.querySelector('[data-testid="quote-bar-total"]').textContent.includes("¥")`)
		if when := textOf(t, ctx, `[data-testid="quote-bar-when"]`); when != "12-01 10:00–16:00" {
			t.Errorf("%s: the bar says %q for 10:00 to 16:00", lang, when)
		}
		total := textOf(t, ctx, `[data-testid="quote-bar-total"]`)
		if quoted := textOf(t, ctx, `[data-testid="quote-total"]`); total != quoted {
			t.Errorf("%s: the bar says %s, the quote %s", lang, total, quoted)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="quote-bar-go"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="book"]`))); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(textOf(t, ctx, `[data-testid="quote-bar"]`), "¥") {
			t.Errorf("%s: the bar lost its price", lang)
		}
		// A wide screen has the quote beside the grid: no bar.
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
			t.Fatal(err)
		}
		if shown, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`getComputedStyle(document.querySelector('[data-testid="quote-bar"]')).display !== 'none'`)); shown {
			t.Errorf("%s: a quote bar at 1280 px", lang)
		}
	}
}
