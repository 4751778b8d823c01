package webhooks

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"gpuportal"
	"gpuportal/store"
)

// NewClient is the HTTP client deliveries go through: no proxy from the
// environment, no redirects followed, 10 s for the whole answer, and —
// unless allowPrivate — a dialer that refuses every address that is not
// public.
func NewClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: gpuportal.WebhookTimeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = refusePrivate
	}
	return &http.Client{
		Timeout: gpuportal.WebhookTimeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			TLSHandshakeTimeout: gpuportal.WebhookTimeout,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Deliverer sends due deliveries.
type Deliverer struct {
	DB     *store.DB
	Client *http.Client // NewClient's
	Wall   gpuportal.Clock
	Log    *slog.Logger
	// Workers bounds the deliveries in flight (default 16): a slow
	// endpoint holds one worker for at most its 10 s.
	Workers int
	// Every is how often it looks for due endpoints (default 200 ms, so
	// an event reaches a healthy endpoint well within a second).
	Every time.Duration
}

func (d *Deliverer) defaults() {
	if d.Workers == 0 {
		d.Workers = 16
	}
	if d.Every == 0 {
		d.Every = 200 * time.Millisecond
	}
	if d.Wall == nil {
		d.Wall = gpuportal.RealClock{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Client == nil {
		d.Client = NewClient(false)
	}
}

// Run delivers until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	d.defaults()
	slots := make(chan struct{}, d.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(d.Every)
	defer t.Stop()
	for {
		due, err := d.DB.DueWebhooks(ctx, d.Wall.Now(), d.Workers)
		if err != nil && ctx.Err() == nil {
			d.Log.Error("webhook deliveries", "err", err)
		}
		for _, id := range due {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				if _, err := d.deliverNext(ctx, id, turnLength); err != nil && ctx.Err() == nil {
					d.Log.Error("webhook delivery", "webhook", id, "err", err)
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DeliverOnce sends one delivery of each endpoint due now, one after
// another, and returns how many were attempted (tests; the admin's
// "send now").
func (d *Deliverer) DeliverOnce(ctx context.Context) (int, error) {
	d.defaults()
	due, err := d.DB.DueWebhooks(ctx, d.Wall.Now(), 1000)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range due {
		sent, err := d.deliverNext(ctx, id, 1)
		if err != nil {
			return n, err
		}
		n += sent
	}
	return n, nil
}

// turnLength is how many deliveries an endpoint that answers gets in a
// row before the worker looks at others: a busy endpoint keeps up with
// its events, and one endpoint cannot hold a worker for ever.
const turnLength = 100

// deliverNext claims an endpoint and posts its oldest deliveries, one
// at a time, recording each answer, until one fails, none is left or
// max were sent; it returns how many it sent.
func (d *Deliverer) deliverNext(ctx context.Context, webhookID int64, max int) (int, error) {
	sent := 0
	for sent < max && ctx.Err() == nil {
		delivery, err := d.DB.ClaimDelivery(ctx, webhookID, d.Wall.Now())
		if err != nil || delivery == nil {
			return sent, err
		}
		sent++
		result := d.post(ctx, delivery)
		// Recorded even when ctx ended meanwhile: what was sent is known.
		if err := d.DB.FinishDelivery(context.WithoutCancel(ctx), delivery, result, d.Wall.Now()); err != nil {
			return sent, err
		}
		if !result.Delivered() {
			d.Log.Info("webhook delivery failed", "webhook", webhookID, "delivery", delivery.ID, "status", result.StatusCode, "err", result.Error)
			return sent, nil // the endpoint backs off
		}
	}
	return sent, nil
}

// post sends one delivery: the event's JSON, its id and signature in the
// headers.
func (d *Deliverer) post(ctx context.Context, w *gpuportal.WebhookDelivery) store.DeliveryResult {
	body, err := gpuportal.WebhookBody(w.EventID, w.Type, w.CreatedAt, w.Data)
	if err != nil {
		return store.DeliveryResult{Error: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return store.DeliveryResult{Error: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gpuportal-webhooks/1")
	req.Header.Set("Gpuportal-Event-Id", strconv.FormatInt(w.EventID, 10))
	req.Header.Set("Gpuportal-Event-Type", w.Type)
	req.Header.Set("Gpuportal-Signature", gpuportal.SignWebhook(w.Secret, d.Wall.Now(), body))
	resp, err := d.Client.Do(req)
	if err != nil {
		return store.DeliveryResult{Error: err.Error()}
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, gpuportal.WebhookResponseKeep))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return store.DeliveryResult{StatusCode: resp.StatusCode, Response: string(head)}
}
