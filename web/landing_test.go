package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 28) A visitor's first page says what the platform offers, with a
// call to action, the GPUs free right now and the nodes they come in;
// its numbers follow the fleet.
func TestLandingPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 2, 8)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 4)
	b := e.browser()
	p := b.get("/")
	for _, want := range []string{`data-testid="cta-signup"`, `href="/signup"`, `data-testid="cta-calendar"`, "Spot, up to 70 % off", "120 s by default",
		"JupyterLab", `data-testid="available-a100-80g-cd-1"`, "16 of 16", "4 of 4", `href="/calendar?model=h100-80g&amp;region=cd-1"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the landing page lacks %q", want)
		}
	}
	// A spot instance takes 2 GPUs: no longer free.
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	if _, err := e.db.Launch(t.Context(), alice, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "train"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/"); !strings.Contains(p.body, "14 of 16") {
		t.Errorf("free GPUs do not follow a launch:\n%s", p.body)
	}
	// A signed-in customer gets the dashboard instead.
	b.login("alice@example.com", storetest.Password)
	if p := b.get("/"); strings.Contains(p.body, `data-testid="landing"`) || !strings.Contains(p.body, `data-testid="dashboard"`) {
		t.Errorf("a customer's home is not the dashboard")
	}
}

// (issue 28) In a browser, at 1280 and 390 px and in both languages, the
// call to action is on the first screen and leads to the calendar.
func TestBrowserLandingCallToAction(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	for _, lang := range []string{gpuportal.LangEnglish, gpuportal.LangChinese} {
		for _, width := range []int64{1280, 390} {
			ctx := chromium(t)
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 800), chromedp.Navigate(e.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="cta-signup"]`))); err != nil {
				t.Fatal(err)
			}
			if lang == gpuportal.LangChinese {
				if err := chromedp.Do(ctx, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="cta-signup"]`))); err != nil {
					t.Fatal(err)
				}
			}
			bottom, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector('[data-testid="cta-calendar"]').getBoundingClientRect().bottom`))
			if bottom <= 0 || bottom > 800 {
				t.Errorf("%s at %d px: the call to action ends at %.0f px, below the first screen", lang, width, bottom)
			}
			if lang == gpuportal.LangChinese {
				if got := textOf(t, ctx, `[data-testid="cta-signup"]`); got != "注册账户" {
					t.Errorf("the Chinese call to action reads %q", got)
				}
			}
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="cta-calendar"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="calendar-grid"]`))); err != nil {
				t.Fatal(err)
			}
		}
	}
}
