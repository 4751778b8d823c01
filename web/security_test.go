package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/ics"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// with starts a second server on the test's database with cfg changed,
// and points the test's HTTP server at it.
func (e *testEnv) with(change func(*Config)) {
	e.t.Helper()
	cfg := e.web.cfg
	change(&cfg)
	s, err := New(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.web = s
	e.srv.Config.Handler = s
}

// (issue 12, item 7) ?next= leads only to paths on this site.
func TestLoginNextStaysOnSite(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "a@example.com", gpuportal.RoleCustomer)
	for _, tt := range []struct{ next, want string }{
		{"/settings", "/settings"},
		{"/reservations?status=active", "/reservations?status=active"},
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"//evil.example", "/"},
		{"/\\evil.example", "/"},
		{"/\\/evil.example", "/"},
		{"https://evil.example/", "/"},
		{"javascript:alert(1)", "/"},
		{" /settings", "/"},
		{"/%09/evil.example", "/%09/evil.example"}, // still encoded: a path here
	} {
		b := e.browser()
		b.get("/login")
		p := b.post("/login", url.Values{"email": {"a@example.com"}, "password": {storetest.Password}, "next": {tt.next}})
		if p.status != http.StatusSeeOther || p.location != tt.want {
			t.Errorf("login with next=%q → %d %q; want %q", tt.next, p.status, p.location, tt.want)
		}
	}
	// The reported attack, through the query string of the login page.
	b := e.browser()
	p := b.get("/login?next=/%09/evil.example")
	if strings.Contains(p.body, `value="/	/evil.example"`) {
		t.Errorf("the login page carries the tab-prefixed next")
	}
}

// (item 4) Metric labels come from a fixed set: invented methods do not
// grow the registry, and /metrics can be limited to some addresses.
func TestMetricsLabelsAreBounded(t *testing.T) {
	t.Parallel()
	sqliteOnly(t, "the metrics' labels come from the router, before any store")
	e := newTestEnv(t)
	for i := 0; i < 100; i++ {
		req, _ := http.NewRequest(strings.Repeat("X", 5000)+fmt.Sprint(i), e.srv.URL+"/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		req, _ = http.NewRequest(http.MethodGet, e.srv.URL+"/no/such/route/"+fmt.Sprint(i), nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	_, body := e.apiCall(http.MethodGet, "/metrics", "", "")
	if strings.Contains(body, "XXXXX") || strings.Contains(body, "/no/such/route") {
		t.Fatal("client input became a metric label")
	}
	if !strings.Contains(body, `method="other"`) {
		t.Fatalf("no method=\"other\" series:\n%s", regexp.MustCompile(`(?m)^gpuportal_http_requests_total.*$`).FindAllString(body, -1))
	}
	routes := map[string]bool{"unmatched": true}
	for _, r := range e.web.echo.Routes() {
		routes[r.Path] = true
	}
	for _, m := range regexp.MustCompile(`route="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if !routes[m[1]] {
			t.Errorf("route label %q is not a registered route", m[1])
		}
	}
	if len(body) > 200_000 {
		t.Fatalf("/metrics is %d bytes after 200 odd requests", len(body))
	}

	e.with(func(c *Config) { c.MetricsAllow, _ = ParseCIDRs("192.0.2.0/24") })
	if st, body := e.apiCall(http.MethodGet, "/metrics", "", ""); st != http.StatusForbidden || strings.Contains(body, "gpuportal_http") {
		t.Fatalf("/metrics from outside the allow-list = %d %s", st, body)
	}
	e.with(func(c *Config) { c.MetricsAllow, _ = ParseCIDRs("127.0.0.1, ::1") })
	if st, _ := e.apiCall(http.MethodGet, "/metrics", "", ""); st != http.StatusOK {
		t.Fatalf("/metrics from the allow-list = %d", st)
	}
}

func loginFrom(e *testEnv, ip, email, password string) int {
	e.t.Helper()
	b := e.browser()
	b.get("/login")
	form := url.Values{"email": {email}, "password": {password}, "_csrf": {b.csrf}}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if ip != "" {
		req.Header.Set("X-Forwarded-For", ip)
	}
	return b.do(req).status
}

// (item 5) A made-up X-Forwarded-For neither dodges the per-address limit
// nor lets one address lock someone else out; behind a configured proxy
// the forwarded address counts.
func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	sqliteOnly(t, "the limiter and the address it keys on are in memory")
	e := newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "victim@example.com", gpuportal.RoleCustomer)
	for i := 0; i < loginFailsPerIP; i++ {
		loginFrom(e, fmt.Sprintf("198.51.100.%d", i), fmt.Sprintf("u%d@example.com", i), "wrong-password")
	}
	if st := loginFrom(e, "198.51.100.200", "victim@example.com", storetest.Password); st != http.StatusTooManyRequests {
		t.Fatalf("a fresh X-Forwarded-For dodged the per-address limit: %d", st)
	}

	e = newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "victim@example.com", gpuportal.RoleCustomer)
	e.with(func(c *Config) { c.TrustedProxies, _ = ParseCIDRs("127.0.0.0/8") })
	for i := 0; i < loginFailsPerUser+3; i++ {
		loginFrom(e, "203.0.113.7", "victim@example.com", "attacker-guess")
	}
	if st := loginFrom(e, "203.0.113.7", "victim@example.com", storetest.Password); st != http.StatusTooManyRequests {
		t.Fatalf("the guessing address is not limited: %d", st)
	}
	if st := loginFrom(e, "198.51.100.9", "victim@example.com", storetest.Password); st != http.StatusSeeOther {
		t.Fatalf("the owner from another address is locked out: %d", st)
	}
}

// (item 5) Sign-ups and token creations are limited per address.
func TestSignupAndTokenRateLimits(t *testing.T) {
	t.Parallel()
	sqliteOnly(t, "the limiter is in memory; sign-up on both engines is TestContractRequestBodies' and the auth tests'")
	e := newTestEnv(t)
	for i := 0; i < signupsPerIP; i++ {
		st, body := e.apiCall(http.MethodPost, "/api/v1/auth/signup", "", fmt.Sprintf(`{"email":"s%d@example.com","password":"a-good-password","name":"S"}`, i))
		if st != http.StatusCreated {
			t.Fatalf("sign-up %d = %d %s", i, st, body)
		}
	}
	st, body := e.apiCall(http.MethodPost, "/api/v1/auth/signup", "", `{"email":"one-more@example.com","password":"a-good-password","name":"S"}`)
	if st != http.StatusTooManyRequests || errorCode(t, body) != gpuportal.ERATELIMITED {
		t.Fatalf("sign-up past the limit = %d %s", st, body)
	}
	if _, err := e.db.UserByEmail(context.Background(), "one-more@example.com"); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatal("a refused sign-up created the account")
	}
	b := e.browser()
	b.get("/signup")
	if p := b.post("/signup", url.Values{"email": {"form@example.com"}, "password": {"a-good-password"}, "name": {"F"}}); p.status != http.StatusTooManyRequests {
		t.Fatalf("sign-up form past the limit = %d", p.status)
	}

	for i := 0; i < tokenCreationsPerIP; i++ {
		if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/tokens", "", `{"email":"s0@example.com","password":"a-good-password","name":"t"}`); st != http.StatusCreated {
			t.Fatalf("token %d = %d %s", i, st, body)
		}
	}
	if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/tokens", "", `{"email":"s0@example.com","password":"a-good-password","name":"t"}`); st != http.StatusTooManyRequests {
		t.Fatalf("token past the limit = %d %s", st, body)
	}
	e.wall.Advance(tokenWindow)
	if st, _ := e.apiCall(http.MethodPost, "/api/v1/auth/tokens", "", `{"email":"s0@example.com","password":"a-good-password","name":"t"}`); st != http.StatusCreated {
		t.Fatalf("token after the window = %d", st)
	}
}

// (item 5) However many addresses fail, the limiter's memory stays bounded.
func TestLimiterMemoryIsBounded(t *testing.T) {
	t.Parallel()
	sqliteOnly(t, "the limiter is in memory")
	l := newLimiter(gpuportal.NewManualClock(storetest.Epoch))
	if l.maxKeys != limiterMaxTrackedKeys {
		t.Fatalf("a new limiter keeps %d keys, want %d", l.maxKeys, limiterMaxTrackedKeys)
	}
	// The same code at a twentieth of the bound: a flood of four times
	// the room, swept many times over.
	l.maxKeys = limiterMaxTrackedKeys / 20
	for i := 0; i < 4*l.maxKeys; i++ {
		l.loginFailed(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), "x@example.com")
	}
	if n := len(l.events); n > l.maxKeys {
		t.Fatalf("%d keys tracked; the bound is %d", n, l.maxKeys)
	}
	for _, times := range l.events {
		if len(times) > limiterMaxEventsPerKey {
			t.Fatalf("a key keeps %d events", len(times))
		}
	}
}

// (item 8) Logout ends the session for every copy of its cookie.
func TestLogoutEndsCopiedSessions(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "a@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("a@example.com", storetest.Password)
	u, _ := url.Parse(e.srv.URL)
	stolen := b.http.Jar.Cookies(u)
	thief := e.browser()
	thief.http.Jar.SetCookies(u, stolen)
	if p := thief.get("/settings"); p.status != http.StatusOK {
		t.Fatalf("the copied cookie does not work before logout: %d", p.status)
	}
	b.post("/logout", nil)
	if p := thief.get("/settings"); p.status != http.StatusSeeOther {
		t.Fatalf("a copied cookie still works after logout: %d", p.status)
	}
	// Logging in again works, and starts a fresh session.
	b.login("a@example.com", storetest.Password)
	if p := b.get("/settings"); p.status != http.StatusOK {
		t.Fatalf("log in after logout: %d", p.status)
	}
}

// (item 8) A password change ends every other session, keeps this one, and
// the old password stops working.
func TestPasswordChangeEndsOtherSessions(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "a@example.com", gpuportal.RoleCustomer)
	laptop, phone := e.browser(), e.browser()
	laptop.login("a@example.com", storetest.Password)
	phone.login("a@example.com", storetest.Password)
	laptop.get("/settings")
	if p := laptop.post("/settings/password", url.Values{"current_password": {"not-my-password"}, "password": {"a-new-password-1"}}); p.status != http.StatusBadRequest ||
		!strings.Contains(p.body, `data-testid="error-pw_current_password"`) {
		t.Fatalf("wrong current password = %d", p.status)
	}
	if p := laptop.post("/settings/password", url.Values{"current_password": {storetest.Password}, "password": {"short"}}); p.status != http.StatusBadRequest ||
		!strings.Contains(p.body, `data-testid="error-pw_password"`) {
		t.Fatalf("short new password = %d", p.status)
	}
	if p := laptop.post("/settings/password", url.Values{"current_password": {storetest.Password}, "password": {"a-new-password-1"}}); p.status != http.StatusSeeOther {
		t.Fatalf("change = %d %s", p.status, p.body)
	}
	if p := laptop.get("/settings"); p.status != http.StatusOK || !strings.Contains(p.body, "every other session") {
		t.Fatalf("the changing browser lost its session: %d", p.status)
	}
	if p := phone.get("/settings"); p.status != http.StatusSeeOther {
		t.Fatalf("the other browser still has a session: %d", p.status)
	}
	if _, err := e.db.Authenticate(context.Background(), "a@example.com", storetest.Password); err == nil {
		t.Fatal("the old password still works")
	}
	// The API does the same with a token.
	_, tok, _ := e.db.CreateAPIToken(context.Background(), mustUser(t, e.db, "a@example.com").ID, "t")
	if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/password", tok, `{"current_password":"a-new-password-1","password":"a-new-password-2"}`); st != http.StatusOK {
		t.Fatalf("API change = %d %s", st, body)
	}
	if p := laptop.get("/settings"); p.status != http.StatusSeeOther {
		t.Fatalf("a change through the API left the browser session: %d", p.status)
	}
}

func mustUser(t *testing.T, db *store.DB, email string) *gpuportal.User {
	t.Helper()
	u, err := db.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var resetLinkRE = regexp.MustCompile(`https?://[^"<\s]+/password-reset/(gpr_[A-Za-z0-9_-]+)`)

// (item 8) Without email an admin issues a reset link; it works once,
// expires, and logs the account out everywhere.
func TestAdminIssuedPasswordReset(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.with(func(c *Config) { c.PublicURL = "https://portal.example" })
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	storetest.MustCreateUser(t, e.db, "a@example.com", gpuportal.RoleCustomer)
	customer := e.browser()
	customer.login("a@example.com", storetest.Password)

	// Asking by email on a portal without email says to ask an admin.
	anon := e.browser()
	anon.get("/password-reset")
	if p := anon.post("/password-reset", url.Values{"email": {"a@example.com"}}); p.status != http.StatusConflict || !strings.Contains(p.body, "administrator") {
		t.Fatalf("reset request without email = %d", p.status)
	}

	admin := e.browser()
	admin.login("admin@example.com", storetest.Password)
	admin.get("/admin")
	p := admin.post("/admin/password-reset", url.Values{"email": {"a@example.com"}})
	m := resetLinkRE.FindStringSubmatch(p.body)
	if p.status != http.StatusCreated || m == nil || !strings.HasPrefix(m[0], "https://portal.example/") {
		t.Fatalf("issue link = %d, link %v", p.status, m)
	}
	if p := admin.post("/admin/password-reset", url.Values{"email": {"nobody@example.com"}}); p.status != http.StatusNotFound {
		t.Fatalf("link for an unknown email = %d", p.status)
	}
	if _, body := e.apiCall(http.MethodGet, "/api/v1/admin/audit", adminToken(t, e), ""); !strings.Contains(body, "user.password_reset_link") {
		t.Fatal("the issued link is not audited")
	}

	b := e.browser()
	if p := b.get("/password-reset/" + m[1]); p.status != http.StatusOK || !strings.Contains(p.body, "a@example.com") {
		t.Fatalf("reset page = %d", p.status)
	}
	if p := b.post("/password-reset/"+m[1], url.Values{"password": {"short"}}); p.status != http.StatusBadRequest {
		t.Fatalf("short password = %d", p.status)
	}
	if p := b.post("/password-reset/"+m[1], url.Values{"password": {"reset-password-1"}}); p.status != http.StatusSeeOther {
		t.Fatalf("reset = %d %s", p.status, p.body)
	}
	if p := b.get("/settings"); p.status != http.StatusOK {
		t.Fatalf("not logged in after the reset: %d", p.status)
	}
	if p := customer.get("/settings"); p.status != http.StatusSeeOther {
		t.Fatalf("the old session survived the reset: %d", p.status)
	}
	if p := e.browser().get("/password-reset/" + m[1]); p.status != http.StatusGone {
		t.Fatalf("a used link = %d", p.status)
	}

	// Links expire (in real time).
	_, body := e.apiCall(http.MethodPost, fmt.Sprintf("/api/v1/admin/users/%d/password-reset", mustUser(t, e.db, "a@example.com").ID), adminToken(t, e), "")
	m = resetLinkRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("API link: %s", body)
	}
	e.wall.Advance(store.PasswordResetTTL + time.Second)
	if st, _ := e.apiCall(http.MethodPost, "/api/v1/auth/password-reset/"+m[1], "", `{"password":"reset-password-2"}`); st != http.StatusGone {
		t.Fatalf("an expired link = %d", st)
	}
	// Customers cannot issue links.
	_, custTok, _ := e.db.CreateAPIToken(context.Background(), mustUser(t, e.db, "a@example.com").ID, "t")
	if st, _ := e.apiCall(http.MethodPost, fmt.Sprintf("/api/v1/admin/users/%d/password-reset", mustUser(t, e.db, "admin@example.com").ID), custTok, ""); st != http.StatusForbidden {
		t.Fatalf("a customer issuing a link = %d", st)
	}
}

func adminToken(t *testing.T, e *testEnv) string {
	t.Helper()
	_, tok, err := e.db.CreateAPIToken(context.Background(), mustUser(t, e.db, "admin@example.com").ID, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// (item 9) Enrollment tokens expire; a node cannot claim another online
// node's GPUs; admins rotate and revoke node tokens.
func TestNodeTokens(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	enrol := func() string {
		_, body := e.apiCall("POST", "/api/v1/admin/enrollment-tokens", admin, `{"region":"cd-1"}`)
		return decodeObject(t, body)["token"].(string)
	}
	reg := `{"enroll_token":"%s","hostname":"%s","region":"cd-1","heartbeat_seconds":10,"gpus":[{"uuid":"GPU-X","index":0,"name":"NVIDIA H100 80GB HBM3","memory_total_mib":81920}]}`

	old := enrol()
	e.wall.Advance(store.DefaultEnrollmentTokenTTL + time.Minute)
	if st, body := e.apiCall("POST", "/api/v1/agent/register", "", fmt.Sprintf(reg, old, "h1")); st != http.StatusUnauthorized || !strings.Contains(body, "expired") {
		t.Fatalf("an expired enrollment token = %d %s", st, body)
	}
	st, body := e.apiCall("POST", "/api/v1/agent/register", "", fmt.Sprintf(reg, enrol(), "h1"))
	if st != http.StatusCreated {
		t.Fatalf("register = %d %s", st, body)
	}
	node := decodeObject(t, body)
	nodeID, tok1 := node["node_id"].(string), node["node_token"].(string)

	// A second machine reporting the same GPU while h1 is online is refused,
	// and its enrollment token stays unused.
	thief := enrol()
	if st, body := e.apiCall("POST", "/api/v1/agent/register", "", fmt.Sprintf(reg, thief, "h2")); st != http.StatusConflict || !strings.Contains(body, "GPU-X") {
		t.Fatalf("claiming an online node's GPU = %d %s", st, body)
	}
	nodes, _ := e.db.Nodes(context.Background())
	if len(nodes) != 1 || len(nodes[0].GPUs) != 1 || nodes[0].ID != nodeID {
		t.Fatalf("nodes after the refused claim: %+v", nodes)
	}

	heartbeat := func(tok string) (int, map[string]any) {
		st, body := e.apiCall("POST", "/api/v1/agent/heartbeat", tok, `{"revision":0,"heartbeat_seconds":10,"gpus":[{"uuid":"GPU-X","healthy":true}],"workloads":[]}`)
		return st, decodeObject(t, body)
	}
	if st, d := heartbeat(tok1); st != 200 || d["rotate_token"] != nil {
		t.Fatalf("heartbeat before rotation = %d %v", st, d)
	}
	if st, _ := e.apiCall("POST", "/api/v1/agent/rotate-token", tok1, `{}`); st != http.StatusConflict {
		t.Fatalf("a rotation nobody asked for = %d", st)
	}
	if st, body := e.apiCall("POST", "/api/v1/admin/nodes/"+nodeID+"/rotate-token", admin, ""); st != 200 || !strings.Contains(body, "rotating") {
		t.Fatalf("rotate = %d %s", st, body)
	}
	if _, d := heartbeat(tok1); d["rotate_token"] != true {
		t.Fatalf("the heartbeat does not ask for the rotation: %v", d)
	}
	_, body = e.apiCall("POST", "/api/v1/agent/rotate-token", tok1, `{}`)
	tok2 := decodeObject(t, body)["node_token"].(string)
	if tok2 == "" || tok2 == tok1 {
		t.Fatalf("new token %q", tok2)
	}
	if st, _ := heartbeat(tok1); st != 200 {
		t.Fatalf("the old token stopped before the new one was used: %d", st)
	}
	if st, d := heartbeat(tok2); st != 200 || d["rotate_token"] != nil {
		t.Fatalf("heartbeat with the new token = %d %v", st, d)
	}
	if st, _ := heartbeat(tok1); st != http.StatusUnauthorized {
		t.Fatalf("the old token works after the new one was used: %d", st)
	}

	if st, _ := e.apiCall("POST", "/api/v1/admin/nodes/"+nodeID+"/revoke-token", admin, ""); st != 200 {
		t.Fatalf("revoke = %d", st)
	}
	if st, _ := heartbeat(tok2); st != http.StatusUnauthorized {
		t.Fatalf("a revoked token = %d", st)
	}
	nodes, _ = e.db.Nodes(context.Background())
	if nodes[0].TokenState != gpuportal.NodeTokenRevoked {
		t.Fatalf("token state = %q", nodes[0].TokenState)
	}
	if st, _ := e.apiCall("POST", "/api/v1/admin/nodes/"+nodeID+"/rotate-token", admin, ""); st != http.StatusConflict {
		t.Fatalf("rotating a revoked token = %d", st)
	}
	_, cust := e.apiToken("c@example.com", gpuportal.RoleCustomer)
	if st, _ := e.apiCall("POST", "/api/v1/admin/nodes/"+nodeID+"/rotate-token", cust, ""); st != http.StatusForbidden {
		t.Fatalf("a customer rotating = %d", st)
	}
	if _, body := e.apiCall(http.MethodGet, "/api/v1/admin/audit", admin, ""); !strings.Contains(body, "node.rotate_token") || !strings.Contains(body, "node.revoke_token") {
		t.Fatal("token changes are not audited")
	}
}

// (item 12) The download's UID comes from the public address, whatever
// Host the request names, and every line ends in CRLF.
func TestICSStableUIDAndCRLF(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.with(func(c *Config) { c.PublicURL = "https://gpus.example.com" })
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 1, at(1, 10), at(1, 14)))
	r := decodeReservation(t, body)
	for _, host := range []string{"", "evil.example", "other.example:8080"} {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/reservations/%d/ics", e.srv.URL, r.ID), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cal := string(raw)
		if want := fmt.Sprintf("UID:reservation-%d@gpus.example.com\r\n", r.ID); !strings.Contains(cal, want) {
			t.Errorf("Host %q: the calendar lacks %q:\n%s", host, want, cal)
		}
		if strings.Count(cal, "\n") != strings.Count(cal, "\r\n") {
			t.Errorf("Host %q: bare LF line ends", host)
		}
		if ct := resp.Header.Get("Content-Type"); ct != ics.ContentType {
			t.Errorf("Content-Type %q", ct)
		}
	}
}

// (issue 13) An instance whose agent could not see its GPUs free leaves
// them out of service — no next tenant shares a GPU with its leftovers —
// until the node reports them idle.
func TestGPUsLeftBusyStayOutOfService(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, body := e.apiCall("POST", "/api/v1/admin/enrollment-tokens", admin, `{"region":"cd-1"}`)
	enroll := decodeObject(t, body)["token"].(string)
	st, body := e.apiCall("POST", "/api/v1/agent/register", "", fmt.Sprintf(`{"enroll_token":%q,"hostname":"h1","region":"cd-1","heartbeat_seconds":10,"gpus":[{"uuid":"GPU-B","index":0,"name":"NVIDIA H100 80GB HBM3","memory_total_mib":81920}]}`, enroll))
	if st != http.StatusCreated {
		t.Fatalf("register = %d %s", st, body)
	}
	nodeID := decodeObject(t, body)["node_id"]
	node := decodeObject(t, body)["node_token"].(string)
	heartbeat := func(memUsed int, workloads string) {
		t.Helper()
		if st, body := e.apiCall("POST", "/api/v1/agent/heartbeat", node, fmt.Sprintf(`{"revision":0,"heartbeat_seconds":10,"gpus":[{"uuid":"GPU-B","healthy":true,"memory_used_mib":%d}],"workloads":%s}`, memUsed, workloads)); st != 200 {
			t.Fatalf("heartbeat = %d %s", st, body)
		}
	}
	st, body = e.apiCall("POST", "/api/v1/instances", alice, `{"kind":"on_demand","model":"h100-80g","region":"cd-1","count":1,"command":"train"}`)
	if st != http.StatusCreated {
		t.Fatalf("launch = %d %s", st, body)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	if _, err := e.db.Tick(context.Background(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	started := e.wall.Now().Format(time.RFC3339)
	heartbeat(30000, fmt.Sprintf(`[{"instance_id":%d,"attempt":1,"state":"running","started_at":%q}]`, id, started))
	// It ends, but something of it is still on the GPU.
	if st, body := e.apiCall("POST", "/api/v1/agent/events", node, fmt.Sprintf(`{"workloads":[{"instance_id":%d,"attempt":1,"state":"exited","started_at":%q,"exit_code":0,"gpus_free":false}]}`, id, started)); st != 200 {
		t.Fatalf("events = %d %s", st, body)
	}
	gpu := func() gpuportal.GPU {
		nodes, _ := e.db.Nodes(context.Background())
		return nodes[0].GPUs[0]
	}
	if g := gpu(); g.Healthy || g.BusyAfterInstance == nil || *g.BusyAfterInstance != id {
		t.Fatalf("GPU after an unclean end = %+v", g)
	}
	// Nobody gets it: a new launch cannot be placed, the calendar shows no capacity.
	slots, _ := e.db.Availability(context.Background(), "h100-80g", "cd-1", day0.AddDate(0, 0, 1), day0.AddDate(0, 0, 1).Add(time.Hour))
	if len(slots) != 1 || slots[0].Capacity != 0 {
		t.Fatalf("capacity with the busy GPU = %+v", slots)
	}
	heartbeat(30000, `[]`) // the node still sees memory in use
	if g := gpu(); g.Healthy {
		t.Fatal("a heartbeat made the busy GPU healthy again")
	}
	b := e.browser()
	storetest.MustCreateUser(t, e.db, "ops@example.com", gpuportal.RoleAdmin)
	b.login("ops@example.com", storetest.Password)
	if p := b.get(fmt.Sprintf("/admin/nodes/%v", nodeID)); !strings.Contains(p.body, `data-testid="gpu-busy"`) || !strings.Contains(p.body, fmt.Sprintf("#%d", id)) {
		t.Fatal("the node's page does not show the busy GPU")
	}
	heartbeat(0, `[]`) // idle now
	if g := gpu(); !g.Healthy || g.BusyAfterInstance != nil {
		t.Fatalf("GPU once idle = %+v", g)
	}
}

// Restarting a portal with PORTAL_ADMIN_EMAIL (EnsureAdmin with the same
// password) keeps the admin's sessions; a new password ends them.
func TestEnsureAdminKeepsSessionsUnlessThePasswordChanges(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	ctx := context.Background()
	if _, err := e.db.EnsureAdmin(ctx, "ops@example.com", "ops-password-1", "", false); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login("ops@example.com", "ops-password-1")
	if _, err := e.db.EnsureAdmin(ctx, "ops@example.com", "ops-password-1", "", false); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/admin"); p.status != http.StatusOK {
		t.Fatalf("a restart with the same admin password ended the session: %d", p.status)
	}
	if _, err := e.db.EnsureAdmin(ctx, "ops@example.com", "ops-password-2", "", false); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/admin"); p.status != http.StatusSeeOther {
		t.Fatalf("a new admin password left the session: %d", p.status)
	}
}

// (issue 22, items 12 and 13) The current-password check of a password
// change is limited like a login: after five wrong guesses even the right
// one is refused for a while. A reset request without email answers the
// same for an account that exists and one that does not.
func TestPasswordChangeGuessesLimitedAndResetsDoNotEnumerate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	u := storetest.MustCreateUser(t, e.db, "a@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	for k := range loginFailsPerUser {
		if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/password", tok, `{"current_password":"wrong-guess-`+fmt.Sprint(k)+`","password":"a-new-password-1"}`); st != http.StatusBadRequest {
			t.Fatalf("guess %d = %d %s", k, st, body)
		}
	}
	if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/password", tok, `{"current_password":"`+storetest.Password+`","password":"a-new-password-1"}`); st != http.StatusTooManyRequests {
		t.Fatalf("the right password after %d wrong guesses = %d %s", loginFailsPerUser, st, body)
	}
	e.wall.Set(e.wall.Now().Add(loginWindow + time.Minute))
	if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/password", tok, `{"current_password":"`+storetest.Password+`","password":"a-new-password-1"}`); st != http.StatusOK {
		t.Fatalf("the right password once the window passed = %d %s", st, body)
	}

	known, _ := e.apiCall(http.MethodPost, "/api/v1/auth/password-reset", "", `{"email":"a@example.com"}`)
	unknown, _ := e.apiCall(http.MethodPost, "/api/v1/auth/password-reset", "", `{"email":"nobody@example.com"}`)
	if known != unknown {
		t.Fatalf("reset without email: %d for an account, %d for none", known, unknown)
	}
}

// (issue 22, item 11) API tokens do not outlive a lost password: a reset
// ends every token (audited, the owner told), a change ends them when
// asked, and the settings page creates a token only with the password.
func TestTokensEndWithAResetAndNeedThePassword(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	u := storetest.MustCreateUser(t, e.db, "a@example.com", gpuportal.RoleCustomer)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	b := e.browser()
	b.login("a@example.com", storetest.Password)
	b.get("/settings")
	if p := b.post("/settings/tokens", url.Values{"name": {"laptop"}}); p.status != http.StatusBadRequest || strings.Contains(p.body, `data-testid="new-token-secret"`) {
		t.Fatalf("token without the password = %d", p.status)
	}
	if p := b.post("/settings/tokens", url.Values{"name": {"laptop"}, "password": {"not-my-password"}}); p.status != http.StatusBadRequest || strings.Contains(p.body, `data-testid="new-token-secret"`) {
		t.Fatalf("token with a wrong password = %d", p.status)
	}
	p := b.post("/settings/tokens", url.Values{"name": {"laptop"}, "password": {storetest.Password}})
	if p.status != http.StatusCreated || !strings.Contains(p.body, `data-testid="new-token-secret"`) {
		t.Fatalf("token with the password = %d", p.status)
	}
	tok := e.tokenFor(u)

	// A change keeps tokens unless asked; asked, they end.
	if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/password", tok, `{"current_password":"`+storetest.Password+`","password":"a-new-password-1"}`); st != http.StatusOK {
		t.Fatalf("change = %d %s", st, body)
	}
	if st, _ := e.apiCall(http.MethodGet, "/api/v1/me", tok, ""); st != http.StatusOK {
		t.Fatalf("a token after a plain change = %d", st)
	}
	if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/password", tok, `{"current_password":"a-new-password-1","password":"a-new-password-2","revoke_api_tokens":true}`); st != http.StatusOK {
		t.Fatalf("change with revoke = %d %s", st, body)
	}
	if st, _ := e.apiCall(http.MethodGet, "/api/v1/me", tok, ""); st != http.StatusUnauthorized {
		t.Fatalf("a token after a change that revoked them = %d", st)
	}

	// A reset ends every token, is audited and told.
	tok = e.tokenFor(u)
	_, body := e.apiCall(http.MethodPost, fmt.Sprintf("/api/v1/admin/users/%d/password-reset", u.ID), adminToken(t, e), "")
	m := regexp.MustCompile(`/password-reset/(gpr_[A-Za-z0-9_-]+)`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no reset link in %s", body)
	}
	if st, body := e.apiCall(http.MethodPost, "/api/v1/auth/password-reset/"+m[1], "", `{"password":"reset-password-1"}`); st != http.StatusOK {
		t.Fatalf("reset = %d %s", st, body)
	}
	if st, _ := e.apiCall(http.MethodGet, "/api/v1/me", tok, ""); st != http.StatusUnauthorized {
		t.Fatalf("a token after a reset = %d", st)
	}
	if _, body := e.apiCall(http.MethodGet, "/api/v1/admin/audit", adminToken(t, e), ""); !strings.Contains(body, "account.api_tokens_revoked") {
		t.Fatalf("the revocation is not audited: %s", body)
	}
	notes, _ := e.db.InApp(context.Background(), u.ID, 10)
	told := 0
	for _, n := range notes {
		if n.Kind == gpuportal.NoteTokensRevoked {
			told++
		}
	}
	if told != 2 {
		t.Fatalf("told of %d revocations, want 2", told)
	}
}
