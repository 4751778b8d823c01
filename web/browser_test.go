package web

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/internal/browsertest"
	"gpuportal/store/storetest"
)

// chromium returns a headless Chromium context for a test, or skips the test
// (with the reason) when there is no Chromium — except under CI=true, where
// browser tests must run.
func chromium(t *testing.T) context.Context {
	t.Helper()
	// What a person clicks does not depend on the engine: the browser
	// tests run once, on SQLite; the HTTP suite runs on both.
	sqliteOnly(t, "browser tests run in the SQLite pass")
	return browsertest.Chromium(t)
}

// textOf returns the text content of the element matching sel.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// A person signs up, logs out, logs in, switches to Chinese and sees the
// dashboard in Chinese.
func TestBrowserSignUpLogInSwitchLanguage(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	run(
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.Click(chromedp.CSS(`[data-testid="nav-signup"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="signup-form"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="name"]`), "Wang Fang"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "wang@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), "a-good-password"),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="whoami"]`); got != "Wang Fang" {
		t.Fatalf("whoami = %q", got)
	}
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="account-menu-open"]`)), // logging out is in the account's menu
		chromedp.Click(chromedp.CSS(`[data-testid="logout"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-login"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="nav-login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="login-form"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "wang@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), "a-good-password"),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="dashboard"] h1`); got != "Dashboard" {
		t.Fatalf("dashboard heading = %q", got)
	}
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="lang-zh-CN"]`)),
		chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="dashboard"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="dashboard"] h1`); got != "控制台" {
		t.Fatalf("dashboard heading in Chinese = %q", got)
	}
	if got := textOf(t, ctx, `[data-testid="model-a100-80g"] [data-testid="list-price"]`); got != "¥8.00" {
		t.Fatalf("A100 price = %q", got)
	}
	u, err := e.db.UserByEmail(context.Background(), "wang@example.com")
	if err != nil || u.Lang != "zh-CN" {
		t.Fatalf("language not remembered: %+v %v", u, err)
	}
}

// waitJS waits until a JavaScript expression is true in the page.
func waitJS(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr)); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// (issue 12, item 2) On the launch form, picking H100 and 4 GPUs shows
// H100's spot price and the hourly figure for 4 GPUs, and keeps the command
// typed; the instance launched is charged that price.
func TestBrowserLaunchFormFollowsTheModel(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	models, _ := e.db.Models(context.Background())
	pol, _ := e.db.Policies(context.Background())
	var h100 gpuportal.Fen
	for _, m := range models {
		if m.ID == "h100-80g" {
			h100 = pol.SpotPriceOf(m)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "alice@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), storetest.Password),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
		chromedp.Navigate(e.srv.URL+"/instances"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-form"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="launch-command"]`), "python train.py"),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('[data-testid="launch-model"]'); s.value = 'h100-80g'; s.dispatchEvent(new Event('change', {bubbles: true})); })()`),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector('[data-testid="launch-kind"]').textContent.includes('`+h100.String()+`')`)
	if err := chromedp.Do(ctx,
		// A person takes longer than htmx needs to wire the swapped-in form;
		// the test makes sure it is wired before it types.
		chromedp.Evaluate[chromedp.Void](`(() => { const c = document.querySelector('[data-testid="launch-count"]'); htmx.process(c.form); c.value = '4'; c.dispatchEvent(new Event('change', {bubbles: true})); })()`),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector('[data-testid="launch-hourly"]').textContent.includes('`+(h100*4).String()+`')`)
	cmd, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="launch-command"]').value`))
	if err != nil || cmd != "python train.py" {
		t.Fatalf("the command typed = %q, %v", cmd, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="launch"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	list, _ := e.db.Instances(context.Background(), mustUser(t, e.db, "alice@example.com"), 0)
	if len(list) != 1 || list[0].Model != "h100-80g" || list[0].Count != 4 || list[0].PricePerGPU != h100 {
		t.Fatalf("launched %+v; want 4 × h100 at %d", list, h100)
	}
}

// logInAs is the login form filled in and sent, up to the dashboard (the
// test user's password is storetest.Password).
func logInAs(baseURL, email string) []chromedp.Action[chromedp.Void] {
	return browsertest.LogIn(baseURL, email, storetest.Password)
}
