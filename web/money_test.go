package web

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// postWebhook sends a provider's webhook with a signature.
func (e *testEnv) postWebhook(provider, body, signature string) (int, string) {
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/payments/"+provider+"/webhook", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if signature != "" {
		req.Header.Set("X-Signature", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

// A top-up through the API and the provider's webhook: only a body signed
// with the portal's secret credits, and only once; the balance says so.
func TestTopUpAndWebhook(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	for _, bad := range []string{`{"amount_fen":50}`, `{"amount_fen":1000,"provider":"paypal"}`, `{"amount_fen":"100"}`} {
		if st, body := e.apiCall("POST", "/api/v1/topups", tok, bad); st != 400 {
			t.Errorf("top-up %s = %d %s", bad, st, body)
		}
	}
	st, body := e.apiCall("POST", "/api/v1/topups", tok, `{"amount_fen":25000,"provider":"test"}`)
	top := decodeObject(t, body)
	if st != 201 || top["status"] != "pending" || !strings.HasPrefix(top["pay_url"].(string), e.srv.URL+"/pay/test/") {
		t.Fatalf("top-up = %d %s", st, body)
	}
	event := fmt.Sprintf(`{"payment_id":"p-1","topup_id":%d,"amount_fen":25000,"status":"paid"}`, int64(top["id"].(float64)))
	// Forged: no signature, the wrong one, the right one of another body.
	for _, sig := range []string{"", "sha256=00", testProvider{"another-secret-0123456789abcdefghij"}.sign([]byte(event)), testProvider{testPaymentSecret}.sign([]byte(event + " "))} {
		if st, body := e.postWebhook("test", event, sig); st != http.StatusUnauthorized {
			t.Errorf("forged webhook (%q) = %d %s", sig, st, body)
		}
	}
	if _, body := e.apiCall("GET", "/api/v1/balance", tok, ""); !strings.Contains(body, `"balance_fen":0`) {
		t.Fatalf("a forged webhook credited: %s", body)
	}
	for k := range 2 {
		st, body := e.postWebhook("test", event, testProvider{testPaymentSecret}.sign([]byte(event)))
		if st != 200 || strings.Contains(body, "true") != (k == 0) {
			t.Fatalf("delivery %d = %d %s", k+1, st, body)
		}
	}
	if st, _ := e.postWebhook("stripe", event, testProvider{testPaymentSecret}.sign([]byte(event))); st != 404 {
		t.Errorf("unknown provider = %d", st)
	}
	_, body = e.apiCall("GET", "/api/v1/balance", tok, "")
	b := decodeObject(t, body)
	if b["balance_fen"] != 25000.0 || b["available_fen"] != 25000.0 || b["runs_out_at"] != nil {
		t.Fatalf("balance = %s", body)
	}
	if _, body := e.apiCall("GET", "/api/v1/topups", tok, ""); !strings.Contains(body, `"status":"paid"`) || !strings.Contains(body, `"payment_id":"p-1"`) {
		t.Fatalf("top-ups = %s", body)
	}
}

// A booking beyond the balance is 402 with what is missing; the quote
// page offers a top-up.
func TestBookingNeedsTheMoney(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	st, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 1, at(1, 10), at(1, 14)))
	if st != http.StatusPaymentRequired || errorCode(t, body) != gpuportal.EFUNDS || !strings.Contains(body, "top up ¥32.00") {
		t.Fatalf("book with no money = %d %s", st, body)
	}
	if _, body := e.apiCall("GET", "/api/v1/reservations", tok, ""); body != "[]\n" {
		t.Fatalf("booked anyway: %s", body)
	}
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	p := b.post("/reservations", url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "count": {"1"}, "start": {"2026-12-01T10:00"}, "end": {"2026-12-01T14:00"}})
	if p.status != http.StatusPaymentRequired || !strings.Contains(p.body, `data-testid="topup-link"`) || !strings.Contains(p.body, "top up ¥32.00 to book this") {
		t.Fatalf("booking form with no money = %d\n%s", p.status, p.body)
	}
}

// The statement of a month downloads as CSV with a BOM, its lines in the
// reader's language.
func TestStatementCSV(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if p := b.post("/reservations", url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "count": {"2"}, "start": {"2026-12-01T10:00"}, "end": {"2026-12-01T14:00"}}); p.status != http.StatusSeeOther {
		t.Fatalf("book = %d", p.status)
	}
	p := b.get("/ledger.csv?month=2026-11")
	if p.status != 200 || !strings.HasPrefix(p.body, "\ufeffDate,Kind,Description,Amount (¥),Reference\r\n") ||
		!strings.Contains(p.body, "Reservation,\"Reservation #1, 2 × NVIDIA A100 80GB\",-64.00,reservation/1") ||
		!strings.Contains(p.body, "Credit,Credit: test balance,10000000.00,") {
		t.Fatalf("statement = %d\n%q", p.status, p.body)
	}
	b.post("/lang", url.Values{"lang": {"zh-CN"}, "next": {"/ledger"}})
	if p := b.get("/ledger.csv?month=2026-11&kind=reservation"); !strings.Contains(p.body, "预订 #1") || strings.Contains(p.body, "test balance") {
		t.Fatalf("Chinese statement:\n%s", p.body)
	}
	if p := b.get("/ledger.csv?month=26-11"); p.status != 400 {
		t.Fatalf("bad month = %d", p.status)
	}
	if p := b.get("/ledger?month=2026-11&kind=refund"); !strings.Contains(p.body, `data-testid="no-entries"`) {
		t.Fatalf("refund filter:\n%s", p.body)
	}
}

// The signed-in home page is a dashboard: money and when it runs out,
// what runs with its cost so far, what is booked, this month's spend.
func TestDashboard(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	if st, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 2, at(1, 10), at(1, 14))); st != 201 {
		t.Fatalf("book = %d %s", st, body)
	}
	if st, body := e.apiCall("POST", "/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1,"command":"train"}`); st != 201 {
		t.Fatalf("launch = %d %s", st, body)
	}
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	p := b.get("/")
	for _, want := range []string{`data-testid="dashboard-balance"`, `data-testid="dashboard-running"`, `data-testid="dashboard-upcoming"`, "Reservations ¥64.00", `data-testid="dashboard-topup"`} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("dashboard lacks %s:\n%s", want, p.body)
		}
	}
}

// (issue 22, item 1) The test provider's confirm button credits money, so
// it exists only where it was asked for (--demo, --test-payments): a
// payment secret alone turns on nothing. Where it runs, a payer confirms
// only their own top-up, and an administrator confirms nobody's.
func TestTestProviderOnlyWhenAskedForAndOnlyForThePayer(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	alice := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	storetest.MustCreatePoorUser(t, e.db, "mallory@example.com", gpuportal.RoleCustomer)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	tok := e.tokenFor(alice)
	st, body := e.apiCall("POST", "/api/v1/topups", tok, `{"amount_fen":100000000,"provider":"test"}`)
	if st != 201 {
		t.Fatalf("top-up = %d %s", st, body)
	}
	payURL := strings.TrimPrefix(decodeObject(t, body)["pay_url"].(string), e.srv.URL)
	balance := func() string {
		_, body := e.apiCall("GET", "/api/v1/balance", tok, "")
		return body
	}
	for _, who := range []string{"mallory@example.com", "admin@example.com"} {
		b := e.browser()
		b.login(who, storetest.Password)
		if p := b.get(payURL); p.status != http.StatusNotFound {
			t.Errorf("%s sees alice's checkout: %d", who, p.status)
		}
		if p := b.post(payURL, nil); p.status != http.StatusNotFound {
			t.Errorf("%s confirms alice's top-up: %d", who, p.status)
		}
	}
	if !strings.Contains(balance(), `"balance_fen":0`) {
		t.Fatalf("someone else paid alice's top-up: %s", balance())
	}

	// The secret is set, test payments are not: no provider, no top-ups,
	// no checkout page — and the webhook the portal used to sign itself
	// credits nothing.
	e.with(func(c *Config) { c.TestPayments = false })
	if st, body := e.apiCall("POST", "/api/v1/topups", tok, `{"amount_fen":100000000,"provider":"test"}`); st != http.StatusConflict {
		t.Errorf("top-up without test payments = %d %s", st, body)
	}
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if p := b.post(payURL, nil); p.status != http.StatusNotFound {
		t.Errorf("confirm without test payments = %d", p.status)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	event := fmt.Sprintf(`{"payment_id":"p-x","topup_id":%d,"amount_fen":100000000,"status":"paid"}`, id)
	if st, _ := e.postWebhook("test", event, testProvider{testPaymentSecret}.sign([]byte(event))); st != http.StatusNotFound {
		t.Errorf("test webhook without test payments = %d", st)
	}
	if p := b.get("/ledger"); strings.Contains(p.body, `data-testid="topup-form"`) {
		t.Errorf("the ledger offers a top-up without a provider")
	}
	if !strings.Contains(balance(), `"balance_fen":0`) {
		t.Fatalf("money appeared: %s", balance())
	}
}

// (issue 28) GET /spend lists each day's spend (charges less refunds,
// never top-ups) with the month's budget; PUT /me/budget sets it, and the
// ledger page draws the days and the budget.
func TestSpendAndBudget(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	if _, err := e.db.Credit(t.Context(), nil, u.ID, gpuportal.CreditRequest{Amount: 1000_00, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	st, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 2, at(1, 10), at(1, 14)))
	if st != http.StatusCreated {
		t.Fatalf("book = %d %s", st, body)
	}
	price := gpuportal.Fen(decodeReservation(t, body).Price)
	for _, bad := range []string{`{"monthly_budget_fen":-1}`, `{"monthly_budget_fen":"500"}`, `{}`, `{"monthly_budget_fen":1000000001}`} {
		if st, body := e.apiCall("PUT", "/api/v1/me/budget", tok, bad); st != http.StatusBadRequest {
			t.Errorf("budget %s = %d %s", bad, st, body)
		}
	}
	st, body = e.apiCall("PUT", "/api/v1/me/budget", tok, fmt.Sprintf(`{"monthly_budget_fen":%d}`, price*2))
	if st != http.StatusOK || decodeObject(t, body)["percent"] != 50.0 {
		t.Fatalf("set budget = %d %s; want 50 %% spent", st, body)
	}
	var spend spendJSON
	st, body = e.apiCall("GET", "/api/v1/spend?days=7", tok, "")
	decodeInto(t, body, &spend)
	if st != http.StatusOK || len(spend.Days) != 7 || spend.Days[6].Spent != price || spend.Days[6].Date != "2026-11-30" || spend.Budget.Monthly != price*2 {
		t.Fatalf("spend = %d %s", st, body)
	}
	for _, bad := range []string{"days=0", "days=367", "days=x"} {
		if st, _ := e.apiCall("GET", "/api/v1/spend?"+bad, tok, ""); st != http.StatusBadRequest {
			t.Errorf("spend?%s = %d", bad, st)
		}
	}
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	p := b.get("/ledger")
	if !strings.Contains(p.body, `data-testid="spend-chart"`) || !strings.Contains(p.body, `data-spent="`+fmt.Sprint(int64(price))+`"`) || !strings.Contains(p.body, "(50 %)") {
		t.Fatalf("the ledger does not draw the spend and the budget:\n%s", p.body)
	}
	// The form: a bad amount is said on it; 0 is no budget.
	if p := b.post("/ledger/budget", url.Values{"budget": {"-5"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `data-testid="budget-error"`) {
		t.Errorf("budget -5 from the form = %d", p.status)
	}
	if p := b.post("/ledger/budget", url.Values{"budget": {"0"}}); p.status != http.StatusSeeOther {
		t.Errorf("no budget from the form = %d", p.status)
	}
	if bud, _ := e.db.Budget(t.Context(), u.ID); bud.Monthly != 0 {
		t.Errorf("budget after 0 = %+v", bud)
	}
}
