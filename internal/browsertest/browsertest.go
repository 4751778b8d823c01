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

// Chromium returns a tab of headless Chromium for a test, or skips the
// test (with the reason) when there is no Chromium — except under
// CI=true, where browser tests must run. A package's tests share one
// Chromium, started by the first of them (starting one took a second or
// more of a busy machine per test); each test's tab lives in a browser
// context of its own — its own cookies, storage and renderer processes,
// so that one page's fonts (a Chinese page's CJK fallback once changed
// the layout of a later English one) and logins never reach another's —
// and is closed when the test ends. extra adds allocator options (e.g. a
// host resolver rule); a test that gives any gets a Chromium of its own.
func Chromium(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := chromiumPath(t)
	var parent context.Context
	if len(extra) > 0 {
		own, err := startChromium(path, t.TempDir(), extra)
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
		t.Cleanup(own.stop)
		parent = own.ctx
	} else {
		shared.once.Do(func() {
			dir, err := os.MkdirTemp("", "browsertest-")
			if err != nil {
				shared.err = err
				return
			}
			shared.browser, shared.err = startChromium(path, dir, nil)
		})
		if shared.err != nil {
			t.Fatalf("start chromium: %v", shared.err)
		}
		parent = shared.browser.ctx
	}
	tab, cancelTab := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(tab, 3*time.Minute) // a guard against a hung browser, not a speed test
	t.Cleanup(func() { cancelTimeout(); cancelTab() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(windowWidth, windowHeight)); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

// The window every test's tab starts with (a test may emulate another).
const windowWidth, windowHeight = 1280, 900

// shared is the package's Chromium, started by the first test that asks
// and ended with the test binary (see Close).
var shared struct {
	once    sync.Once
	browser *chromium
	err     error
}

// chromium is a running Chromium: ctx is its first, blank tab, which new
// tabs open beside.
type chromium struct {
	ctx  context.Context
	stop func()
	dir  string
}

func startChromium(path, dir string, extra []chromedp.ExecAllocatorOption) (*chromium, error) {
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(allocatorOptions(path, dir), extra...)...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(browser); err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, err
	}
	return &chromium{ctx: browser, stop: func() { cancelBrowser(); cancelAlloc() }, dir: dir}, nil
}

// Close ends the package's shared Chromium, if a test started it; a
// package's TestMain calls it after its tests. Without it the browser
// would still end with the test binary (chromedp gives it Pdeathsig), but
// leave its profile directory behind.
func Close() {
	if b := shared.browser; b != nil {
		b.stop()
		os.RemoveAll(b.dir)
	}
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
		// Tests share one Chromium, a tab each, and only one tab is in
		// front: without these, the others' timers (htmx's swaps and
		// settles, the pages' countdowns) ran at most once a second and
		// their renderers were deprioritized, so parallel browser tests
		// waited on the throttle, not on the machine.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.WindowSize(windowWidth, windowHeight),
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
