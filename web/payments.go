package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"

	"gpuportal"
)

// PaymentProvider is a payment service customers top up through: the
// portal sends the payer to its checkout, and the provider calls
// POST /api/v1/payments/{name}/webhook with a signed event when the money
// has arrived. A real provider (Alipay, WeChat Pay, a bank's gateway)
// plugs in behind this interface.
type PaymentProvider interface {
	Name() string
	// CheckoutURL is where the payer pays a pending top-up.
	CheckoutURL(t gpuportal.TopUp) string
	// Verify checks that a webhook's body was signed by the provider.
	Verify(body []byte, header http.Header) error
}

// testProvider is the built-in provider: its checkout is a page of the
// portal (/pay/test/{id}) where the payer confirms, and it signs its
// webhook with PORTAL_PAYMENT_SECRET the way a real provider signs with
// the secret it shares with the portal, so the demo and the tests go
// through the real webhook code.
type testProvider struct{ secret string }

func (testProvider) Name() string { return gpuportal.TestPayProvider }

func (testProvider) CheckoutURL(t gpuportal.TopUp) string {
	return fmt.Sprintf("/pay/%s/%d", gpuportal.TestPayProvider, t.ID)
}

// Verify: X-Signature: sha256=<hex HMAC-SHA256 of the body>.
func (p testProvider) Verify(body []byte, header http.Header) error {
	if !hmac.Equal([]byte(header.Get("X-Signature")), []byte(p.sign(body))) {
		return gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "The signature does not match.")
	}
	return nil
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
	if s.cfg.TestPayments && name == gpuportal.TestPayProvider {
		return testProvider{secret: s.cfg.PaymentSecret}, nil
	}
	return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "No payment provider %q here.", name)
}

// topUpsEnabled reports whether customers can top up through a provider
// here; otherwise only an administrator's audited credit adds money.
func (s *Server) topUpsEnabled() bool { return s.cfg.TestPayments }

// withCheckout fills the pay_url of pending top-ups.
func (s *Server) withCheckout(t *gpuportal.TopUp) {
	if t.Status != gpuportal.TopUpPending {
		return
	}
	if p, err := s.provider(t.Provider); err == nil {
		t.PayURL = p.CheckoutURL(*t)
	}
}
