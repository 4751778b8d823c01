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

// Chromium returns a headless Chromium context for a test, or skips the
// test (with the reason) when there is no Chromium — except under
// CI=true, where browser tests must run. extra adds allocator options
// (e.g. a host resolver rule).
func Chromium(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
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
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
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
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}
