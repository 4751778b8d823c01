package gpuportal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Webhooks: a customer's endpoint told of events as they happen (DESIGN
// §6, Automation). Each event is written in the transaction of its cause
// and delivered at least once, signed as Stripe signs its own, so the
// verification code customers already have works.

// Webhook event types.
const (
	EventInstanceRunning     = "instance.running"
	EventInstanceRebalance   = "instance.rebalance_recommendation"
	EventInstanceNotice      = "instance.interruption_notice"
	EventInstanceInterrupted = "instance.interrupted"
	EventInstanceStopped     = "instance.stopped"
	EventInstanceFailed      = "instance.failed"
	EventReservationConfirm  = "reservation.confirmed"
	EventReservationStarted  = "reservation.started"
	EventReservationEnding   = "reservation.ending_soon"
	EventReservationEnded    = "reservation.ended"
	EventReservationCancel   = "reservation.cancelled"
	EventWaitlistOffered     = "waitlist.offered"
	EventJobFinished         = "job.finished"
	EventBalanceLow          = "balance.low"
	EventTopUpCredited       = "topup.credited"
	// EventMaintenanceScheduled: a maintenance window touches the
	// account's bookings or instances (data: the window).
	EventMaintenanceScheduled = "maintenance.scheduled"
	// EventWebhookTest is sent only by the "send test event" button, to
	// the one webhook it was pressed for.
	EventWebhookTest = "webhook.test"
)

// WebhookEvents lists the types a webhook may subscribe to ("*": all).
var WebhookEvents = []string{EventInstanceRunning, EventInstanceRebalance, EventInstanceNotice, EventInstanceInterrupted,
	EventInstanceStopped, EventInstanceFailed, EventReservationConfirm, EventReservationStarted, EventReservationEnding,
	EventReservationEnded, EventReservationCancel, EventWaitlistOffered, EventJobFinished, EventBalanceLow, EventTopUpCredited,
	EventMaintenanceScheduled}

// AllEvents subscribes a webhook to every type.
const AllEvents = "*"

// Webhook is one endpoint. Secret is only ever filled in the answer that
// made it or rolled it.
type Webhook struct {
	ID        int64     `json:"id"`
	UserID    int64     `json:"-"`
	TeamID    *int64    `json:"team_id"`
	CreatedBy *int64    `json:"created_by"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Failures counts failed attempts in a row (0 when the last worked);
	// RetryAt is when the endpoint is tried again after them.
	Failures int        `json:"consecutive_failures"`
	RetryAt  *time.Time `json:"retry_at,omitempty"`
	// Recent is the endpoint's last deliveries, for its page.
	Recent []WebhookDelivery `json:"-"`
}

// Wants reports whether the webhook subscribes to an event type.
func (w *Webhook) Wants(typ string) bool {
	return typ == EventWebhookTest || slices.Contains(w.Events, AllEvents) || slices.Contains(w.Events, typ)
}

// WebhookDelivery is one event's way to one endpoint.
type WebhookDelivery struct {
	ID            int64      `json:"id"`
	WebhookID     int64      `json:"webhook_id"`
	EventID       int64      `json:"event_id"`
	Type          string     `json:"type"`
	Status        string     `json:"status"` // pending, sending, delivered, failed
	StatusCode    *int       `json:"status_code"`
	Attempts      int        `json:"attempts"`
	CreatedAt     time.Time  `json:"created_at"`
	DeliveredAt   *time.Time `json:"delivered_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	LastError     string     `json:"last_error,omitempty"`
	Response      string     `json:"response,omitempty"` // the first KB of the endpoint's last answer
	// What the deliverer sends (not listed).
	URL    string          `json:"-"`
	Secret string          `json:"-"`
	Data   json.RawMessage `json:"-"`
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliverySending   = "sending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// Webhook delivery rules (DESIGN: the first retry within 30 s, doubling to
// at most an hour apart, for 24 h; 10 s to answer; 1 KB of it kept).
const (
	WebhookFirstRetry   = 30 * time.Second
	WebhookMaxRetry     = time.Hour
	WebhookRetryFor     = 24 * time.Hour
	WebhookTimeout      = 10 * time.Second
	WebhookResponseKeep = 1024
	// WebhookFailingAfter failed attempts in a row tell the owner once.
	WebhookFailingAfter = 5
	MaxWebhooksPerOwner = 20
)

// WebhookBackoff is how long an endpoint waits after failures failed
// attempts in a row (1: 30 s, then doubling, at most an hour).
func WebhookBackoff(failures int) time.Duration {
	d := WebhookFirstRetry
	for k := 1; k < failures && d < WebhookMaxRetry; k++ {
		d *= 2
	}
	return min(d, WebhookMaxRetry)
}

// WebhookBody is what a delivery posts.
func WebhookBody(eventID int64, typ string, createdAt time.Time, data json.RawMessage) ([]byte, error) {
	return json.Marshal(struct {
		ID        int64           `json:"id"`
		Type      string          `json:"type"`
		CreatedAt time.Time       `json:"created_at"`
		Data      json.RawMessage `json:"data"`
	}{eventID, typ, createdAt.UTC(), data})
}

// SignWebhook is the Gpuportal-Signature header of a body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>", Stripe's
// scheme.
func SignWebhook(secret string, t time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.", t.Unix())
	mac.Write(body)
	return fmt.Sprintf("t=%d,v1=%s", t.Unix(), hex.EncodeToString(mac.Sum(nil)))
}

// ValidateWebhook checks a new webhook's address (its form: where it
// points is the deliverer's rule) and events.
func ValidateWebhook(rawURL string, events []string) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return FieldErrorf(EINVALID, "url", "The webhook's address must be an http:// or https:// URL.")
	}
	if u.User != nil {
		return FieldErrorf(EINVALID, "url", "The webhook's address must not carry a user name or password; check the signature instead.")
	}
	if len(rawURL) > 2000 {
		return FieldErrorf(EINVALID, "url", "The webhook's address is longer than 2000 characters.")
	}
	if len(events) == 0 {
		return FieldErrorf(EINVALID, "events", "Choose at least one event (\"*\" for all).")
	}
	for _, e := range events {
		if e != AllEvents && !slices.Contains(WebhookEvents, e) {
			return FieldErrorf(EINVALID, "events", "Unknown event %q; the events are %s.", e, strings.Join(WebhookEvents, ", "))
		}
	}
	return nil
}

// Labels tag instances, reservations and jobs for finding them again.
type Labels map[string]string

// Label limits (DESIGN: ≤ 16; keys [a-z0-9._/-]{1,63}; values ≤ 255 bytes).
const (
	MaxLabels        = 16
	MaxLabelKey      = 63
	MaxLabelValueLen = 255
)

// ValidateLabels checks labels as given on a create.
func ValidateLabels(l Labels) error {
	if len(l) > MaxLabels {
		return FieldErrorf(EINVALID, "labels", "At most %d labels.", MaxLabels)
	}
	for k, v := range l {
		if !validLabelKey(k) {
			return FieldErrorf(EINVALID, "labels", "Label key %q: 1 to %d of a–z, 0–9, '.', '_', '/', '-'.", k, MaxLabelKey)
		}
		if len(v) > MaxLabelValueLen {
			return FieldErrorf(EINVALID, "labels", "Label %q: the value is longer than %d bytes.", k, MaxLabelValueLen)
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return FieldErrorf(EINVALID, "labels", "Label %q: the value has a control character.", k)
		}
	}
	return nil
}

func validLabelKey(k string) bool {
	if k == "" || len(k) > MaxLabelKey {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '/' || r == '-') {
			return false
		}
	}
	return true
}

// LabelFilter is a list's ?label=k=v filters: every one must match.
type LabelFilter []LabelMatch

// LabelMatch is one k=v.
type LabelMatch struct{ Key, Value string }

// ParseLabelFilter reads ?label= values ("k=v" each).
func ParseLabelFilter(values []string) (LabelFilter, error) {
	var out LabelFilter
	for _, s := range values {
		k, v, ok := strings.Cut(s, "=")
		if !ok || !validLabelKey(k) || len(v) > MaxLabelValueLen {
			return nil, FieldErrorf(EINVALID, "label", "A label filter is key=value (the key 1 to %d of a–z, 0–9, '.', '_', '/', '-'); got %q.", MaxLabelKey, s)
		}
		out = append(out, LabelMatch{k, v})
	}
	if len(out) > MaxLabels {
		return nil, FieldErrorf(EINVALID, "label", "At most %d label filters.", MaxLabels)
	}
	return out, nil
}

// Strings is the filter as a query's values, for links.
func (f LabelFilter) Strings() []string {
	out := make([]string, len(f))
	for k, m := range f {
		out[k] = m.Key + "=" + m.Value
	}
	return out
}
