package web

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 50, item 4) The instances page as people look at it, in English
// and in Chinese: one's instances first and the launch form behind its
// button; on a phone a card per instance with its status, cost and Stop in
// sight and nothing to scroll sideways; the form shows only the chosen
// kind's fields, and Reserved offers one's active reservations; Drill is a
// link beside Stop; an empty Active tab points to the ended ones.
func TestBrowserInstancesPageAsPeopleLookAtIt(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	runningInstance(t, e, alice, nodes[0].ID, gpuportal.KindSpot)
	// An active reservation to launch on.
	e.clock.Set(day0.Add(9 * time.Hour))
	r, err := e.db.Book(t.Context(), alice, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: day0.Add(10 * time.Hour), End: day0.Add(14 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Set(day0.Add(10*time.Hour + time.Minute))
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ lang, drill, noInstances string }{
		{gpuportal.LangEnglish, "Drill an interruption", "Nothing is running now."},
		{gpuportal.LangChinese, "演练一次中断", "当前没有运行中的实例。"},
	} {
		ctx := chromium(t)
		steps := append(logInAs(e.srv.URL, "alice@example.com"), chromedp.EmulateViewport(390, 800))
		if c.lang == gpuportal.LangChinese {
			steps = append(steps, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="dashboard"]`)))
		}
		steps = append(steps, chromedp.Navigate(e.srv.URL+"/instances"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="instances"]`)))
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
		// A card: status, cost and Stop inside the screen, no sideways page.
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](`(() => {
			const inside = sel => { const r = document.querySelector(sel).getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth; };
			return [document.documentElement.scrollWidth <= window.innerWidth, inside('[data-testid="instances"] [data-testid="status"]'),
				inside('[data-testid="instances"] [data-testid="cost"]'), inside('[data-testid="instances"] [data-testid="stop"]'),
				document.querySelector('[data-testid="launch-panel"]').open]; })()`))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 || !got[0] || !got[1] || !got[2] || !got[3] {
			t.Errorf("%s at 390 px: page fits, status, cost, Stop in sight = %v", c.lang, got)
		}
		if len(got) == 5 && got[4] {
			t.Errorf("%s: the launch form is open above a list that has an instance", c.lang)
		}
		if drill := textOf(t, ctx, `[data-testid="drill"]`); drill != c.drill {
			t.Errorf("%s: the drill action says %q", c.lang, drill)
		}
		// The Launch button opens the form; each kind shows its own fields.
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Click(chromedp.CSS(`[data-testid="open-launch"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-notice"]`))); err != nil {
			t.Fatal(err)
		}
		pick := func(kind, wait string) {
			t.Helper()
			if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`[data-testid="launch-kind"]`), kind),
				chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="launch-kind"]').dispatchEvent(new Event('change', {bubbles: true}))`),
				chromedp.WaitVisible(chromedp.CSS(wait))); err != nil {
				t.Fatal(err)
			}
		}
		pick("on_demand", `[data-testid="on-demand-minimum"]`)
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[[]bool](`[!!document.querySelector('[data-testid="launch-notice"]'), !!document.querySelector('[name="auto_restart"]'),
			document.querySelector('[data-testid="safe-until"]').textContent.includes('spot'), !!document.querySelector('[name="reservation_id"]')]`))
		if len(shown) != 4 || shown[0] || shown[1] || shown[2] || shown[3] {
			t.Errorf("%s: on-demand shows spot or reserved fields: %v", c.lang, shown)
		}
		pick("reserved", `[data-testid="launch-reservation"]`)
		options, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="launch-reservation"] option')].map(o => o.value)`))
		if len(options) != 1 || options[0] != itoa(int(r.ID)) {
			t.Errorf("%s: Reserved offers %v, want reservation %d", c.lang, options, r.ID)
		}
		// The Ended tab is empty; the Active one of someone with nothing
		// running points to it.
		if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/instances?tab=ended"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-instances"]`))); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(textOf(t, ctx, `[data-testid="no-instances"]`), c.noInstances) {
			t.Errorf("%s: the Ended tab says nothing runs", c.lang)
		}
	}
	// Bob, with nothing yet: the form is open, the list points to the rest.
	storetest.MustCreateUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	ctx := chromium(t)
	if err := chromedp.Do(ctx, append(logInAs(e.srv.URL, "bob@example.com"), chromedp.Navigate(e.srv.URL+"/instances"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="see-ended"]`)))...); err != nil {
		t.Fatal(err)
	}
	if open, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="launch-panel"]').open`)); !open {
		t.Error("with nothing yet the launch form is closed")
	}
}
