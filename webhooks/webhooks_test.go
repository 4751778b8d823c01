package webhooks_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
	"gpuportal/webhooks"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// (issue 48, DESIGN §8) Where a webhook may go: public unicast addresses
// only, in every spelling of the ranges that are not.
func TestPublicAddresses(t *testing.T) {
	t.Parallel()
	for addr, public := range map[string]bool{
		"93.184.215.14": true, "8.8.8.8": true, "2606:4700::1111": true, "1.1.1.1": true,
		"127.0.0.1": false, "127.255.0.9": false, "0.0.0.0": false, "0.1.2.3": false,
		"10.0.0.1": false, "172.16.5.4": false, "172.31.255.255": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "100.127.255.254": false,
		"192.0.0.8": false, "192.0.2.1": false, "198.18.0.1": false, "198.51.100.7": false, "203.0.113.9": false,
		"224.0.0.1": false, "239.255.255.250": false, "240.0.0.1": false, "255.255.255.255": false,
		"::": false, "::1": false, "::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false, "::ffff:169.254.169.254": false,
		"::ffff:8.8.8.8": true, "fe80::1": false, "fc00::1": false, "fd12:3456::1": false, "ff02::1": false,
		"64:ff9b::7f00:1": false, "2002:7f00:1::": false, "2001:db8::1": false, "2001::1": false, "fec0::1": false,
	} {
		if got := webhooks.Public(netip.MustParseAddr(addr)); got != public {
			t.Errorf("Public(%s) = %v, want %v", addr, got, public)
		}
	}
}

type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// (issue 48) The check at creation: a name resolving to loopback (or to
// a mix with one private address), an address literal in any form, a
// name that does not resolve — all 400 naming url, unless the operator
// allows private addresses.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	r := resolver{
		"localhost":         {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"hooks.example.com": {netip.MustParseAddr("93.184.215.14")},
		"mixed.example.com": {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.0.0.7")},
	}
	ctx := context.Background()
	for url, ok := range map[string]bool{
		"https://hooks.example.com/x":          true,
		"http://hooks.example.com:8443/x":      true,
		"https://93.184.215.14/x":              true,
		"http://localhost:8080/x":              false,
		"http://mixed.example.com/x":           false,
		"http://127.0.0.1/x":                   false,
		"http://[::1]/x":                       false,
		"http://[::ffff:127.0.0.1]/x":          false,
		"http://0.0.0.0/x":                     false,
		"http://169.254.169.254/latest":        false,
		"http://nowhere.example.com/x":         false,
		"ftp://hooks.example.com/x":            false,
		"https://[fe80::1%25eth0]/x":           false,
		"http://100.64.1.1/carrier-grade-nat/": false,
	} {
		err := webhooks.CheckURL(ctx, r, url, false)
		if ok != (err == nil) {
			t.Errorf("CheckURL(%s) = %v, want ok=%v", url, err, ok)
		}
		if err != nil && (gpuportal.ErrorCode(err) != gpuportal.EINVALID || gpuportal.ErrorField(err) != "url") {
			t.Errorf("CheckURL(%s) = %v, want 400 naming url", url, err)
		}
	}
	if err := webhooks.CheckURL(ctx, r, "http://localhost:8080/x", true); err != nil {
		t.Fatalf("with private addresses allowed: %v", err)
	}
}

// (issue 48) The address actually dialled is checked too: a webhook
// made while private addresses were allowed, or a name that resolved
// elsewhere at creation (DNS rebinding), never reaches loopback through
// the client deliveries use.
func TestDeliveriesNeverDialPrivateAddresses(t *testing.T) {
	t.Parallel()
	var hits int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	defer srv.Close()
	_, err := webhooks.NewClient(false).Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err == nil || !strings.Contains(err.Error(), "not a public address") {
		t.Fatalf("posting to %s = %v", srv.URL, err)
	}
	// A redirect to the portal's network is not followed either.
	redirector := httptest.NewServer(http.RedirectHandler(srv.URL, http.StatusFound))
	defer redirector.Close()
	resp, err := webhooks.NewClient(true).Post(redirector.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != http.StatusFound || hits != 0 {
		t.Fatalf("redirect answered %d, the target was hit %d times", resp.StatusCode, hits)
	}
}

// receiver is a customer's endpoint: it verifies each delivery with
// Stripe's own verification code and the webhook's secret, and answers
// as told.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	secret string
	answer func(n int) int // the status for the n-th request (from 1)
	got    []gpuportal.WebhookDelivery
	ids    []string
	n      int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if err := webhook.ValidatePayloadIgnoringTolerance(body, req.Header.Get("Gpuportal-Signature"), r.secret); err != nil {
		r.t.Errorf("delivery %d: the signature does not verify: %v", r.n, err)
	}
	var ev struct {
		ID   int64           `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("delivery %d: %v", r.n, err)
	}
	code := r.answer(r.n)
	if code < 300 {
		r.got = append(r.got, gpuportal.WebhookDelivery{EventID: ev.ID, Type: ev.Type, Data: ev.Data})
		r.ids = append(r.ids, req.Header.Get("Gpuportal-Event-Id"))
	}
	w.WriteHeader(code)
	io.WriteString(w, strings.Repeat("x", 3000)) // more than the 1 KB kept
}

// (issue 48) Deliveries end to end against a real HTTP endpoint: signed
// as Stripe signs (its library verifies them), in order per endpoint,
// retried with the endpoint backing off as a whole while it fails, the
// owner told once after five failures in a row, the answer's first KB
// kept, a redelivery sent again at once — and given up after 24 hours.
func TestDeliveriesSignedRetriedInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	wall := gpuportal.NewManualClock(storetest.Epoch)
	db.Wall = wall
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	rcv := &receiver{t: t, answer: func(n int) int {
		if n <= 6 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	hook, err := db.CreateWebhook(ctx, u, srv.URL+"/hook", []string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	rcv.secret = hook.Secret
	d := &webhooks.Deliverer{DB: db, Client: webhooks.NewClient(true), Wall: wall, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var tests []int64
	for range 3 {
		del, err := db.TestWebhook(ctx, u, hook.ID)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, del.EventID)
	}
	// Six failures, each backing the endpoint off longer: nothing is sent
	// before its time, the oldest event first every time.
	var waits []time.Duration
	for k := range 6 {
		n, err := d.DeliverOnce(ctx)
		if err != nil || n != 1 {
			t.Fatalf("attempt %d sent %d: %v", k+1, n, err)
		}
		if n, _ := d.DeliverOnce(ctx); n != 0 {
			t.Fatalf("after failure %d the endpoint was tried again at once", k+1)
		}
		w, err := db.Webhook(ctx, u, hook.ID)
		if err != nil || w.Failures != k+1 || w.RetryAt == nil {
			t.Fatalf("after failure %d: %+v %v", k+1, w, err)
		}
		waits = append(waits, w.RetryAt.Sub(wall.Now()))
		wall.Set(*w.RetryAt)
	}
	if !slices.Equal(waits, []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute}) {
		t.Fatalf("backoff = %v", waits)
	}
	list, err := db.WebhookDeliveries(ctx, u, hook.ID, store.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	first := list[len(list)-1]
	if first.Attempts != 6 || first.Status != gpuportal.DeliveryPending || *first.StatusCode != 503 || len(first.Response) != gpuportal.WebhookResponseKeep {
		t.Fatalf("the first delivery after six failures = %+v", first)
	}
	for _, later := range list[:len(list)-1] {
		if later.Attempts != 0 {
			t.Fatalf("a later delivery was sent ahead of the first: %+v", later)
		}
	}
	notes, err := db.InApp(ctx, u.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	told := 0
	for _, n := range notes {
		if n.Kind == gpuportal.NoteWebhookFailing {
			told++
		}
	}
	if told != 1 {
		t.Fatalf("told of the failing endpoint %d times", told)
	}
	// It answers again: the three go in order, and the endpoint is well.
	for range 3 {
		if n, err := d.DeliverOnce(ctx); err != nil || n != 1 {
			t.Fatalf("sent %d: %v", n, err)
		}
	}
	rcv.mu.Lock()
	var got []int64
	for _, g := range rcv.got {
		got = append(got, g.EventID)
	}
	rcv.mu.Unlock()
	if !slices.Equal(got, tests) {
		t.Fatalf("delivered events %v, want %v in that order", got, tests)
	}
	if w, _ := db.Webhook(ctx, u, hook.ID); w.Failures != 0 || w.RetryAt != nil {
		t.Fatalf("a healthy endpoint = %+v", w)
	}
	// A redelivery is a delivery of its own, sent now.
	list, _ = db.WebhookDeliveries(ctx, u, hook.ID, store.Page{Limit: 10})
	again, err := db.Redeliver(ctx, u, hook.ID, list[0].ID)
	if err != nil || again.EventID != list[0].EventID || again.Status != gpuportal.DeliveryPending {
		t.Fatalf("redeliver = %+v, %v", again, err)
	}
	if n, _ := d.DeliverOnce(ctx); n != 1 {
		t.Fatal("the redelivery was not sent")
	}
	if _, err := db.Redeliver(ctx, u, hook.ID, 999999); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("redelivering a delivery that is not there = %v", err)
	}

	// Down for a day: given up after 24 hours, not retried for ever.
	rcv.mu.Lock()
	rcv.answer = func(int) int { return http.StatusInternalServerError }
	rcv.mu.Unlock()
	if _, err := db.TestWebhook(ctx, u, hook.ID); err != nil {
		t.Fatal(err)
	}
	start := wall.Now()
	for attempts := 0; ; attempts++ {
		if attempts > 60 {
			t.Fatal("still retrying after 60 attempts")
		}
		if _, err := d.DeliverOnce(ctx); err != nil {
			t.Fatal(err)
		}
		list, _ = db.WebhookDeliveries(ctx, u, hook.ID, store.Page{Limit: 1})
		if list[0].Status == gpuportal.DeliveryFailed {
			break
		}
		w, _ := db.Webhook(ctx, u, hook.ID)
		wall.Set(*w.RetryAt)
	}
	if took := wall.Now().Sub(start); took > 25*time.Hour || took < 22*time.Hour {
		t.Fatalf("given up after %s", took)
	}
	if !strings.Contains(list[0].LastError, "24 hours") {
		t.Fatalf("a given-up delivery says %q", list[0].LastError)
	}
}
