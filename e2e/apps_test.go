package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"gpuportal"
	"gpuportal/internal/browsertest"
)

// appServer is a web app "inside" an exec instance (which shares its
// node's network): a page that opens a WebSocket back to its own origin,
// and an echo on it. It records the cookies it is sent.
type appServer struct {
	port    int
	mu      sync.Mutex
	cookies []string
}

func startAppServer(t *testing.T) *appServer {
	t.Helper()
	a := &appServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.cookies = append(a.cookies, r.Header.Get("Cookie"))
		a.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "app_own", Value: "kept", Path: "/"})
		fmt.Fprint(w, `<!doctype html><title>notebook</title><h1 id="app">the app inside</h1><p id="echo"></p>
<script>
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
ws.onopen = () => ws.send("kernel-ping");
ws.onmessage = (ev) => { document.getElementById("echo").textContent = ev.data; };
</script>`)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil) // the library checks Origin against Host, as Jupyter does
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo:"), msg...)); err != nil {
				return
			}
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.port = l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return a
}

// (issue 23) "Open port N" in Chromium: the app is served on its own
// origin (<id>-<port>.localhost), HTTP and WebSocket, after a one-time
// token from the portal; that origin shows nothing without the token (or
// with a used one), and the portal's cookies never reach the app.
func TestOpenPortInTheBrowser(t *testing.T) {
	t.Parallel()
	ctx := browsertest.Chromium(t, chromedp.Flag("host-resolver-rules", "MAP *.localhost 127.0.0.1"))
	p := startPortal(t, false)
	p.startAgent(t, t.TempDir(), t.TempDir(), "mock:dgxa100", true)
	app := startAppServer(t)
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"sleep 3600"}`, &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	eventually(t, 30*time.Second, "instance running", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceRunning })
	_, portalPort, _ := net.SplitHostPort(strings.TrimPrefix(p.url, "http://"))
	appOrigin := fmt.Sprintf("http://%d-%d.localhost:%s", inst.ID, app.port, portalPort)

	// Go's resolver knows no *.localhost: dial the portal for any host.
	toPortal := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+portalPort)
	}}
	// Without the handed-over token the app's origin shows nothing of it.
	resp, err := (&http.Client{Transport: toPortal}).Get(appOrigin + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "the app inside") {
		t.Fatalf("the app's origin without a token: %d %q", resp.StatusCode, body)
	}

	browserLogIn(t, ctx, p, "alice@example.com")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/instances/%d", p.url, inst.ID)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="open-port-number"]`), fmt.Sprint(app.port)),
		// The form opens a new tab; the same address in this one.
		chromedp.Navigate(fmt.Sprintf("%s/instances/%d/ports/%d/open", p.url, inst.ID, app.port)),
		chromedp.WaitVisible(chromedp.CSS(`#app`)),
	); err != nil {
		t.Fatalf("open the port: %v", err)
	}
	location, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.origin`))
	if location != appOrigin {
		t.Fatalf("the app is at %q, not on its own origin %q", location, appOrigin)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("echo").textContent === "echo:kernel-ping"`)); err != nil {
		t.Fatalf("the app's WebSocket did not echo through the proxy: %v", err)
	}
	// The portal's cookies never reached the app; its own cookie is kept.
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#app`))); err != nil {
		t.Fatal(err)
	}
	app.mu.Lock()
	seen := append([]string(nil), app.cookies...)
	app.mu.Unlock()
	if len(seen) < 2 || !strings.Contains(seen[len(seen)-1], "app_own=kept") {
		t.Fatalf("the app's own cookie did not come back: %q", seen)
	}
	for _, c := range seen {
		if strings.Contains(c, "gpuportal") || strings.Contains(c, "session") {
			t.Fatalf("the app was sent the portal's or the proxy's cookie: %q", c)
		}
	}

	// A token works once: the same link again is refused.
	noFollow := &http.Client{Transport: toPortal, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	link := openPortLink(t, p, noFollow, inst.ID, app.port)
	for k, want := range []int{http.StatusSeeOther, http.StatusForbidden} {
		resp, err := noFollow.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("use %d of the token: %d, want %d", k+1, resp.StatusCode, want)
		}
	}
}

// openPortLink asks the portal (as the customer, with an API token) for
// the app link GET /instances/{id}/ports/{port}/open hands over.
func openPortLink(t *testing.T, p *portal, client *http.Client, id int64, port int) string {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/instances/%d/ports/%d/open", p.url, id, port), nil)
	req.Header.Set("Authorization", "Bearer "+p.user)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("open port = %d", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}
