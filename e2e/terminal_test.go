package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"gpuportal"
	"gpuportal/internal/browsertest"
	"gpuportal/store/storetest"
)

// browserLogIn logs the test customer in through the login form.
func browserLogIn(t *testing.T, ctx context.Context, p *portal, email string) {
	t.Helper()
	if err := chromedp.Do(ctx, browsertest.LogIn(p.url, email, storetest.Password)...); err != nil {
		t.Fatalf("log in: %v", err)
	}
}

// (issue 23) The web terminal in Chromium: Connect on the instance page
// opens it, a typed command's output appears, a resize reaches the shell;
// a WebSocket from another Origin is refused.
func TestWebTerminalInTheBrowser(t *testing.T) {
	t.Parallel()
	ctx := browsertest.Chromium(t)
	p := startPortal(t, false)
	p.startAgent(t, t.TempDir(), t.TempDir(), "mock:dgxa100", true)
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"sleep 3600"}`, &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	eventually(t, 30*time.Second, "instance running", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceRunning })

	browserLogIn(t, ctx, p, "alice@example.com")
	var screen string
	if err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/instances/%d", p.url, inst.ID)),
		chromedp.Click(chromedp.CSS(`[data-testid="open-terminal"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#terminal[data-state="connected"]`)),
		chromedp.Focus(chromedp.CSS(`.xterm-helper-textarea`)),
		// Typed as a person's input method would (key events would also
		// reach xterm.js as keypresses, doubling each character).
		func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: "echo $((6*7))-from-the-browser; stty size"})
			return chromedp.Void{}, err
		},
		chromedp.KeyEvent("\r"),
	); err != nil {
		t.Fatalf("open the terminal: %v", err)
	}
	// stty size prints the rows and columns xterm.js fitted to the page
	// (not a default): the size went through.
	size, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('terminal').dataset.size`))
	if size == "" {
		t.Fatal("the terminal page did not record its size")
	}
	deadline := time.Now().Add(20 * time.Second)
	done := func() bool {
		return strings.Contains(screen, "42-from-the-browser") && strings.Contains(screen, "\n"+size)
	}
	for time.Now().Before(deadline) && !done() {
		screen, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.xterm-rows').innerText`))
		time.Sleep(100 * time.Millisecond)
	}
	if !done() {
		t.Fatalf("the command's output (and the size %q) did not show in the terminal:\n%s", size, screen)
	}

	// The instance page lists the terminal as an open session.
	eventually(t, 20*time.Second, "the terminal listed as a session", func() bool {
		for _, s := range p.instance(inst.ID).Sessions {
			if s.Kind == gpuportal.SessionTerminal {
				return true
			}
		}
		return false
	})

	// The same cookie from another Origin: refused before any session opens.
	got, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (*network.GetCookiesResult, error) {
		res, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{})
		return &res, err
	})
	if err != nil {
		t.Fatal(err)
	}
	cookies := got.Cookies
	header := http.Header{"Origin": {"http://evil.example"}}
	for _, c := range cookies {
		header.Add("Cookie", c.Name+"="+c.Value)
	}
	wsURL := "ws" + strings.TrimPrefix(p.url, "http") + fmt.Sprintf("/instances/%d/terminal/ws", inst.ID)
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, resp, err := websocket.Dial(dctx, wsURL, &websocket.DialOptions{HTTPHeader: header}); err == nil {
		c.CloseNow()
		t.Fatal("a WebSocket from another Origin was accepted")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another Origin: %v %v", resp, err)
	}
}
