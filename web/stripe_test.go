package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// withStripe turns Stripe on for the test portal, against a fake.
func (e *testEnv) withStripe() *fakeStripe {
	f := newFakeStripe(e.t)
	f.webhook = e.srv.URL + "/api/v1/payments/stripe/webhook"
	e.with(func(c *Config) {
		c.Stripe = f.config()
		c.PublicURL = e.srv.URL
	})
	return f
}

func (e *testEnv) balanceOf(tok string) gpuportal.Balance {
	e.t.Helper()
	var b gpuportal.Balance
	_, body := e.apiCall("GET", "/api/v1/balance", tok, "")
	decodeInto(e.t, body, &b)
	return b
}

// stripeTopUp creates a Stripe top-up through the API and returns it.
func (e *testEnv) stripeTopUp(tok string, amount gpuportal.Fen) gpuportal.TopUp {
	e.t.Helper()
	st, body := e.apiCall("POST", "/api/v1/topups", tok, fmt.Sprintf(`{"amount_fen":%d,"provider":"stripe"}`, amount))
	if st != http.StatusCreated {
		e.t.Fatalf("stripe top-up = %d %s", st, body)
	}
	var t gpuportal.TopUp
	decodeInto(e.t, body, &t)
	return t
}

// (issue 30) A top-up through Stripe: a Checkout Session in CNY for the
// amount, with the top-up in its metadata; the signed webhook credits once
// — replayed, concurrent, out of order; a forged or stale signature, a
// wrong amount or an event about something else credits nothing.
func TestStripeCheckoutAndWebhook(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	f := e.withStripe()
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	top := e.stripeTopUp(tok, 25000)
	if !strings.HasPrefix(top.PayURL, f.srv.URL+"/pay/cs_test_") || top.Status != gpuportal.TopUpPending {
		t.Fatalf("top-up = %+v", top)
	}
	form := f.created[0]
	for k, want := range map[string]string{"line_items[0][price_data][unit_amount]": "25000", "line_items[0][price_data][currency]": "cny",
		"metadata[topup_id]": fmt.Sprint(top.ID), "client_reference_id": fmt.Sprint(top.ID), "mode": "payment",
		"payment_method_types[0]": "card", "payment_method_types[1]": "alipay", "payment_method_types[2]": "wechat_pay",
		"payment_method_options[wechat_pay][client]": "web"} {
		if got := form.Get(k); got != want {
			t.Errorf("checkout %s = %q, want %q", k, got, want)
		}
	}
	if !strings.HasPrefix(form.Get("success_url"), e.srv.URL+"/ledger") {
		t.Errorf("the payer comes back to %q", form.Get("success_url"))
	}
	sessionID := strings.TrimPrefix(top.PayURL, f.srv.URL+"/pay/")
	paid := f.markPaid(sessionID)

	// Forged, stale, or for another body: 401, nothing credited.
	for name, sig := range map[string]string{
		"none":    "",
		"forged":  webhookSigWith("whsec_someone_else", paid),
		"stale":   f.sign(paid, time.Now().Add(-time.Hour)),
		"another": f.sign(append([]byte(nil), append(paid, ' ')...), time.Now()),
	} {
		if st, body := f.deliver(f.webhook, paid, sig); st != http.StatusUnauthorized {
			t.Errorf("%s signature = %d %s", name, st, body)
		}
	}
	if b := e.balanceOf(tok); b.Balance != 0 {
		t.Fatalf("a forged webhook credited: %+v", b)
	}
	// The real one, ten times at once and again later: credited once.
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, body := f.deliver(f.webhook, paid, f.sign(paid, time.Now())); st != http.StatusOK {
				t.Errorf("webhook = %d %s", st, body)
			}
		}()
	}
	wg.Wait()
	f.deliver(f.webhook, paid, f.sign(paid, time.Now()))
	if b := e.balanceOf(tok); b.Balance != 25000 {
		t.Fatalf("balance after the webhooks = %s, want ¥250.00 once", b.Balance)
	}

	// Out of order: an async method's success before its completion event
	// (which says unpaid): credited once, by the success.
	second := e.stripeTopUp(tok, 10000)
	sid := strings.TrimPrefix(second.PayURL, f.srv.URL+"/pay/")
	f.mu.Lock()
	s := f.sessions[sid]
	unpaid := f.event("checkout.session.completed", s) // payment_status unpaid
	f.mu.Unlock()
	succeeded := f.markPaid(sid)
	succeeded = []byte(strings.Replace(string(succeeded), `"checkout.session.completed"`, `"checkout.session.async_payment_succeeded"`, 1))
	for _, ev := range [][]byte{succeeded, unpaid, succeeded} {
		if st, body := f.deliver(f.webhook, ev, f.sign(ev, time.Now())); st != http.StatusOK {
			t.Fatalf("webhook = %d %s", st, body)
		}
	}
	if b := e.balanceOf(tok); b.Balance != 35000 {
		t.Fatalf("balance after the async payment = %s", b.Balance)
	}

	// A wrong amount: 409, nothing credited, and audited.
	third := e.stripeTopUp(tok, 5000)
	tid := strings.TrimPrefix(third.PayURL, f.srv.URL+"/pay/")
	f.mu.Lock()
	f.sessions[tid].AmountTotal = 500
	f.mu.Unlock()
	wrong := f.markPaid(tid)
	if st, body := f.deliver(f.webhook, wrong, f.sign(wrong, time.Now())); st != http.StatusConflict {
		t.Fatalf("a wrong amount = %d %s", st, body)
	}
	if b := e.balanceOf(tok); b.Balance != 35000 {
		t.Fatalf("a wrong amount credited: %s", b.Balance)
	}
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	if _, body := e.apiCall("GET", "/api/v1/admin/audit", admin, ""); !strings.Contains(body, "payment.amount_mismatch") {
		t.Fatalf("the mismatch is not audited: %s", body)
	}
	// Events about other things are answered and ignored.
	other := []byte(`{"id":"evt_x","object":"event","api_version":"2026-02-25.clover","type":"customer.created","data":{"object":{"id":"cus_1","object":"customer"}}}`)
	if st, body := f.deliver(f.webhook, other, f.sign(other, time.Now())); st != http.StatusOK || !strings.Contains(body, "false") {
		t.Fatalf("another event = %d %s", st, body)
	}
	// The admins' payments page lists them with Stripe's reference.
	if _, body := e.apiCall("GET", "/api/v1/admin/topups?status=paid", admin, ""); !strings.Contains(body, sessionID) {
		t.Fatalf("admin top-ups: %s", body)
	}
	if st, _ := e.apiCall("GET", "/api/v1/admin/topups?status=bogus", admin, ""); st != 400 {
		t.Fatalf("unknown status = %d", st)
	}
}

func webhookSigWith(secret string, payload []byte) string {
	f := &fakeStripe{secret: secret}
	return f.sign(payload, time.Now())
}

// (issue 30) A lost webhook is healed: reconciliation asks Stripe about
// pending top-ups a few minutes old, credits the paid one (once) and lapses
// the one whose session expired; Stripe unreachable at a top-up is a clear
// 503 that charges nothing.
func TestStripeReconciliation(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	f := e.withStripe()
	f.webhook = "" // every webhook is lost
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	paid := e.stripeTopUp(tok, 12000)
	expired := e.stripeTopUp(tok, 3000)
	f.markPaid(strings.TrimPrefix(paid.PayURL, f.srv.URL+"/pay/"))
	f.mu.Lock()
	f.sessions[strings.TrimPrefix(expired.PayURL, f.srv.URL+"/pay/")].Status = "expired"
	f.mu.Unlock()
	ctx := context.Background()
	if n, err := e.web.ReconcilePayments(ctx); err != nil || n != 0 {
		t.Fatalf("reconciled fresh top-ups: %d %v", n, err)
	}
	e.clock.Set(e.clock.Now().Add(6 * time.Minute))
	if n, err := e.web.ReconcilePayments(ctx); err != nil || n != 1 {
		t.Fatalf("reconcile = %d %v, want 1", n, err)
	}
	if n, _ := e.web.ReconcilePayments(ctx); n != 0 {
		t.Fatalf("a second reconciliation credited %d more", n)
	}
	if b := e.balanceOf(tok); b.Balance != 12000 {
		t.Fatalf("balance after reconciliation = %s", b.Balance)
	}
	got, _ := e.db.TopUp(ctx, u, expired.ID)
	if got.Status != gpuportal.TopUpExpired {
		t.Fatalf("the expired session's top-up is %s", got.Status)
	}
	f.srv.Close() // Stripe unreachable
	if st, body := e.apiCall("POST", "/api/v1/topups", tok, `{"amount_fen":1000,"provider":"stripe"}`); st != http.StatusServiceUnavailable || !strings.Contains(body, "nothing was charged") {
		t.Fatalf("a top-up with Stripe down = %d %s", st, body)
	}
}

// (issue 30) Unused balance back on request: an admin approves, the refund
// goes back through Stripe to the payments it came from (newest first,
// split across two), the ledger is debited once; never more than what is
// unused; a refund Stripe refuses puts the money back.
func TestStripeRefunds(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	f := e.withStripe()
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	var sessions []string
	for _, amount := range []gpuportal.Fen{3000, 4000} {
		top := e.stripeTopUp(tok, amount)
		sessions = append(sessions, strings.TrimPrefix(top.PayURL, f.srv.URL+"/pay/"))
	}
	// The webhooks go through the fake's checkout page, as a payer's would.
	for _, s := range sessions {
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Post(f.srv.URL+"/pay/"+s, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if b := e.balanceOf(tok); b.Balance != 7000 {
		t.Fatalf("balance = %s", b.Balance)
	}
	if st, body := e.apiCall("POST", "/api/v1/refund-requests", tok, `{"amount_fen":8000}`); st != 400 || !strings.Contains(body, "amount_fen") {
		t.Fatalf("more than unused = %d %s", st, body)
	}
	st, body := e.apiCall("POST", "/api/v1/refund-requests", tok, `{"amount_fen":6000,"note":"project over"}`)
	if st != http.StatusCreated {
		t.Fatalf("refund request = %d %s", st, body)
	}
	var req gpuportal.RefundRequest
	decodeInto(t, body, &req)
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/admin/refund-requests/%d/approve", req.ID), tok, ""); st != http.StatusForbidden {
		t.Fatalf("a customer approves = %d", st)
	}
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	st, body = e.apiCall("POST", fmt.Sprintf("/api/v1/admin/refund-requests/%d/approve", req.ID), admin, "")
	decodeInto(t, body, &req)
	if st != 200 || req.Status != gpuportal.RefundRefunded {
		t.Fatalf("approve = %d %s", st, body)
	}
	if len(f.refunds) != 2 || f.refunds[0].Amount != 4000 || f.refunds[1].Amount != 2000 ||
		f.refunds[0].PaymentIntent != "pi_"+strings.TrimPrefix(sessions[1], "cs_") || f.refunds[1].PaymentIntent != "pi_"+strings.TrimPrefix(sessions[0], "cs_") {
		t.Fatalf("refunds at Stripe: %+v", f.refunds)
	}
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/admin/refund-requests/%d/approve", req.ID), admin, ""); st != http.StatusConflict {
		t.Fatalf("approved twice = %d", st)
	}
	if b := e.balanceOf(tok); b.Balance != 1000 {
		t.Fatalf("balance after the refund = %s, want ¥10.00", b.Balance)
	}
	checkLedgerSum(t, e, u)

	// Stripe refuses the next one: the money is back in the balance.
	f.refuse = true
	_, body = e.apiCall("POST", "/api/v1/refund-requests", tok, `{"amount_fen":1000}`)
	decodeInto(t, body, &req)
	_, body = e.apiCall("POST", fmt.Sprintf("/api/v1/admin/refund-requests/%d/approve", req.ID), admin, "")
	decodeInto(t, body, &req)
	if req.Status != gpuportal.RefundFailed || !strings.Contains(req.Error, "disputed") {
		t.Fatalf("a refused refund = %+v", req)
	}
	if b := e.balanceOf(tok); b.Balance != 1000 {
		t.Fatalf("balance after a refused refund = %s, want ¥10.00 back", b.Balance)
	}
	checkLedgerSum(t, e, u)
}

func checkLedgerSum(t *testing.T, e *testEnv, u *gpuportal.User) {
	t.Helper()
	sum, err := e.db.LedgerSum(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b := e.balanceOf(e.tokenFor(u)); b.Balance != sum {
		t.Fatalf("balance %s, ledger %s", b.Balance, sum)
	}
}

// (issue 30) In a browser: top up with Stripe, pay on (the fake's)
// checkout page, come back to the ledger with the money there.
func TestBrowserStripeTopUp(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	e.withStripe()
	storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "alice@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), storetest.Password),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
		chromedp.Navigate(e.srv.URL+"/ledger"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="topup-form"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="topup-amount"]`), "88"),
		chromedp.Click(chromedp.CSS(`[data-testid="topup-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="stripe-pay"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="stripe-pay"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="balance-card"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="available"]`); got != "¥88.00" {
		t.Fatalf("available after paying with Stripe %q", got)
	}
}

// decodeInto decodes a JSON answer into v.
func decodeInto(t testing.TB, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
}

// (issue 30) The pages: the customer asks on the ledger page, the admin
// sees the request beside the top-ups on /admin/payments and approves it.
func TestRefundPages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	f := e.withStripe()
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	top := e.stripeTopUp(e.tokenFor(u), 5000)
	paid := f.markPaid(strings.TrimPrefix(top.PayURL, f.srv.URL+"/pay/"))
	f.deliver(f.webhook, paid, f.sign(paid, time.Now()))
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if p := b.get("/ledger"); !strings.Contains(p.body, `data-testid="refund-form"`) {
		t.Fatal("no refund form on the ledger page")
	}
	if p := b.post("/refund-requests", url.Values{"amount": {"20"}, "note": {"done"}}); p.status != http.StatusSeeOther {
		t.Fatalf("refund form = %d %s", p.status, p.body)
	}
	if p := b.get("/ledger"); !strings.Contains(p.body, "waiting for approval") {
		t.Fatal("the ledger does not show the request")
	}
	admin := e.browser()
	admin.login("admin@example.com", storetest.Password)
	p := admin.get("/admin/payments")
	if !strings.Contains(p.body, `data-testid="approve-refund"`) || !strings.Contains(p.body, top.ProviderRef) {
		t.Fatalf("payments page:\n%s", p.body)
	}
	if p := admin.post("/admin/refund-requests/1/approve", nil); p.status != http.StatusSeeOther {
		t.Fatalf("approve form = %d", p.status)
	}
	if b := e.balanceOf(e.tokenFor(u)); b.Balance != 3000 || len(f.refunds) != 1 || f.refunds[0].Amount != 2000 {
		t.Fatalf("after approving: balance %s, refunds %+v", b.Balance, f.refunds)
	}
	if p := b.get("/ledger"); !strings.Contains(p.body, "Refund of unused balance to top-up #1") {
		t.Fatal("the ledger does not name the payout")
	}
}

// (issue 44, item 3) A refund whose outcome Stripe does not give (a 5xx,
// a timeout) is never taken as refused: before, the money went back into
// the balance while Stripe had made the refund — paid twice. It stays
// pending, is read back and asked again with the same idempotency key
// (one refund at Stripe however often), is settled by the refund's
// webhooks, and a request left refunding by a crash is picked up again.
func TestRefundWithUnknownOutcomeIsNeverPaidTwice(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	f := e.withStripe()
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	adminUser, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	for _, amount := range []gpuportal.Fen{3000, 4000} {
		top := e.stripeTopUp(tok, amount)
		payload := f.markPaid(strings.TrimPrefix(top.PayURL, f.srv.URL+"/pay/"))
		if st, body := f.deliver(f.webhook, payload, f.sign(payload, time.Now())); st != http.StatusOK {
			t.Fatalf("webhook = %d %s", st, body)
		}
	}
	ctx := context.Background()
	refund := func(amount gpuportal.Fen) gpuportal.RefundRequest {
		t.Helper()
		var req gpuportal.RefundRequest
		st, body := e.apiCall("POST", "/api/v1/refund-requests", tok, fmt.Sprintf(`{"amount_fen":%d}`, amount))
		if st != http.StatusCreated {
			t.Fatalf("refund request = %d %s", st, body)
		}
		decodeInto(t, body, &req)
		return req
	}
	approve := func(id int64) gpuportal.RefundRequest {
		t.Helper()
		var req gpuportal.RefundRequest
		st, body := e.apiCall("POST", fmt.Sprintf("/api/v1/admin/refund-requests/%d/approve", id), admin, "")
		if st != http.StatusOK {
			t.Fatalf("approve = %d %s", st, body)
		}
		decodeInto(t, body, &req)
		return req
	}
	retry := func() {
		t.Helper()
		e.wall.Set(e.wall.Now().Add(2 * refundRetryAfter))
		if _, err := e.web.RetryRefunds(ctx); err != nil {
			t.Fatal(err)
		}
	}
	status := func(id int64) string {
		t.Helper()
		r, err := e.db.RefundRequest(ctx, &gpuportal.User{Role: gpuportal.RoleAdmin}, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}

	// Stripe makes the refund, then answers 500 (every retry too).
	f.mu.Lock()
	f.madeThen500 = true
	f.mu.Unlock()
	req := approve(refund(1000).ID)
	if req.Status != gpuportal.RefundRefunding {
		t.Fatalf("a refund whose outcome is unknown is %s; want it refunding, not failed", req.Status)
	}
	if b := e.balanceOf(tok); b.Balance != 6000 {
		t.Fatalf("balance while the outcome is unknown = %s; want ¥60.00 (the payout stays out)", b.Balance)
	}
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/admin/refund-requests/%d/approve", req.ID), admin, ""); st != http.StatusConflict {
		t.Fatalf("approved again while refunding = %d", st)
	}
	// Still unwell: the retry reads the refund back and keeps it as made.
	retry()
	if got := status(req.ID); got != gpuportal.RefundRefunded {
		t.Fatalf("after reading back: %s", got)
	}
	f.mu.Lock()
	f.madeThen500 = false
	made := len(f.refunds)
	f.mu.Unlock()
	if made != 1 {
		t.Fatalf("Stripe made %d refunds for one part", made)
	}
	if b := e.balanceOf(tok); b.Balance != 6000 {
		t.Fatalf("balance after the refund = %s; want ¥60.00, paid out once", b.Balance)
	}
	checkLedgerSum(t, e, u)

	// Stripe answers 500 without making it: the retry asks again, once.
	f.mu.Lock()
	f.lost500 = true
	f.mu.Unlock()
	req = approve(refund(1000).ID)
	if req.Status != gpuportal.RefundRefunding {
		t.Fatalf("a lost refund is %s, want refunding", req.Status)
	}
	f.mu.Lock()
	f.lost500 = false
	f.mu.Unlock()
	retry()
	retry() // nothing more to do
	if got := status(req.ID); got != gpuportal.RefundRefunded || len(f.refunds) != 2 {
		t.Fatalf("after asking again: %s with %d refunds at Stripe", got, len(f.refunds))
	}

	// The portal dies between the approval and the ask: the request is
	// left refunding, and the retry picks it up.
	crashed := refund(1000)
	if _, _, err := e.db.StartRefund(ctx, adminUser, crashed.ID); err != nil {
		t.Fatal(err)
	}
	retry()
	if got := status(crashed.ID); got != gpuportal.RefundRefunded || len(f.refunds) != 3 {
		t.Fatalf("a crashed approval after the retry: %s with %d refunds at Stripe", got, len(f.refunds))
	}
	if b := e.balanceOf(tok); b.Balance != 4000 {
		t.Fatalf("balance = %s, want ¥40.00", b.Balance)
	}

	// Stripe reports a made refund failed later (refund.failed): its money
	// never left, so it goes back; the same event again changes nothing.
	f.mu.Lock()
	failed := f.refunds[2]
	f.mu.Unlock()
	failed.Status = "failed"
	ev := f.refundEvent("refund.failed", failed)
	for range 2 {
		if st, body := f.deliver(f.webhook, ev, f.sign(ev, time.Now())); st != http.StatusOK {
			t.Fatalf("refund.failed webhook = %d %s", st, body)
		}
	}
	if got := status(crashed.ID); got != gpuportal.RefundFailed {
		t.Fatalf("after refund.failed: %s", got)
	}
	if b := e.balanceOf(tok); b.Balance != 5000 {
		t.Fatalf("balance after refund.failed = %s, want ¥50.00 (once)", b.Balance)
	}
	checkLedgerSum(t, e, u)
	// A webhook settles a pending part as well (refund.updated).
	f.mu.Lock()
	f.madeThen500 = true
	f.mu.Unlock()
	req = approve(refund(1000).ID)
	f.mu.Lock()
	f.madeThen500 = false
	last := f.refunds[len(f.refunds)-1]
	f.mu.Unlock()
	ev = f.refundEvent("refund.updated", last)
	if st, body := f.deliver(f.webhook, ev, f.sign(ev, time.Now())); st != http.StatusOK {
		t.Fatalf("refund.updated webhook = %d %s", st, body)
	}
	if got := status(req.ID); got != gpuportal.RefundRefunded {
		t.Fatalf("after refund.updated: %s", got)
	}
	checkLedgerSum(t, e, u)
}

// (issue 44, item 3) A paid Checkout Session credits only the top-up it
// was made for: one whose metadata names another top-up credits nothing.
func TestCheckoutCreditsOnlyItsOwnTopUp(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	f := e.withStripe()
	u := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	tok := e.tokenFor(u)
	small := e.stripeTopUp(tok, 1000)
	big := e.stripeTopUp(tok, 1000)
	id := strings.TrimPrefix(small.PayURL, f.srv.URL+"/pay/")
	f.mu.Lock()
	f.sessions[id].Metadata["topup_id"] = fmt.Sprint(big.ID) // the session claims the other top-up
	f.mu.Unlock()
	payload := f.markPaid(id)
	if st, body := f.deliver(f.webhook, payload, f.sign(payload, time.Now())); st != http.StatusConflict {
		t.Fatalf("a session for another top-up = %d %s", st, body)
	}
	if b := e.balanceOf(tok); b.Balance != 0 {
		t.Fatalf("credited %s through another top-up's session", b.Balance)
	}
}
