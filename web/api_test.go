package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

func TestAPISignupAndTokens(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	status, body := e.apiCall(http.MethodPost, "/api/v1/auth/signup", "", `{"email":"dev@example.com","password":"a-good-password","name":"Dev","phone":"+8613800138000"}`)
	if status != http.StatusCreated || !strings.Contains(body, `"email":"dev@example.com"`) || strings.Contains(body, "password") {
		t.Fatalf("signup = %d %s", status, body)
	}
	status, body = e.apiCall(http.MethodPost, "/api/v1/auth/tokens", "", `{"email":"dev@example.com","password":"a-good-password","name":"laptop"}`)
	if status != http.StatusCreated {
		t.Fatalf("token = %d %s", status, body)
	}
	var tok struct {
		Token string `json:"token"`
		Info  struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(body), &tok); err != nil || !strings.HasPrefix(tok.Token, "gpp_") || tok.Info.Name != "laptop" {
		t.Fatalf("token body %s: %v", body, err)
	}

	if status, body := e.apiCall(http.MethodGet, "/api/v1/me", tok.Token, ""); status != 200 || !strings.Contains(body, "dev@example.com") {
		t.Fatalf("me with token = %d %s", status, body)
	}
	// The list shows the token by name, never its secret.
	status, body = e.apiCall(http.MethodGet, "/api/v1/auth/tokens", tok.Token, "")
	if status != 200 || !strings.Contains(body, `"name":"laptop"`) || strings.Contains(body, tok.Token) {
		t.Fatalf("list = %d %s", status, body)
	}
	// (issue 22, item 11) A token cannot mint more tokens on its own: a
	// second one needs the account's password, even from a signed-in
	// script.
	status, body = e.apiCall(http.MethodPost, "/api/v1/auth/tokens", tok.Token, `{"name":"ci"}`)
	if status != http.StatusBadRequest || !strings.Contains(body, `"field":"password"`) {
		t.Fatalf("second token by name alone = %d %s", status, body)
	}
	if status, body = e.apiCall(http.MethodPost, "/api/v1/auth/tokens", tok.Token, `{"name":"ci","password":"wrong-password-1"}`); status != http.StatusUnauthorized {
		t.Fatalf("second token with a wrong password = %d %s", status, body)
	}
	status, body = e.apiCall(http.MethodPost, "/api/v1/auth/tokens", tok.Token, `{"name":"ci","password":"a-good-password"}`)
	if status != http.StatusCreated {
		t.Fatalf("second token = %d %s", status, body)
	}

	// Revoke: afterwards the token is 401 everywhere, public routes included.
	if status, body := e.apiCall(http.MethodDelete, "/api/v1/auth/tokens/"+strconv.FormatInt(tok.Info.ID, 10), tok.Token, ""); status != http.StatusNoContent {
		t.Fatalf("revoke = %d %s", status, body)
	}
	for _, path := range []string{"/api/v1/me", "/api/v1/models", "/api/v1/regions"} {
		status, body := e.apiCall(http.MethodGet, path, tok.Token, "")
		if status != http.StatusUnauthorized || errorCode(t, body) != gpuportal.EUNAUTHORIZED {
			t.Errorf("GET %s with revoked token = %d %s", path, status, body)
		}
	}
	if status, _ := e.apiCall(http.MethodGet, "/api/v1/models", "gpp_made-up", ""); status != http.StatusUnauthorized {
		t.Errorf("made-up token = %d", status)
	}
	if status, _ := e.apiCall(http.MethodGet, "/api/v1/models", "", ""); status != http.StatusOK {
		t.Errorf("public route without token = %d", status)
	}
	// A malformed Authorization header is 401, not ignored.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/models", nil)
	req.Header.Set("Authorization", "Basic Zm9vOmJhcg==")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("Basic auth header = %v, %v", resp.StatusCode, err)
	}
}

func TestTokensArePrivate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, aliceTok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bobTok := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	_, body := e.apiCall(http.MethodGet, "/api/v1/auth/tokens", aliceTok, "")
	var list []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 {
		t.Fatalf("alice's list = %s", body)
	}
	// Bob sees only his own, and cannot revoke Alice's.
	_, body = e.apiCall(http.MethodGet, "/api/v1/auth/tokens", bobTok, "")
	var bobs []struct {
		ID int64 `json:"id"`
	}
	_ = json.Unmarshal([]byte(body), &bobs)
	if len(bobs) != 1 || bobs[0].ID == list[0].ID {
		t.Fatalf("bob's list = %s", body)
	}
	status, body := e.apiCall(http.MethodDelete, "/api/v1/auth/tokens/"+strconv.FormatInt(list[0].ID, 10), bobTok, "")
	if status != http.StatusNotFound || errorCode(t, body) != gpuportal.ENOTFOUND {
		t.Fatalf("bob revoking alice's token = %d %s", status, body)
	}
	if status, _ := e.apiCall(http.MethodGet, "/api/v1/me", aliceTok, ""); status != 200 {
		t.Fatalf("alice's token stopped working: %d", status)
	}
	// Bob's settings page does not show Alice's tokens.
	b := e.browser()
	b.login("bob@example.com", storetest.Password)
	if p := b.get("/settings"); strings.Count(p.body, `data-testid="token-row"`) != 1 {
		t.Fatalf("bob's settings show %d tokens", strings.Count(p.body, `data-testid="token-row"`))
	}
}

func TestCustomerCannotReachAdmin(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, tok := e.apiToken("c@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("c@example.com", storetest.Password)
	if p := b.get("/admin"); p.status != http.StatusForbidden || !strings.Contains(p.body, `data-testid="error-page"`) {
		t.Fatalf("customer GET /admin = %d", p.status)
	}
	if p := b.post("/admin/models/a100-80g/price", url.Values{"price": {"1"}}); p.status != http.StatusForbidden {
		t.Fatalf("customer POST price = %d", p.status)
	}
	status, body := e.apiCall(http.MethodPut, "/api/v1/admin/models/a100-80g", tok, `{"list_price_per_gpu_hour_fen":1}`)
	if status != http.StatusForbidden || errorCode(t, body) != gpuportal.EFORBIDDEN {
		t.Fatalf("customer PUT price = %d %s", status, body)
	}
	if m, _ := e.db.Model(t.Context(), "a100-80g"); m.ListPrice != 800 {
		t.Fatalf("price changed to %d", m.ListPrice)
	}
	// Anonymous: pages redirect to login, the API says 401.
	if p := e.browser().get("/admin"); p.status != http.StatusSeeOther {
		t.Fatalf("anonymous /admin = %d", p.status)
	}
	if status, _ := e.apiCall(http.MethodPut, "/api/v1/admin/models/a100-80g", "", `{"list_price_per_gpu_hour_fen":1}`); status != http.StatusUnauthorized {
		t.Fatalf("anonymous PUT = %d", status)
	}
}

func TestAdminEditsListPrice(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, tok := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	if p := b.post("/admin/models/a100-80g/price", url.Values{"price": {"9.50"}}); p.status != http.StatusSeeOther {
		t.Fatalf("set price = %d %s", p.status, p.body)
	}
	if p := b.get("/"); !strings.Contains(p.body, "¥9.50") || !strings.Contains(p.body, "¥2.85") {
		t.Fatalf("home page does not show the new price (¥9.50, spot ¥2.85)")
	}
	if p := b.post("/admin/models/a100-80g/price", url.Values{"price": {"-3"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `data-testid="error-a100-80g"`) {
		t.Fatalf("bad price = %d", p.status)
	}
	status, body := e.apiCall(http.MethodPut, "/api/v1/admin/models/h100-80g", tok, `{"list_price_per_gpu_hour_fen":2200}`)
	if status != 200 || !strings.Contains(body, `"list_price_per_gpu_hour_fen":2200`) {
		t.Fatalf("API set price = %d %s", status, body)
	}
	status, body = e.apiCall(http.MethodGet, "/api/v1/models", "", "")
	if status != 200 || !strings.Contains(body, `"spot_price_per_gpu_hour_fen":660`) {
		t.Fatalf("models = %s", body)
	}
}

// Malformed bodies get 400 with a code, never a 500, and change nothing.
func TestMalformedJSON(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, adminTok := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	for _, tt := range []struct {
		method, path, token, body string
		field                     string
	}{
		{"POST", "/api/v1/auth/signup", "", `{"email":`, ""},
		{"POST", "/api/v1/auth/signup", "", ``, ""},
		{"POST", "/api/v1/auth/signup", "", `[]`, ""},
		{"POST", "/api/v1/auth/signup", "", `{"email":42,"password":"a-good-password","name":"x"}`, "email"},
		{"POST", "/api/v1/auth/signup", "", `{"email":"a@example.com","password":"a-good-password","name":"x","admin":true}`, "admin"},
		{"POST", "/api/v1/auth/signup", "", `{"email":"a@example.com","password":"a-good-password","name":"x"} {}`, ""},
		{"POST", "/api/v1/auth/signup", "", `{"email":"a@example.com","password":"short","name":"x"}`, "password"},
		{"POST", "/api/v1/auth/tokens", "", `{"email":"a@example.com","password":["x"]}`, "password"},
		{"PUT", "/api/v1/admin/models/a100-80g", adminTok, `{"list_price_per_gpu_hour_fen":"cheap"}`, "list_price_per_gpu_hour_fen"},
		{"PUT", "/api/v1/admin/models/a100-80g", adminTok, `{"list_price_per_gpu_hour_fen":1.5}`, "list_price_per_gpu_hour_fen"},
		{"PUT", "/api/v1/admin/models/a100-80g", adminTok, `{"list_price_per_gpu_hour_fen":99999999999999999999}`, "list_price_per_gpu_hour_fen"},
		{"PUT", "/api/v1/admin/models/a100-80g", adminTok, `{}`, "list_price_per_gpu_hour_fen"},
		{"PUT", "/api/v1/admin/models/a100-80g", adminTok, `{"list_price_per_gpu_hour_fen":-5}`, "list_price_per_gpu_hour_fen"},
	} {
		status, body := e.apiCall(tt.method, tt.path, tt.token, tt.body)
		if status != http.StatusBadRequest || errorCode(t, body) != gpuportal.EINVALID {
			t.Errorf("%s %s %q = %d %s; want 400 invalid_input", tt.method, tt.path, tt.body, status, body)
			continue
		}
		if tt.field != "" && !strings.Contains(body, `"field":"`+tt.field+`"`) {
			t.Errorf("%s %q: body %s does not name field %q", tt.path, tt.body, body, tt.field)
		}
	}
	if _, err := e.db.UserByEmail(t.Context(), "a@example.com"); err == nil {
		t.Error("a malformed sign-up created a user")
	}
	if m, _ := e.db.Model(t.Context(), "a100-80g"); m.ListPrice != 800 {
		t.Errorf("price changed to %d", m.ListPrice)
	}
	// Unknown API routes and bad ids are JSON 404s.
	for _, path := range []string{"/api/v1/nope", "/api/v1/auth/tokens/abc"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "abc") {
			method = http.MethodDelete
		}
		status, body := e.apiCall(method, path, adminTok, "")
		if status != http.StatusNotFound || errorCode(t, body) != gpuportal.ENOTFOUND {
			t.Errorf("%s %s = %d %s", method, path, status, body)
		}
	}
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	if status, body := e.apiCall(http.MethodGet, "/healthz", "", ""); status != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("healthz = %d %s", status, body)
	}
	e.apiCall(http.MethodGet, "/api/v1/models", "", "")
	status, body := e.apiCall(http.MethodGet, "/metrics", "", "")
	if status != 200 || !strings.Contains(body, `gpuportal_http_requests_total{code="200",method="GET",route="/api/v1/models"} 1`) ||
		!strings.Contains(body, `gpuportal_http_request_duration_seconds_bucket{method="GET",route="/api/v1/models"`) {
		t.Fatalf("metrics = %d\n%s", status, body)
	}
}

func TestLanguage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "a@example.com", gpuportal.RoleCustomer)
	// Accept-Language picks the default…
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/", nil)
	req.Header.Set("Accept-Language", "zh-CN,zh;q=0.9,en;q=0.8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if !strings.Contains(body, `lang="zh-CN"`) || !strings.Contains(body, "登录") {
		t.Fatalf("zh Accept-Language did not give Chinese")
	}
	// …the switch changes it, and a logged-in user's choice is remembered
	// across sessions.
	b := e.browser()
	b.login("a@example.com", storetest.Password)
	if p := b.post("/lang", url.Values{"lang": {"zh-CN"}, "next": {"/settings"}}); p.status != http.StatusSeeOther || p.location != "/settings" {
		t.Fatalf("switch = %d → %q", p.status, p.location)
	}
	if p := b.get("/settings"); !strings.Contains(p.body, "设置") {
		t.Fatalf("settings not in Chinese after switch")
	}
	b2 := e.browser()
	b2.login("a@example.com", storetest.Password)
	if p := b2.get("/"); !strings.Contains(p.body, `lang="zh-CN"`) {
		t.Fatalf("language not remembered for the user")
	}
	if p := b.post("/lang", url.Values{"lang": {"klingon"}}); p.status != http.StatusBadRequest {
		t.Fatalf("unknown language = %d", p.status)
	}
	// An off-site next= is ignored.
	if p := b.post("/lang", url.Values{"lang": {"en"}, "next": {"//evil.example/"}}); p.location != "/" {
		t.Fatalf("open redirect to %q", p.location)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return sb.String()
}

// Request bodies are read as the OpenAPI document's JSON Schema types
// them: a whole number written 900.0 or 9e2 is an integer, and null is no
// value of a boolean, string, number or object field (Go alone would
// accept the first never and ignore the second silently).
func TestJSONBodiesReadAsJSONSchema(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, adminTok := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	alice, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	storetest.AddFleet(t, e.db, "n", "cd-1", "a100-80g", 1, 8)
	// In order: the last price set is the one the refusals below must keep.
	for _, tt := range []struct {
		body string
		want gpuportal.Fen
	}{
		{`{"list_price_per_gpu_hour_fen":900.0}`, 900},
		{`{"list_price_per_gpu_hour_fen":9.5e2}`, 950},
		{`{"list_price_per_gpu_hour_fen":1E3}`, 1000},
	} {
		status, resp := e.apiCall("PUT", "/api/v1/admin/models/a100-80g", adminTok, tt.body)
		if m, _ := e.db.Model(t.Context(), "a100-80g"); status != http.StatusOK || m.ListPrice != tt.want {
			t.Errorf("PUT %s = %d %s, price %d; want 200 and %d", tt.body, status, resp, m.ListPrice, tt.want)
		}
	}
	for _, tt := range []struct{ path, token, body, field string }{
		{"/api/v1/admin/models/a100-80g", adminTok, `{"list_price_per_gpu_hour_fen":null}`, "list_price_per_gpu_hour_fen"},
		{"/api/v1/admin/models/a100-80g", adminTok, `{"list_price_per_gpu_hour_fen":1e-400}`, "list_price_per_gpu_hour_fen"},
		{"/api/v1/admin/models/a100-80g", adminTok, `{"list_price_per_gpu_hour_fen":1e999999999}`, "list_price_per_gpu_hour_fen"},
		{"/api/v1/admin/models/a100-80g", adminTok, `null`, ""},
		{"/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","count":1.0,"command":"true","auto_restart":null}`, "auto_restart"},
		{"/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","count":1,"command":"true","image":null}`, "image"},
		{"/api/v1/instances", tok, `{"kind":"reserved","count":1,"command":"true","reservation_id":null}`, "reservation_id"},
		{"/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","count":1.25,"command":"true"}`, "count"},
		{"/api/v1/topups", tok, `{"amount_fen":10000}`, "provider"},
		{"/api/v1/topups", tok, `{"amount_fen":10000,"provider":null}`, "provider"},
	} {
		method := "POST"
		if strings.Contains(tt.path, "/admin/models/") {
			method = "PUT"
		}
		status, body := e.apiCall(method, tt.path, tt.token, tt.body)
		if status != http.StatusBadRequest || errorCode(t, body) != gpuportal.EINVALID || !strings.Contains(body, `"field":"`+tt.field+`"`) == (tt.field != "") {
			t.Errorf("%s %s = %d %s; want 400 naming %q", tt.path, tt.body, status, body, tt.field)
		}
	}
	if m, _ := e.db.Model(t.Context(), "a100-80g"); m.ListPrice != 1000 {
		t.Errorf("a refused body changed the price to %d", m.ListPrice)
	}
	if list, _ := e.db.Instances(t.Context(), alice, 100); len(list) != 0 {
		t.Errorf("a refused body launched %d instances", len(list))
	}
	// The top-up refused for want of a provider says which one to name.
	if _, body := e.apiCall("POST", "/api/v1/topups", tok, `{"amount_fen":10000}`); !strings.Contains(body, `\"test\"`) {
		t.Errorf("no provider: %s does not say which to name", body)
	}
	// And a whole-number count is a launch like any other.
	status, body := e.apiCall("POST", "/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1.0,"command":"true"}`)
	if status != http.StatusCreated || decodeObject(t, body)["count"] != 1.0 {
		t.Errorf("count 1.0 = %d %s; want 201 with one GPU", status, body)
	}
}

func TestIntegralNumbers(t *testing.T) {
	for in, want := range map[string]string{
		"1": "1", "1.0": "1", "-2.000": "-2", "2.5e1": "25", "1E3": "1000", "1e+2": "100",
		"1.5": "1.5", "1e-1": "1e-1", "1e401": "1e401", "1e-999999": "1e-999999", "0.0": "0",
	} {
		if got := integral(json.Number(in)); string(got) != want {
			t.Errorf("integral(%s) = %s; want %s", in, got, want)
		}
	}
}
