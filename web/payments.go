package web

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"gpuportal"
)

// PaymentProvider is a payment service customers top up through: the
// portal makes a checkout for a pending top-up and sends the payer there,
// and the provider calls POST /api/v1/payments/{name}/webhook with a signed
// event once the money has arrived. The built-in test provider (demo and
// tests) and Stripe (cards, Alipay, WeChat Pay) sit behind it.
type PaymentProvider interface {
	Name() string
	// Checkout prepares where the payer pays a pending top-up, coming back
	// to returnURL: the page, and the provider's reference for it ("" when
	// it keeps none).
	Checkout(ctx context.Context, t gpuportal.TopUp, returnURL string) (payURL, ref string, err error)
	// Event checks a webhook's signature and reads what it reports: a
	// payment, refunds' outcomes, or nothing the portal acts on.
	Event(body []byte, header http.Header) (providerEvent, error)
	// Lookup asks about a top-up whose webhook may have been lost: its
	// payment, if it was paid; expired, when it never will be.
	Lookup(ctx context.Context, t gpuportal.TopUp) (ev *gpuportal.PaymentEvent, expired bool, err error)
	// Refund pays a part of a payment back (with the part's idempotency
	// key: asking again makes no second refund) and returns the
	// provider's id for the refund. An explicit refusal is a
	// refundRefused; any other error leaves the outcome unknown.
	Refund(ctx context.Context, part gpuportal.RefundPart) (string, error)
	// RefundStatus reads a part's refund back from the provider: nil when
	// it has none for it (it was never made).
	RefundStatus(ctx context.Context, part gpuportal.RefundPart) (*gpuportal.RefundUpdate, error)
}

// providerEvent is what one webhook reports.
type providerEvent struct {
	Payment *gpuportal.PaymentEvent
	Refunds []gpuportal.RefundUpdate
}

// refundRefused is a provider saying no to a refund (the payment was
// disputed, say): the part's money goes back into the balance. Anything
// else that goes wrong leaves the refund's outcome unknown.
type refundRefused struct{ error }

func (r refundRefused) Unwrap() error { return r.error }

// testProvider is the built-in provider: its checkout is a page of the
// portal (/pay/test/{id}) where the payer confirms, and it signs its
// webhook with PORTAL_PAYMENT_SECRET the way a real provider signs with
// the secret it shares with the portal, so the demo and the tests go
// through the real webhook code. Its money is pretend: a refund only
// records itself.
type testProvider struct{ secret string }

func (testProvider) Name() string { return gpuportal.TestPayProvider }

// Checkout: the portal's own page, which sends the payer back to
// returnURL once paid (?back=, as a provider's success URL).
func (testProvider) Checkout(_ context.Context, t gpuportal.TopUp, returnURL string) (string, string, error) {
	return testCheckoutURL(t) + "?back=" + url.QueryEscape(returnURL), "", nil
}

func testCheckoutURL(t gpuportal.TopUp) string {
	return fmt.Sprintf("/pay/%s/%d", gpuportal.TestPayProvider, t.ID)
}

// Event: X-Signature: sha256=<hex HMAC-SHA256 of the body>, then the
// event as JSON.
func (p testProvider) Event(body []byte, header http.Header) (providerEvent, error) {
	if !hmac.Equal([]byte(header.Get("X-Signature")), []byte(p.sign(body))) {
		return providerEvent{}, gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "The signature does not match.")
	}
	var ev gpuportal.PaymentEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return providerEvent{}, gpuportal.Errorf(gpuportal.EINVALID, "The event is not valid JSON: %s.", err.Error())
	}
	return providerEvent{Payment: &ev}, nil
}

// Lookup: the test provider's webhook is sent in-process; none is lost.
func (testProvider) Lookup(context.Context, gpuportal.TopUp) (*gpuportal.PaymentEvent, bool, error) {
	return nil, false, nil
}

func (testProvider) Refund(_ context.Context, part gpuportal.RefundPart) (string, error) {
	return fmt.Sprintf("test-refund-%d-%d", part.TopUpID, part.Amount), nil
}

// RefundStatus: the test provider keeps nothing to read back; asking
// again makes the same pretend refund.
func (testProvider) RefundStatus(context.Context, gpuportal.RefundPart) (*gpuportal.RefundUpdate, error) {
	return nil, nil
}

func (p testProvider) sign(body []byte) string {
	mac := hmac.New(sha256.New, []byte(p.secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// provider is the payment provider called name, if this portal has it.
// The test provider exists only where it was asked for (Config.TestPayments):
// its checkout is a button that credits money.
func (s *Server) provider(name string) (PaymentProvider, error) {
	switch {
	case name == gpuportal.TestPayProvider && s.cfg.TestPayments:
		return testProvider{secret: s.cfg.PaymentSecret}, nil
	case name == gpuportal.StripePayProvider && s.stripe != nil:
		return s.stripe, nil
	}
	return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "No payment provider %q here.", name)
}

// topUpsEnabled reports whether customers can top up through a provider
// here; otherwise only an administrator's audited credit adds money.
func (s *Server) topUpsEnabled() bool { return s.cfg.TestPayments || s.stripe != nil }

// defaultProvider is the provider the pages top up through: Stripe where
// it is set up, else the test provider.
func (s *Server) defaultProvider() string {
	if s.stripe != nil {
		return gpuportal.StripePayProvider
	}
	return gpuportal.TestPayProvider
}

// withCheckout shows the pay_url of pending top-ups only; one made before
// checkouts were kept (a test-provider top-up) gets its page.
func (s *Server) withCheckout(t *gpuportal.TopUp) {
	if t.Status != gpuportal.TopUpPending {
		t.PayURL = ""
		return
	}
	if t.PayURL == "" && t.Provider == gpuportal.TestPayProvider && s.cfg.TestPayments {
		t.PayURL = testCheckoutURL(*t)
	}
	t.PayURL = s.linkURL(t.PayURL)
}
