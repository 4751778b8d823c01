// Package browsertest starts headless Chromium for the tests of what a
// person clicks (web's pages, e2e's terminal and app proxy).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns a headless Chromium for a test, or skips the test
// (with the reason) when there is no Chromium — except under CI=true,
// where browser tests must run. Each test gets a browser of its own: one
// shared by a package's tests let a Chinese page's CJK font change the
// layout of later English ones (the phone-width test saw 401 px). extra
// adds allocator options (e.g. a host resolver rule).
func Chromium(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := chromiumPath(t)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(allocatorOptions(path, t.TempDir()), extra...)...)
	browser, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(browser, 3*time.Minute) // a guard against a hung browser, not a speed test
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

func chromiumPath(t testing.TB) string {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		if lp, err := exec.LookPath("chromium"); err == nil {
			path = lp
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no Chromium found (apt-get install chromium)")
		}
		t.Skip("skipping browser test: no Chromium at /usr/bin/chromium (apt-get install chromium, or set CHROMIUM)")
	}
	return path
}

// allocatorOptions start Chromium as root with no internet, in dir.
func allocatorOptions(path, dir string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
}

// LogIn is the portal's login form filled in and sent, up to the
// dashboard (a customer's) or the admin overview (an admin's home).
func LogIn(baseURL, email, password string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(baseURL + "/login"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), email),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), password),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"], [data-testid="admin-overview"]`)),
	}
}
