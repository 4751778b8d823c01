package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v84"
	"github.com/stripe/stripe-go/v84/webhook"

	"gpuportal"
)

// StripeConfig sets Stripe up (PORTAL_STRIPE_SECRET_KEY,
// PORTAL_STRIPE_WEBHOOK_SECRET, --stripe-payment-methods).
type StripeConfig struct {
	SecretKey     string
	WebhookSecret string
	// PaymentMethods Checkout offers (card, alipay, wechat_pay).
	PaymentMethods []string
	// APIURL replaces https://api.stripe.com (tests run a fake there).
	APIURL string
	// HTTPClient calls Stripe (default: one with a 20 s timeout).
	HTTPClient *http.Client
}

// stripeProvider takes top-ups through Stripe Checkout in CNY: a Checkout
// Session per top-up (its id is the top-up's provider reference, the
// top-up's id in its metadata), credited by the signed
// checkout.session.completed (paid) or async_payment_succeeded event, or
// by reconciliation asking Stripe; refunds go back to the payment intent.
type stripeProvider struct {
	client  *stripe.Client
	secret  string
	methods []string
}

func newStripeProvider(cfg StripeConfig) *stripeProvider {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 20 * time.Second}
	}
	bc := &stripe.BackendConfig{HTTPClient: hc, LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}, MaxNetworkRetries: stripe.Int64(2)}
	if cfg.APIURL != "" {
		bc.URL = stripe.String(strings.TrimRight(cfg.APIURL, "/"))
	}
	methods := cfg.PaymentMethods
	if len(methods) == 0 {
		methods = []string{"card", "alipay", "wechat_pay"}
	}
	return &stripeProvider{
		client:  stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc))),
		secret:  cfg.WebhookSecret,
		methods: methods,
	}
}

func (*stripeProvider) Name() string { return gpuportal.StripePayProvider }

func (p *stripeProvider) Checkout(ctx context.Context, t gpuportal.TopUp, returnURL string) (string, string, error) {
	params := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String("payment"),
		ClientReferenceID: stripe.String(strconv.FormatInt(t.ID, 10)),
		Metadata:          map[string]string{"topup_id": strconv.FormatInt(t.ID, 10), "user_id": strconv.FormatInt(t.UserID, 10)},
		SuccessURL:        stripe.String(returnURL),
		CancelURL:         stripe.String(returnURL),
		// Stripe keeps a session at least 30 minutes; the top-up lapses
		// then too (a payment that still comes is credited all the same).
		ExpiresAt: stripe.Int64(t.ExpiresAt.Add(time.Minute).Unix()),
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripe.String("cny"),
				UnitAmount:  stripe.Int64(int64(t.Amount)),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String(fmt.Sprintf("gpuportal top-up #%d", t.ID))},
			},
		}},
		PaymentMethodTypes: stripe.StringSlice(p.methods),
	}
	for _, m := range p.methods {
		if m == "wechat_pay" {
			params.PaymentMethodOptions = &stripe.CheckoutSessionCreatePaymentMethodOptionsParams{
				WeChatPay: &stripe.CheckoutSessionCreatePaymentMethodOptionsWeChatPayParams{Client: stripe.String("web")},
			}
		}
	}
	// One session per top-up, however often this is retried.
	params.SetIdempotencyKey(fmt.Sprintf("gpuportal-topup-%d", t.ID))
	cs, err := p.client.V1CheckoutSessions.Create(ctx, params)
	if err != nil {
		return "", "", unreachable(err)
	}
	return cs.URL, cs.ID, nil
}

// unreachable is the customer's answer when Stripe cannot be asked now.
func unreachable(err error) error {
	var se *stripe.Error
	if errors.As(err, &se) && se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500 {
		return fmt.Errorf("stripe refused: %w", err) // the portal's fault: logged as internal
	}
	return fmt.Errorf("%w (%s)", gpuportal.Errorf(gpuportal.EUNAVAILABLE, "The payment provider cannot be reached right now; nothing was charged. Please try again in a few minutes."), err.Error())
}

// Event checks the Stripe-Signature header (and its age) with the
// webhook's signing secret, and reads a paid Checkout Session or refunds'
// outcomes (refund.created/updated/failed, charge.refunded).
func (p *stripeProvider) Event(body []byte, header http.Header) (providerEvent, error) {
	e, err := webhook.ConstructEventWithOptions(body, header.Get("Stripe-Signature"), p.secret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		return providerEvent{}, gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "The Stripe signature is missing, wrong or too old.")
	}
	if e.Data == nil {
		return providerEvent{}, gpuportal.Errorf(gpuportal.EINVALID, "The event carries no object.")
	}
	switch e.Type {
	case "checkout.session.completed", "checkout.session.async_payment_succeeded":
	case "refund.created", "refund.updated", "refund.failed", "charge.refund.updated":
		var r stripe.Refund
		if json.Unmarshal(e.Data.Raw, &r) != nil {
			return providerEvent{}, gpuportal.Errorf(gpuportal.EINVALID, "The event carries no refund.")
		}
		return providerEvent{Refunds: refundUpdates([]*stripe.Refund{&r})}, nil
	case "charge.refunded":
		var ch stripe.Charge
		if json.Unmarshal(e.Data.Raw, &ch) != nil {
			return providerEvent{}, gpuportal.Errorf(gpuportal.EINVALID, "The event carries no charge.")
		}
		if ch.Refunds == nil {
			return providerEvent{}, nil
		}
		return providerEvent{Refunds: refundUpdates(ch.Refunds.Data)}, nil
	default:
		return providerEvent{}, nil // nothing the portal acts on
	}
	var cs stripe.CheckoutSession
	if json.Unmarshal(e.Data.Raw, &cs) != nil {
		return providerEvent{}, gpuportal.Errorf(gpuportal.EINVALID, "The event carries no Checkout Session.")
	}
	if cs.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid {
		return providerEvent{}, nil // an async method (Alipay, WeChat Pay) still on its way
	}
	ev, err := paymentOf(&cs)
	return providerEvent{Payment: ev}, err
}

// refundUpdates are the outcomes of those refunds this portal made (its
// metadata names the part); others are left out.
func refundUpdates(list []*stripe.Refund) []gpuportal.RefundUpdate {
	var out []gpuportal.RefundUpdate
	for _, r := range list {
		if u, ok := refundUpdate(r); ok {
			out = append(out, u)
		}
	}
	return out
}

// refundUpdate reads one refund: made while Stripe has it (pending and
// requires_action included: the money is on its way), refused once it
// failed or was canceled.
func refundUpdate(r *stripe.Refund) (gpuportal.RefundUpdate, bool) {
	if r == nil {
		return gpuportal.RefundUpdate{}, false
	}
	refundID, err1 := strconv.ParseInt(r.Metadata["refund_id"], 10, 64)
	topUpID, err2 := strconv.ParseInt(r.Metadata["topup_id"], 10, 64)
	if err1 != nil || err2 != nil {
		return gpuportal.RefundUpdate{}, false
	}
	u := gpuportal.RefundUpdate{RefundID: refundID, TopUpID: topUpID, Ref: r.ID, Status: gpuportal.RefundPartMade}
	if r.Status == stripe.RefundStatusFailed || r.Status == stripe.RefundStatusCanceled {
		u.Status, u.Error = gpuportal.RefundPartRefused, fmt.Sprintf("Stripe refund %s %s (%s)", r.ID, r.Status, r.FailureReason)
	}
	return u, true
}

// paymentOf is the payment a paid Checkout Session made.
func paymentOf(cs *stripe.CheckoutSession) (*gpuportal.PaymentEvent, error) {
	id, err := strconv.ParseInt(cs.Metadata["topup_id"], 10, 64)
	if err != nil {
		return nil, gpuportal.Errorf(gpuportal.EINVALID, "Checkout Session %s names no top-up.", cs.ID)
	}
	if !strings.EqualFold(string(cs.Currency), "cny") {
		return nil, gpuportal.Errorf(gpuportal.ECONFLICT, "Checkout Session %s was paid in %s, not CNY.", cs.ID, cs.Currency)
	}
	payment := cs.ID
	if cs.PaymentIntent != nil && cs.PaymentIntent.ID != "" {
		payment = cs.PaymentIntent.ID
	}
	return &gpuportal.PaymentEvent{PaymentID: payment, TopUpID: id, Amount: gpuportal.Fen(cs.AmountTotal), Status: "paid", CheckoutRef: cs.ID}, nil
}

func (p *stripeProvider) Lookup(ctx context.Context, t gpuportal.TopUp) (*gpuportal.PaymentEvent, bool, error) {
	cs, err := p.client.V1CheckoutSessions.Retrieve(ctx, t.ProviderRef, nil)
	if err != nil {
		return nil, false, err
	}
	switch {
	case cs.PaymentStatus == stripe.CheckoutSessionPaymentStatusPaid:
		ev, err := paymentOf(cs)
		return ev, false, err
	case cs.Status == stripe.CheckoutSessionStatusExpired:
		return nil, true, nil
	}
	return nil, false, nil
}

// Refund asks Stripe for one part's refund, with the part's idempotency
// key (the client's own retries and any later ask make one refund) and
// the part in its metadata (webhooks and RefundStatus find it by that).
// Stripe answering 4xx is a refusal — but 409 (the same key in flight)
// and 429 (slow down) leave the outcome unknown, like a timeout or a 5xx.
func (p *stripeProvider) Refund(ctx context.Context, part gpuportal.RefundPart) (string, error) {
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(part.PaymentID), Amount: stripe.Int64(int64(part.Amount))}
	params.AddMetadata("topup_id", strconv.FormatInt(part.TopUpID, 10))
	params.AddMetadata("refund_id", strconv.FormatInt(part.RefundID, 10))
	params.SetIdempotencyKey(part.IdempotencyKey())
	r, err := p.client.V1Refunds.Create(ctx, params)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) && se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500 && se.HTTPStatusCode != http.StatusConflict && se.HTTPStatusCode != http.StatusTooManyRequests {
			return "", refundRefused{err}
		}
		return "", err
	}
	if u, ok := refundUpdate(r); ok && u.Status == gpuportal.RefundPartRefused {
		return "", refundRefused{errors.New(u.Error)}
	}
	return r.ID, nil
}

// RefundStatus lists the payment's refunds and finds the part's by its
// metadata.
func (p *stripeProvider) RefundStatus(ctx context.Context, part gpuportal.RefundPart) (*gpuportal.RefundUpdate, error) {
	for r, err := range p.client.V1Refunds.List(ctx, &stripe.RefundListParams{PaymentIntent: stripe.String(part.PaymentID)}) {
		if err != nil {
			return nil, err
		}
		if u, ok := refundUpdate(r); ok && u.RefundID == part.RefundID && u.TopUpID == part.TopUpID {
			return &u, nil
		}
	}
	return nil, nil
}
