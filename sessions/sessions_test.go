package sessions

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"gpuportal"
	"gpuportal/sessions/stream"
)

// fakeBackend records what the hub asks of the store.
type fakeBackend struct {
	mu     sync.Mutex
	opened []gpuportal.SessionRequest
	closed []string
	seen   []string
	// user 7, as UserByID answers it (the app proxy's checks).
	version  int64
	disabled bool
}

func (f *fakeBackend) UserByID(_ context.Context, id int64) (*gpuportal.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != 7 {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "User %d not found.", id)
	}
	return &gpuportal.User{ID: 7, SessionVersion: f.version, Disabled: f.disabled}, nil
}

func (f *fakeBackend) SettingOrInit(_ context.Context, _ string, init func() string) (string, error) {
	return init(), nil
}
func (f *fakeBackend) SessionUser(context.Context, int64, string) (*gpuportal.User, error) {
	return &gpuportal.User{ID: 1}, nil
}
func (f *fakeBackend) VolumeSessionUser(context.Context, int64, string) (*gpuportal.User, error) {
	return nil, errors.New("no volumes here")
}

func (f *fakeBackend) OpenSession(_ context.Context, u *gpuportal.User, id int64, req gpuportal.SessionRequest, url string) (gpuportal.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == 404 {
		return gpuportal.Session{}, gpuportal.Errorf(gpuportal.ENOTFOUND, "Instance %d not found.", id)
	}
	f.opened = append(f.opened, req)
	return gpuportal.Session{ID: req.ID, InstanceID: id, UserID: u.ID, Kind: req.Kind}, nil
}
func (f *fakeBackend) CloseSession(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, id)
	return nil
}
func (f *fakeBackend) SeeSessions(_ context.Context, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, ids...)
	return nil
}
func (f *fakeBackend) RedeemAppToken(_ context.Context, token string, _ int64, _ int) (int64, error) {
	if token != "good" {
		return 0, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This link was used already or has expired: open the port again from the instance's page.")
	}
	return 7, nil
}

// The hub pairs a session with the agent's stream that connects for it:
// bytes both ways (error output apart), control, the exit status; the
// session is closed in the store when done; one nobody connects for
// times out; a stream for no waiting session is refused.
func TestHubJoinsASessionToItsAgentStream(t *testing.T) {
	b := &fakeBackend{}
	hub := NewHub(b, "", nil)
	hub.ConnectTimeout = 200 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := hub.Accept(w, r, strings.TrimPrefix(r.URL.Path, "/")); err == ErrNotWaiting {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	// The "agent": waits for the session to be asked for, then connects.
	agentDone := make(chan error, 1)
	go func() {
		var id string
		for id == "" {
			b.mu.Lock()
			if len(b.opened) > 0 {
				id = b.opened[0].ID
			}
			b.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
		ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/"+id, nil)
		if err != nil {
			agentDone <- err
			return
		}
		c := stream.Agent(context.Background(), ws)
		var resized *gpuportal.TTY
		c.OnControl = func(ctl gpuportal.SessionControl) { resized = ctl.Resize }
		in, err := io.ReadAll(c) // until the portal's EOF
		if err != nil {
			agentDone <- err
			return
		}
		if resized == nil || resized.Cols != 100 {
			agentDone <- io.ErrUnexpectedEOF
			return
		}
		_, _ = c.Write([]byte("you said: " + string(in)))
		_, _ = c.WriteStderr([]byte("a warning"))
		code := 3
		_ = c.Control(gpuportal.SessionControl{Exit: &code})
		agentDone <- c.Close()
	}()
	conn, done, err := hub.Open(context.Background(), &gpuportal.User{ID: 1}, 9, gpuportal.SessionRequest{Kind: gpuportal.SessionExec, Command: "cat", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	conn.Stderr = &stderr
	if err := conn.Control(gpuportal.SessionControl{Resize: &gpuportal.TTY{Cols: 100, Rows: 30}}); err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte("hello"))
	_ = conn.CloseWrite()
	out, _ := io.ReadAll(conn)
	if string(out) != "you said: hello" || stderr.String() != "a warning" || conn.Exit() == nil || *conn.Exit() != 3 {
		t.Fatalf("output %q, error output %q, exit %v", out, stderr.String(), conn.Exit())
	}
	done()
	if err := <-agentDone; err != nil {
		t.Fatalf("agent: %v", err)
	}
	b.mu.Lock()
	if len(b.closed) != 1 || b.closed[0] != b.opened[0].ID {
		t.Errorf("closed %v", b.closed)
	}
	b.mu.Unlock()

	// Nobody connects: a clear error, and the session is closed.
	if _, _, err := hub.Open(context.Background(), &gpuportal.User{ID: 1}, 9, gpuportal.SessionRequest{Kind: gpuportal.SessionShell, Group: "g2"}); gpuportal.ErrorCode(err) != gpuportal.EUNAVAILABLE {
		t.Fatalf("no agent: %v", err)
	}
	if _, _, err := hub.Open(context.Background(), &gpuportal.User{ID: 1}, 404, gpuportal.SessionRequest{Kind: gpuportal.SessionShell, Group: "g3"}); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("the store's refusal: %v", err)
	}
	if resp, err := http.Get(srv.URL + "/" + gpuportal.NewSessionID()); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a stream for no waiting session: %v %v", resp, err)
	}
}

// The app proxy reads only its own hosts, signs cookies that name one
// user, instance and port, and strips its cookie before the app.
func TestAppProxyHostsAndCookies(t *testing.T) {
	backend := &fakeBackend{}
	p, err := NewAppProxy(context.Background(), NewHub(backend, "", nil), backend, "apps.example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"12-8888.apps.example.com":      true,
		"12-8888.apps.example.com:8080": true,
		"12-8888.APPS.example.com":      true,
		"apps.example.com":              false,
		"x.12-8888.apps.example.com":    false,
		"12-99999.apps.example.com":     false,
		"12.apps.example.com":           false,
		"0-80.apps.example.com":         false,
		"12-8888.apps.example.com.evil": false,
		"portal.example.com":            false,
	} {
		if _, _, ok := p.Match(host); ok != want {
			t.Errorf("Match(%q) = %v", host, ok)
		}
	}
	if got := p.OpenURL("https", "443", 12, 8888, "tok"); got != "https://12-8888.apps.example.com/__gpuportal/open?token=tok" {
		t.Errorf("OpenURL = %s", got)
	}
	if got := p.OpenURL("http", "8080", 12, 8888, "tok"); got != "http://12-8888.apps.example.com:8080/__gpuportal/open?token=tok" {
		t.Errorf("OpenURL = %s", got)
	}
	exp := time.Now().Add(time.Hour).Unix()
	ctx := context.Background()
	cookie := p.sign(7, 12, 8888, exp, 0)
	if uid, ok := p.verify(ctx, cookie, 12, 8888); !ok || uid != 7 {
		t.Errorf("a good cookie: %d %v", uid, ok)
	}
	for name, bad := range map[string]string{
		"another port":     cookie,
		"tampered user":    strings.Replace(cookie, "7.", "8.", 1),
		"expired":          p.sign(7, 12, 8888, time.Now().Add(-time.Minute).Unix(), 0),
		"another instance": p.sign(7, 13, 8888, exp, 0),
		"older version":    p.sign(7, 12, 8888, exp, -1),
		"unknown user":     p.sign(9, 12, 8888, exp, 0),
		"garbage":          "x",
	} {
		port := 8888
		if name == "another port" {
			port = 8889
		}
		if _, ok := p.verify(ctx, bad, 12, port); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	// Without the cookie: 403 and nothing of the app; a bad token: 403.
	for _, path := range []string{"/", "/__gpuportal/open?token=bad"} {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest("GET", "http://12-8888.apps.example.com"+path, nil))
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d", path, rec.Code)
		}
	}
	// A good token: a cookie for this host alone, then to the app's root.
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", "http://12-8888.apps.example.com/__gpuportal/open?token=good", nil))
	set := rec.Header().Get("Set-Cookie")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" || !strings.Contains(set, appCookie+"=") || strings.Contains(strings.ToLower(set), "domain=") || !strings.Contains(set, "HttpOnly") {
		t.Errorf("redeem: %d %v", rec.Code, rec.Header())
	}
	// (issue 44, items 10 and 11) Behind a TLS-terminating proxy the
	// portal trusts, the cookie is Secure; a password change (the session
	// version moves on) or a disabled account ends it.
	p.IsHTTPS = func(r *http.Request) bool { return r.Header.Get("X-Forwarded-Proto") == "https" }
	behindTLS := httptest.NewRequest("GET", "http://12-8888.apps.example.com/__gpuportal/open?token=good", nil)
	behindTLS.Header.Set("X-Forwarded-Proto", "https")
	rec = httptest.NewRecorder()
	p.ServeHTTP(rec, behindTLS)
	if set := rec.Header().Get("Set-Cookie"); !strings.Contains(set, "Secure") {
		t.Errorf("behind TLS, the app cookie is not Secure: %q", set)
	}
	backend.mu.Lock()
	backend.version = 1
	backend.mu.Unlock()
	if _, ok := p.verify(ctx, cookie, 12, 8888); ok {
		t.Error("the app cookie outlived a password change")
	}
	backend.mu.Lock()
	backend.disabled = true
	backend.mu.Unlock()
	if _, ok := p.verify(ctx, p.sign(7, 12, 8888, exp, 1), 12, 8888); ok {
		t.Error("the app cookie works for a disabled account")
	}
	rec = httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", "http://12-8888.apps.example.com/__gpuportal/open?token=good", nil))
	if rec.Code != http.StatusForbidden {
		t.Errorf("a disabled account redeemed a token: %d", rec.Code)
	}

	// (issue 44, item 9) An app's cookies stay on its host: Domain= goes
	// (it could reach the portal under a shared parent domain), and a
	// cookie that would shadow the proxy's own is dropped.
	h := http.Header{}
	h.Add("Set-Cookie", "gpuportal_session=attacker; Domain=example.com; Path=/")
	h.Add("Set-Cookie", "_xsrf=abc; Domain=.apps.example.com; Path=/; HttpOnly")
	h.Add("Set-Cookie", appCookie+"=forged; Path=/")
	h.Add("Set-Cookie", "theme=dark")
	ownCookiesOnly(h)
	got := strings.Join(h.Values("Set-Cookie"), "\n")
	if strings.Contains(strings.ToLower(got), "domain") || strings.Contains(got, "forged") || !strings.Contains(got, "_xsrf=abc") || !strings.Contains(got, "theme=dark") ||
		!strings.Contains(got, "gpuportal_session=attacker; Path=/") {
		t.Errorf("an app's cookies after the proxy: %q", got)
	}

	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Cookie", appCookie+"=secret; _xsrf=keep; theme=dark")
	stripCookie(req, appCookie)
	if got := req.Header.Get("Cookie"); strings.Contains(got, "secret") || !strings.Contains(got, "_xsrf=keep") || !strings.Contains(got, "theme=dark") {
		t.Errorf("cookies after stripping: %q", got)
	}
}
