package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"
)

// fakeStripe answers the Stripe endpoints the portal calls (Checkout
// Sessions, Refunds) from memory, serves a checkout page that "pays" and
// sends the signed webhook as Stripe would, and redirects the payer back.
type fakeStripe struct {
	t       testing.TB
	srv     *httptest.Server
	secret  string // the webhook signing secret
	webhook string // where the portal's webhook is; "" sends none

	mu       sync.Mutex
	sessions map[string]*fakeSession
	refunds  []fakeRefund
	created  []url.Values // the form of each session created
	refuse   bool         // refunds fail
	// Stripe unwell: answer 500 to refund requests, after making the
	// refund (madeThen500) or without making it (lost500).
	madeThen500, lost500 bool
	byKey                map[string]int // idempotency key → index in refunds
	n                    int
}

type fakeSession struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	AmountTotal   int64             `json:"amount_total"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	Status        string            `json:"status"`
	PaymentStatus string            `json:"payment_status"`
	PaymentIntent *string           `json:"payment_intent"`
	URL           string            `json:"url"`
	SuccessURL    string            `json:"success_url"`
	ClientRef     string            `json:"client_reference_id"`
}

type fakeRefund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	PaymentIntent string            `json:"payment_intent"`
	Status        string            `json:"status"`
	Metadata      map[string]string `json:"metadata"`
}

const fakeWebhookSecret = "whsec_test_0123456789"

func newFakeStripe(t testing.TB) *fakeStripe {
	f := &fakeStripe{t: t, secret: fakeWebhookSecret, sessions: map[string]*fakeSession{}, byKey: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/checkout/sessions", f.createSession)
	mux.HandleFunc("GET /v1/checkout/sessions/{id}", f.getSession)
	mux.HandleFunc("POST /v1/refunds", f.createRefund)
	mux.HandleFunc("GET /v1/refunds", f.listRefunds)
	mux.HandleFunc("GET /pay/{id}", f.checkoutPage)
	mux.HandleFunc("POST /pay/{id}", f.pay)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// config is the portal's Stripe configuration for this fake.
func (f *fakeStripe) config() *StripeConfig {
	return &StripeConfig{SecretKey: "sk_test_fake", WebhookSecret: f.secret, APIURL: f.srv.URL}
}

func (f *fakeStripe) createSession(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer sk_test_fake") {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, r.PostForm)
	amount, _ := strconv.ParseInt(r.PostForm.Get("line_items[0][price_data][unit_amount]"), 10, 64)
	f.n++
	s := &fakeSession{ID: fmt.Sprintf("cs_test_%d", f.n), Object: "checkout.session", AmountTotal: amount, Currency: r.PostForm.Get("line_items[0][price_data][currency]"),
		Metadata: map[string]string{"topup_id": r.PostForm.Get("metadata[topup_id]")}, Status: "open", PaymentStatus: "unpaid",
		SuccessURL: r.PostForm.Get("success_url"), ClientRef: r.PostForm.Get("client_reference_id")}
	s.URL = f.srv.URL + "/pay/" + s.ID
	f.sessions[s.ID] = s
	writeJSON(w, s)
}

func (f *fakeStripe) getSession(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[r.PathValue("id")]
	if s == nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"message":"No such checkout.session","type":"invalid_request_error"}}`))
		return
	}
	writeJSON(w, s)
}

// createRefund makes a refund once per idempotency key, as Stripe does
// (a request again with the key gets the same refund back).
func (f *fakeStripe) createRefund(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"The charge has been disputed.","type":"invalid_request_error"}}`))
		return
	}
	fail500 := func() {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"An unknown error occurred.","type":"api_error"}}`))
	}
	if f.lost500 {
		fail500()
		return
	}
	key := r.Header.Get("Idempotency-Key")
	k, seen := f.byKey[key]
	if !seen || key == "" {
		amount, _ := strconv.ParseInt(r.PostForm.Get("amount"), 10, 64)
		f.n++
		f.refunds = append(f.refunds, fakeRefund{ID: fmt.Sprintf("re_test_%d", f.n), Object: "refund", Amount: amount, PaymentIntent: r.PostForm.Get("payment_intent"),
			Status: "succeeded", Metadata: map[string]string{"topup_id": r.PostForm.Get("metadata[topup_id]"), "refund_id": r.PostForm.Get("metadata[refund_id]")}})
		k = len(f.refunds) - 1
		f.byKey[key] = k
	}
	if f.madeThen500 {
		fail500()
		return
	}
	writeJSON(w, f.refunds[k])
}

func (f *fakeStripe) listRefunds(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data := []fakeRefund{}
	for _, re := range f.refunds {
		if re.PaymentIntent == r.URL.Query().Get("payment_intent") {
			data = append(data, re)
		}
	}
	writeJSON(w, map[string]any{"object": "list", "data": data, "has_more": false, "url": "/v1/refunds"})
}

// refundEvent is the event Stripe sends when a refund changes.
func (f *fakeStripe) refundEvent(kind string, re fakeRefund) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	obj, _ := json.Marshal(re)
	return []byte(fmt.Sprintf(`{"id":"evt_%d","object":"event","api_version":"2026-02-25.clover","type":%q,"data":{"object":%s}}`, f.n, kind, obj))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// markPaid pays a session (as the payer on Stripe's page would) and
// returns the event Stripe would send.
func (f *fakeStripe) markPaid(id string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[id]
	pi := "pi_" + strings.TrimPrefix(id, "cs_")
	s.Status, s.PaymentStatus, s.PaymentIntent = "complete", "paid", &pi
	return f.event("checkout.session.completed", s)
}

func (f *fakeStripe) event(kind string, s *fakeSession) []byte {
	f.n++
	obj, _ := json.Marshal(s)
	return []byte(fmt.Sprintf(`{"id":"evt_%d","object":"event","api_version":"2026-02-25.clover","type":%q,"data":{"object":%s}}`, f.n, kind, obj))
}

// sign is the Stripe-Signature header of payload, at a time.
func (f *fakeStripe) sign(payload []byte, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: f.secret, Timestamp: at}).Header
}

// deliver posts a signed event to the portal's webhook.
func (f *fakeStripe) deliver(url string, payload []byte, signature string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	if signature != "" {
		req.Header.Set("Stripe-Signature", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func (f *fakeStripe) checkoutPage(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	s := f.sessions[r.PathValue("id")]
	f.mu.Unlock()
	if s == nil {
		http.NotFound(w, r)
		return
	}
	fmt.Fprintf(w, `<!doctype html><html><body><h1>Pay ¥%d.%02d (%s)</h1><form method="post"><button type="submit" data-testid="stripe-pay">Pay</button></form></body></html>`,
		s.AmountTotal/100, s.AmountTotal%100, html.EscapeString(s.ID))
}

// pay is the payer paying on the checkout page: Stripe sends the webhook
// and brings the payer back to the success URL.
func (f *fakeStripe) pay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	s := f.sessions[id]
	f.mu.Unlock()
	if s == nil {
		http.NotFound(w, r)
		return
	}
	payload := f.markPaid(id)
	if f.webhook != "" {
		f.deliver(f.webhook, payload, f.sign(payload, time.Now()))
	}
	http.Redirect(w, r, s.SuccessURL, http.StatusSeeOther)
}
