package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// testPaymentSecret signs the test payment provider's webhooks.
const testPaymentSecret = "test-payment-secret-0123456789abcdef"

// testEnv is a real portal over HTTP on a real SQLite file.
type testEnv struct {
	t     testing.TB
	db    *store.DB
	clock *gpuportal.ManualClock // business time
	wall  *gpuportal.ManualClock // real time (rate limits)
	web   *Server
	srv   *httptest.Server
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	db, clock := storetest.Open(t)
	wall := gpuportal.NewManualClock(storetest.Epoch)
	db.Wall = wall // real time of the store too (node liveness, reset links, enrollment expiry)
	loc, _ := time.LoadLocation("Asia/Shanghai")
	// The portal knows its public address, as `portal serve` always does
	// (links it hands out are absolute).
	srv := httptest.NewUnstartedServer(nil)
	s, err := New(context.Background(), Config{
		PublicURL: "http://" + srv.Listener.Addr().String(),
		DB:        db, Clock: clock, WallClock: wall, Location: loc, TestPayments: true, PaymentSecret: testPaymentSecret,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Two simulated days, not the product's week: the comparisons the
		// tests read show in two, at a third of the race detector's time.
		WhatIfDays: testWhatIfDays,
		// Names resolve without a network: *.example.com to a public
		// documentation-free address, localhost to loopback.
		Resolver: fakeResolver{},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = s
	srv.Start()
	t.Cleanup(srv.Close)
	return &testEnv{t: t, db: db, clock: clock, wall: wall, web: s, srv: srv}
}

// browser is an HTTP client with a cookie jar that remembers the CSRF token
// of the last page it saw, like a person's browser.
type browser struct {
	t    testing.TB
	base string
	http *http.Client
	csrf string
}

func (e *testEnv) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, base: e.srv.URL, http: &http.Client{
		Jar:       jar,
		Transport: validatingTransport{e.t, http.DefaultTransport},
		// Stop at redirects so tests see the 303 and where it goes.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)"`)

type page struct {
	status   int
	body     string
	location string
	etag     string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfMeta.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return page{status: resp.StatusCode, body: string(body), location: resp.Header.Get("Location"), etag: resp.Header.Get("ETag")}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.do(req)
}

// post submits a form with the page's CSRF token.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["_csrf"]; !ok {
		form.Set("_csrf", b.csrf)
	}
	return b.postRaw(path, form)
}

// postRaw submits a form exactly as given (no CSRF token added).
func (b *browser) postRaw(path string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// api sends a JSON request with the browser's cookies and CSRF header.
func (b *browser) api(method, path string, body any) (int, map[string]any) {
	b.t.Helper()
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, b.base+path, r)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(csrfHeader, b.csrf)
	p := b.do(req)
	return p.status, decodeObject(b.t, p.body)
}

func (b *browser) login(email, password string) {
	b.t.Helper()
	b.get("/login")
	p := b.post("/login", url.Values{"email": {email}, "password": {password}})
	if p.status != http.StatusSeeOther {
		b.t.Fatalf("login %s: status %d\n%s", email, p.status, p.body)
	}
	b.get("/") // pick up the new session's CSRF token
}

// apiCall sends a JSON API request with an optional bearer token and a raw
// body, and returns the status and decoded body.
func (e *testEnv) apiCall(method, path, token string, body string) (int, string) {
	e.t.Helper()
	return e.apiCallWith(method, path, token, body, nil)
}

// apiCallWith is apiCall with more headers (X-Team).
func (e *testEnv) apiCallWith(method, path, token string, body string, header http.Header) (int, string) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Transport: validatingTransport{e.t, http.DefaultTransport}}).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func decodeObject(t testing.TB, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if strings.HasPrefix(strings.TrimSpace(body), "{") {
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("decode %q: %v", body, err)
		}
	}
	return m
}

// errorCode returns error.code of a JSON error envelope.
func errorCode(t testing.TB, body string) string {
	t.Helper()
	var env struct {
		Error struct{ Code, Message, Field string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("not a JSON error envelope: %q", body)
	}
	if env.Error.Message == "" {
		t.Fatalf("error without message: %q", body)
	}
	return env.Error.Code
}

// apiToken creates a user and an API token for them.
func (e *testEnv) apiToken(email, role string) (*gpuportal.User, string) {
	e.t.Helper()
	u := storetest.MustCreateUser(e.t, e.db, email, role)
	return u, e.tokenFor(u)
}

// tokenFor makes an API token for an existing user.
func (e *testEnv) tokenFor(u *gpuportal.User) string {
	e.t.Helper()
	_, secret, err := e.db.CreateAPIToken(context.Background(), u.ID, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

func storeFilter() store.ReservationFilter { return store.ReservationFilter{Limit: 1000} }

// sqliteOnly skips a test in the PostgreSQL pass, for a test whose
// subject does not depend on the portal's engine; why says so.
func sqliteOnly(t *testing.T, why string) {
	t.Helper()
	if storetest.Engine() == "postgres" {
		t.Skip(why)
	}
}

// testWhatIfDays is how long the tests' what-ifs simulate.
const testWhatIfDays = 2

// fakeResolver answers webhook host lookups without DNS: localhost and
// *.internal to private addresses, any other name to a public one.
type fakeResolver struct{}

func (fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch {
	case host == "localhost":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
	case strings.HasSuffix(host, ".internal"):
		return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
	case strings.HasSuffix(host, ".invalid"):
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
}
