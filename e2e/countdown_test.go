package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/internal/browsertest"
)

// (issue 28, part) An interruption's countdown reads as people say it —
// "Interrupted in 1 min 59 s", "中断倒计时 1 分 59 秒" — and ticks in the
// page between the list's refreshes.
func TestInterruptionCountdownInTheBrowser(t *testing.T) {
	t.Parallel()
	ctx := browsertest.Chromium(t)
	p := startPortal(t, false)
	// A ten-minute notice: the countdown must still be counting when the
	// Chinese page is read, however slow the machine (at the suite's
	// 10 s it could reach "now" first).
	pol := gpuportal.DefaultPolicies()
	pol.Global.SpotNoticeSeconds, pol.Global.SpotGraceSeconds = 600, 5
	if err := p.db.SetPolicies(context.Background(), &gpuportal.User{ID: 1, Role: gpuportal.RoleAdmin}, pol); err != nil {
		t.Fatal(err)
	}
	p.startAgent(t, t.TempDir(), t.TempDir(), "mock:dgxa100", true)
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1,"command":"sleep 3600"}`, &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	eventually(t, 30*time.Second, "instance running", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceRunning })
	if st := p.api("POST", fmt.Sprintf("/api/v1/admin/instances/%d/interrupt", inst.ID), p.admin, "", nil); st != 200 {
		t.Fatalf("interrupt = %d", st)
	}
	browserLogIn(t, ctx, p, "alice@example.com")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(p.url+"/instances"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="countdown"]`)),
	); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		s, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="countdown"]`)))
		return strings.Join(strings.Fields(s), " ")
	}
	// readWhen reads the countdown until it is what ok wants (a read
	// during the list's refresh can find none for a moment: that is no
	// answer yet), for up to 30 s; it returns the last value read.
	readWhen := func(ok func(string) bool) string {
		s := read()
		for deadline := time.Now().Add(30 * time.Second); !ok(s) && time.Now().Before(deadline); s = read() {
			time.Sleep(200 * time.Millisecond)
		}
		return s
	}
	first := read()
	if !regexp.MustCompile(`^Interrupted in \d+ min \d+ s \(`).MatchString(first) || strings.Contains(first, "SIGTERM") {
		t.Fatalf("countdown = %q", first)
	}
	now := readWhen(func(s string) bool { return s != "" && s != first })
	if now == first || !strings.HasPrefix(now, "Interrupted in ") {
		t.Errorf("the countdown did not tick: %q then %q", first, now)
	}
	// In Chinese.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/lang", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content}, body: "lang=zh-CN"}).then(() => 1)`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(p.url+"/instances"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="countdown"]`)),
	); err != nil {
		t.Fatal(err)
	}
	zh := readWhen(func(s string) bool { return s != "" })
	if !regexp.MustCompile(`^中断倒计时 \d+ 分 \d+ 秒`).MatchString(zh) {
		t.Errorf("zh-CN countdown = %q", zh)
	}
}
