// Package browsertest starts headless Chromium for the tests of what a
// person clicks (web's pages, e2e's terminal and app proxy).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns a headless Chromium tab for a test, or skips the test
// (with the reason) when there is no Chromium — except under CI=true,
// where browser tests must run. The tests of a package share one browser
// (starting one is most of a short test's time); each test gets a tab in
// a browser context of its own, so cookies and storage never cross
// tests. extra (e.g. a host resolver rule) starts a browser of the test's
// own.
func Chromium(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := chromiumPath(t)
	var browser context.Context
	if len(extra) > 0 {
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(allocatorOptions(path, t.TempDir()), extra...)...)
		ctx, cancelCtx := chromedp.NewContext(allocCtx)
		t.Cleanup(func() { cancelCtx(); cancelAlloc() })
		if err := chromedp.Do(ctx); err != nil { // the browser starts here
			t.Fatalf("start chromium: %v", err)
		}
		browser = ctx
	} else {
		shared.once.Do(func() {
			dir, err := os.MkdirTemp("", "gpuportal-chromium-")
			if err != nil {
				shared.err = err
				return
			}
			// Never cancelled: the browser lives as long as the test
			// binary (the allocator kills it when the binary exits).
			allocCtx, _ := chromedp.NewExecAllocator(context.Background(), allocatorOptions(path, dir)...)
			shared.browser, _ = chromedp.NewContext(allocCtx)
			shared.err = chromedp.Do(shared.browser)
		})
		if shared.err != nil {
			t.Fatalf("start chromium: %v", shared.err)
		}
		browser = shared.browser
	}
	tab, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelTab() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

// shared is the package's browser, started by the first test that needs it.
var shared struct {
	once    sync.Once
	browser context.Context
	err     error
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
// dashboard.
func LogIn(baseURL, email, password string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(baseURL + "/login"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), email),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), password),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
	}
}
