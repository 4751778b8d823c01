// Package notify delivers the notification outbox: a dispatcher picks due
// messages, renders them in the user's language, sends them by email
// (SMTP) or SMS (a signed HTTP gateway), retries failures with exponential
// backoff and gives up after a bound, leaving the failure for admins. Each
// message is claimed, sent and then marked sent, one at a time, so a crash
// can resend at most the one message that was in flight.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gpuportal"
	"gpuportal/ics"
	"gpuportal/store"
)

// Dispatcher sends the outbox.
type Dispatcher struct {
	DB       *store.DB
	Email    Sender // nil: email is not configured
	SMS      Sender // nil: SMS is not configured
	Wall     gpuportal.Clock
	Log      *slog.Logger
	BaseURL  string
	Location *time.Location

	MaxAttempts int           // then give up (default 8)
	Backoff     time.Duration // first retry delay, doubling (default 5 s)
	MaxBackoff  time.Duration // default 10 min
	Every       time.Duration // how often to look (default 1 s)
}

func (d *Dispatcher) defaults() {
	if d.MaxAttempts == 0 {
		d.MaxAttempts = 8
	}
	if d.Backoff == 0 {
		d.Backoff = 5 * time.Second
	}
	if d.MaxBackoff == 0 {
		d.MaxBackoff = 10 * time.Minute
	}
	if d.Every == 0 {
		d.Every = time.Second
	}
	if d.Wall == nil {
		d.Wall = gpuportal.RealClock{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Location == nil {
		d.Location = time.UTC
	}
}

// Run dispatches until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) {
	d.defaults()
	t := time.NewTicker(d.Every)
	defer t.Stop()
	for {
		if _, err := d.DispatchOnce(ctx); err != nil && ctx.Err() == nil {
			d.Log.Error("notification dispatch", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DispatchOnce sends what is due now and returns how many were sent.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	d.defaults()
	due, err := d.DB.DueNotifications(ctx, d.Wall.Now(), 50)
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, n := range due {
		ok, err := d.DB.ClaimNotification(ctx, n.ID, d.Wall.Now())
		if err != nil {
			return sent, err
		}
		if !ok {
			continue // another dispatcher has it
		}
		n.Attempts++
		if err := d.send(ctx, n); err != nil {
			next := time.Time{}
			if n.Attempts < d.MaxAttempts {
				delay := min(d.Backoff<<(n.Attempts-1), d.MaxBackoff)
				next = d.Wall.Now().Add(delay)
			}
			d.Log.Warn("notification not delivered", "id", n.ID, "channel", n.Channel, "attempt", n.Attempts, "err", err, "given_up", next.IsZero())
			if err := d.DB.NotificationFailed(ctx, n.ID, err.Error(), next); err != nil {
				return sent, err
			}
			continue
		}
		if err := d.DB.NotificationSent(ctx, n.ID, d.Wall.Now()); err != nil {
			return sent, err
		}
		sent++
	}
	return sent, nil
}

func (d *Dispatcher) send(ctx context.Context, n gpuportal.Notification) error {
	lang := gpuportal.LangEnglish
	if u, err := d.DB.UserByID(ctx, n.UserID); err == nil && gpuportal.ValidLang(u.Lang) {
		lang = u.Lang
	}
	// Links and codes are made now: no secret waits in the outbox.
	switch n.Kind {
	case gpuportal.NotePasswordReset:
		token, expires, err := d.DB.PasswordResetLink(ctx, n.UserID)
		if err != nil {
			return fmt.Errorf("make the reset link: %w", err)
		}
		n.Params.Token, n.Params.Expires = token, expires
	case gpuportal.NoteVerifyEmail:
		token, expires, err := d.DB.EmailVerificationLink(ctx, n.UserID)
		if err != nil {
			return fmt.Errorf("make the verification link: %w", err)
		}
		n.Params.Token, n.Params.Expires = token, expires
	case gpuportal.NoteVerifyPhone:
		code, err := d.DB.PhoneVerificationCode(ctx, n.UserID)
		if err != nil {
			return fmt.Errorf("make the verification code: %w", err)
		}
		n.Params.Code = code
	}
	m := Render(n, lang, d.BaseURL, d.Location)
	switch n.Channel {
	case gpuportal.ChannelEmail:
		if d.Email == nil {
			return fmt.Errorf("email is not configured (PORTAL_SMTP_URL)")
		}
		if n.Params.ReservationID != 0 && (n.Kind == gpuportal.NoteBookingConfirmed || n.Kind == gpuportal.NoteWaitlistBooked) {
			if a, err := d.ics(ctx, n.Params.ReservationID, lang); err == nil {
				m.Attachments = append(m.Attachments, a)
			}
		}
		return d.Email.Send(ctx, n.Recipient, m)
	case gpuportal.ChannelSMS:
		if d.SMS == nil {
			return fmt.Errorf("SMS is not configured (PORTAL_SMS_URL)")
		}
		return d.SMS.Send(ctx, n.Recipient, m)
	}
	return fmt.Errorf("unknown channel %q", n.Channel)
}

// ics is a booking's calendar event, attached to its confirmation.
func (d *Dispatcher) ics(ctx context.Context, reservationID int64, lang string) (Attachment, error) {
	r, err := d.DB.Reservation(ctx, &gpuportal.User{Role: gpuportal.RoleAdmin}, reservationID)
	if err != nil {
		return Attachment{}, err
	}
	m, err := d.DB.Model(ctx, r.Model)
	if err != nil {
		return Attachment{}, err
	}
	return Attachment{Name: fmt.Sprintf("reservation-%d.ics", r.ID), ContentType: ics.ContentType,
		Data: []byte(ics.Reservation(r, ics.WordsFor(r, m, lang, d.Location), d.BaseURL))}, nil
}
