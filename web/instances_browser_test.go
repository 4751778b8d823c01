package web

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// The instances list refreshes itself every 2 s; an output panel the
// reader opened stays open through the refreshes, and the row says when
// the instance started and for how long it has run.
func TestBrowserOutputPanelStaysOpen(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	in, err := e.db.Launch(t.Context(), u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "python train.py"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.db.ApplyWorkloadReports(t.Context(), "a-1", []gpuportal.WorkloadStatus{{InstanceID: in.ID, Attempt: 1, State: gpuportal.WorkloadRunning,
		LogTail: "epoch 1: loss 0.42\n"}}); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(e.clock.Now().Add(80 * 60e9)) // 1 h 20 min later
	if err := chromedp.Do(ctx, logInAs(e.srv.URL, "alice@example.com")...); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/instances"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="log-tail"] summary`)),
		chromedp.Evaluate[chromedp.Void](`window.listSwaps = 0; document.addEventListener("htmx:afterSwap", e => { if (e.detail.target.id === "instance-list") window.listSwaps++; })`),
		chromedp.Click(chromedp.CSS(`[data-testid="log-tail"] summary`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `window.listSwaps >= 2`)
	open, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="log-tail"]').open`))
	if err != nil || !open {
		t.Fatalf("the output panel closed with the refresh (open=%v, %v)", open, err)
	}
	if got := textOf(t, ctx, `[data-testid="log-tail"] pre`); !strings.Contains(got, "loss 0.42") {
		t.Fatalf("output = %q", got)
	}
	if got := textOf(t, ctx, `[data-testid="started"]`); got != "started 2026-11-30 08:00, running for 1 h 20 min" {
		t.Fatalf("started = %q", got)
	}
}

// (issue 28) "Stop" asks first: answered no, the instance keeps running;
// answered yes, it stops. (The page's confirm is answered by the test.)
func TestBrowserStopAsksFirst(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	in, err := e.db.Launch(t.Context(), u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "python train.py"})
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, logInAs(e.srv.URL, "alice@example.com")...); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/instances"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="stop"]`)),
		chromedp.Evaluate[chromedp.Void](`window.confirm = function (m) { window.asked = m; return false; }`),
		chromedp.Click(chromedp.CSS(`[data-testid="stop"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `(window.asked || "").indexOf("Stop instance #`+fmt.Sprint(in.ID)+`") === 0`)
	if got, _ := e.db.Instance(t.Context(), u, in.ID); got.Status != gpuportal.InstancePending {
		t.Fatalf("answered no, the instance is %s", got.Status)
	}
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`window.confirm = function () { return true; }`),
		chromedp.Click(chromedp.CSS(`[data-testid="stop"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.db.Instance(t.Context(), u, in.ID); got.Status != gpuportal.InstanceStopped {
		t.Fatalf("answered yes, the instance is %s", got.Status)
	}
}
