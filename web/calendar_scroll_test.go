package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 50, item 4) The calendar shows what was picked: a selected
// 18:00–22:00 is scrolled into the grid's box at 1280×900, not left below
// 0:00–16:00; "Find a time" searches for the quote's GPU count; a window
// across midnight dates both ends. In English and in Chinese.
func TestBrowserCalendarShowsTheSelection(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	for _, lang := range []string{gpuportal.LangEnglish, gpuportal.LangChinese} {
		ctx := chromium(t)
		steps := append(logInAs(e.srv.URL, "alice@example.com"), chromedp.EmulateViewport(1280, 900))
		if lang == gpuportal.LangChinese {
			steps = append(steps, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="dashboard"]`)))
		}
		steps = append(steps, chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1&count=3&start=2026-12-02T18:00&end=2026-12-02T22:00"),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="quote-total"]`)))
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
		seen, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](`(() => {
			const box = document.querySelector('.calendar-scroll').getBoundingClientRect();
			const within = sel => { const r = document.querySelector(sel).getBoundingClientRect(); return r.top >= box.top && r.bottom <= box.bottom; };
			return [within('[data-testid="slot-2026-12-02T18:00"]'), within('[data-testid="slot-2026-12-02T21:00"]'), document.querySelector('.calendar-scroll').scrollTop > 0]; })()`))
		if err != nil || len(seen) != 3 || !seen[0] || !seen[1] || !seen[2] {
			t.Errorf("%s: the selected 18:00–22:00 in the grid's box (first, last, scrolled) = %v %v", lang, seen, err)
		}
		if count, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="find-count"]').value`)); count != "3" {
			t.Errorf("%s: Find a time searches for %s GPUs, the quote has 3", lang, count)
		}
		// Across midnight: both ends dated in the quote.
		if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1&count=1&start=2026-12-02T22:00&end=2026-12-03T02:00"),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="quote"]`))); err != nil {
			t.Fatal(err)
		}
		if quote := textOf(t, ctx, `[data-testid="quote"] tbody`); !strings.Contains(quote, "2026-12-02 22:00 – 2026-12-03 00:00") {
			t.Errorf("%s: a window across midnight does not date its end: %q", lang, quote)
		}
	}
}
