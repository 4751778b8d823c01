package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 50, item 3) The instance page is where people work, in English
// and in Chinese: while a spot instance runs, the book wanting its GPUs
// back shows as a banner with the time and the reason (and in the list);
// its status follows the notice without a reload; once it has ended the
// page says from–to, what it cost and why, with Launch again, which opens
// the launch form filled as it was launched.
func TestBrowserLiveInstancePage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	bob := storetest.MustCreateUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	ctx := t.Context()
	e.clock.Set(day0.Add(16*time.Hour + 30*time.Minute))
	inst := runningInstance(t, e, alice, nodes[0].ID, gpuportal.KindSpot)
	// Bob books every GPU from 17:00: at 16:40 the book recommends that
	// the spot instance checkpoint (30 minutes' lead).
	if _, err := e.db.Book(ctx, bob, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: day0.Add(17 * time.Hour), End: day0.Add(21 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(day0.Add(16*time.Hour + 40*time.Minute))
	if _, err := e.db.Tick(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	page := fmt.Sprintf("%s/instances/%d", e.srv.URL, inst.ID)
	for _, c := range []struct{ lang, banner string }{
		{gpuportal.LangEnglish, "Reclaim expected around 17:00 because a booking starts on these GPUs"},
		{gpuportal.LangChinese, "预计约 17:00 回收，因为有预订将在这些 GPU 上开始"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			cctx := chromium(t)
			steps := logInAs(e.srv.URL, "alice@example.com")
			if c.lang == gpuportal.LangChinese {
				steps = append(steps, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="dashboard"]`)))
			}
			steps = append(steps, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`[data-testid="rebalance-banner"]`)))
			if err := chromedp.Do(cctx, steps...); err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, cctx, `[data-testid="rebalance-banner"]`); !strings.Contains(got, c.banner) {
				t.Errorf("the banner says %q", got)
			}
			if err := chromedp.Do(cctx, chromedp.Navigate(e.srv.URL+"/instances"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="rebalance-warning"]`))); err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, cctx, `[data-testid="rebalance-warning"]`); !strings.Contains(got, "17:00") {
				t.Errorf("the list's warning says %q", got)
			}
		})
	}
	// Its notice comes; the open page's status follows without a reload.
	cctx := chromium(t)
	if err := chromedp.Do(cctx, append(logInAs(e.srv.URL, "alice@example.com"), chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`[data-testid="live-status"]`)))...); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(day0.Add(16*time.Hour + 58*time.Minute + 30*time.Second))
	if _, err := e.db.Tick(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.db.Instance(ctx, alice, inst.ID); got.Status != gpuportal.InstanceInterrupting {
		t.Fatalf("at 16:58:30 the instance is %s", got.Status)
	}
	// (Alice reads Chinese since her last visit: the badge's class says it.)
	waitJS(t, cctx, `!!document.querySelector('[data-testid="live-status"] .badge.interrupting')`)
	// It ends: the page says what happened, and Launch again fills the form.
	reportExit(t, e, nodes[0].ID, inst, 143)
	if err := chromedp.Do(cctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`[data-testid="ended"]`))); err != nil {
		t.Fatal(err)
	}
	ended := textOf(t, cctx, `[data-testid="ended"]`)
	if !strings.Contains(ended, "¥") || !strings.Contains(ended, "17:00") {
		t.Errorf("the ended page says %q", ended)
	}
	if err := chromedp.Do(cctx, chromedp.Click(chromedp.CSS(`[data-testid="launch-again"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-notice"]`))); err != nil {
		t.Fatal(err)
	}
	if kind, _ := chromedp.Run(cctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="launch-kind"]').value`)); kind != string(gpuportal.KindSpot) {
		t.Errorf("Launch again opens the form for %q", kind)
	}
}
