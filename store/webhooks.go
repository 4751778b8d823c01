package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// Webhooks: endpoints, the events written for them in the transaction of
// their cause, and their deliveries. The deliverer (package webhooks)
// claims one endpoint at a time (DueWebhooks, ClaimDelivery), posts its
// oldest delivery and records the answer (FinishDelivery): an endpoint's
// events arrive in order, and a dead one backs off as a whole.

const webhookColumns = `w.id, w.user_id, w.created_by, (SELECT t.id FROM teams t WHERE t.account_id = w.user_id) AS team_id,
	w.url, w.events, w.created_at, w.failures, w.retry_at`

func scanWebhook(row interface{ Scan(...any) error }) (*gpuportal.Webhook, error) {
	var w gpuportal.Webhook
	var events string
	var created, retry int64
	if err := row.Scan(&w.ID, &w.UserID, &w.CreatedBy, &w.TeamID, &w.URL, &events, &created, &w.Failures, &retry); err != nil {
		return nil, err
	}
	w.Events = strings.Split(events, ",")
	w.CreatedAt = fromUnix(created)
	if retry > 0 && w.Failures > 0 {
		t := fromUnix(retry)
		w.RetryAt = &t
	}
	return &w, nil
}

func newWebhookSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "whsec_" + hex.EncodeToString(b)
}

// CreateWebhook adds an endpoint for the user's account (a team's, when
// acting for one) and returns it with its secret, the only time the
// secret is shown. Where the address points is checked by the caller
// (the web layer resolves it); here only its form and the events.
func (db *DB) CreateWebhook(ctx context.Context, user *gpuportal.User, url string, events []string) (*gpuportal.Webhook, error) {
	if err := gpuportal.ValidateWebhook(url, events); err != nil {
		return nil, err
	}
	events = dedupe(events)
	secret := newWebhookSecret()
	var id int64
	err := db.inTx(ctx, "create webhook", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM webhooks WHERE user_id = ? AND deleted_at IS NULL`, user.ID).Scan(&n); err != nil {
			return err
		}
		if n >= gpuportal.MaxWebhooksPerOwner {
			return gpuportal.Errorf(gpuportal.EPOLICY, "An account has at most %d webhooks; delete one first.", gpuportal.MaxWebhooksPerOwner)
		}
		return tx.QueryRowContext(ctx, `INSERT INTO webhooks (user_id, created_by, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			user.ID, user.MemberID(), url, strings.Join(events, ","), secret, db.Wall.Now().Unix()).Scan(&id)
	})
	if err != nil {
		return nil, err
	}
	return db.webhookWithSecret(ctx, user, id, secret)
}

// webhookWithSecret is a webhook as the answer that made it or rolled its
// secret shows it: the one time the secret is.
func (db *DB) webhookWithSecret(ctx context.Context, user *gpuportal.User, id int64, secret string) (*gpuportal.Webhook, error) {
	w, err := db.Webhook(ctx, user, id)
	if err != nil {
		return nil, err
	}
	w.Secret = secret
	return w, nil
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := list[:0:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Webhooks lists the account's endpoints, each with its last few
// deliveries.
func (db *DB) Webhooks(ctx context.Context, user *gpuportal.User) ([]gpuportal.Webhook, error) {
	list, err := scanAll(ctx, db.read, func(r *sql.Rows, w *gpuportal.Webhook) error {
		got, err := scanWebhook(r)
		if err == nil {
			*w = *got
		}
		return err
	}, `SELECT `+webhookColumns+` FROM webhooks w WHERE w.user_id = ? AND w.deleted_at IS NULL ORDER BY w.id`, user.ID)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if list == nil {
		list = []gpuportal.Webhook{}
	}
	for k := range list {
		if list[k].Recent, err = db.deliveries(ctx, list[k].ID, Page{Limit: 5}); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// Webhook is one of the account's endpoints; another's is not_found.
func (db *DB) Webhook(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Webhook, error) {
	return webhookFor(ctx, db.read, user, id)
}

func webhookFor(ctx context.Context, q queryer, user *gpuportal.User, id int64) (*gpuportal.Webhook, error) {
	w, err := scanWebhook(q.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks w WHERE w.id = ? AND w.deleted_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && w.UserID != user.ID) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Webhook %d not found.", id)
	}
	return w, err
}

// DeleteWebhook removes an endpoint; what was still to be sent to it is
// given up.
func (db *DB) DeleteWebhook(ctx context.Context, user *gpuportal.User, id int64) error {
	return db.inTx(ctx, "delete webhook", func(tx *sql.Tx) error {
		if _, err := webhookFor(ctx, tx, user, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET deleted_at = ?, due_at = NULL WHERE id = ?`, db.Wall.Now().Unix(), id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = 'failed', last_error = 'the webhook was deleted', next_attempt_at = 0
			WHERE webhook_id = ? AND status IN ('pending', 'sending')`, id)
		return err
	})
}

// RollWebhookSecret gives an endpoint a new secret (shown once, in the
// answer); deliveries from now on are signed with it.
func (db *DB) RollWebhookSecret(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Webhook, error) {
	secret := newWebhookSecret()
	err := db.inTx(ctx, "roll webhook secret", func(tx *sql.Tx) error {
		if _, err := webhookFor(ctx, tx, user, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE webhooks SET secret = ? WHERE id = ?`, secret, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.webhookWithSecret(ctx, user, id, secret)
}

const deliveryColumns = `d.id, d.webhook_id, d.event_id, e.type, d.status, d.status_code, d.attempts, d.created_at, d.delivered_at,
	d.next_attempt_at, d.last_error, d.response`

func scanDelivery(row interface{ Scan(...any) error }, extra ...any) (*gpuportal.WebhookDelivery, error) {
	var d gpuportal.WebhookDelivery
	var created, next int64
	var delivered, code sql.NullInt64
	dest := append([]any{&d.ID, &d.WebhookID, &d.EventID, &d.Type, &d.Status, &code, &d.Attempts, &created, &delivered, &next, &d.LastError, &d.Response}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	d.CreatedAt, d.DeliveredAt = fromUnix(created), fromNullUnix(delivered)
	if code.Valid {
		c := int(code.Int64)
		d.StatusCode = &c
	}
	if d.Status == gpuportal.DeliveryPending || d.Status == gpuportal.DeliverySending {
		t := fromUnix(next)
		d.NextAttemptAt = &t
	}
	return &d, nil
}

func (db *DB) deliveries(ctx context.Context, webhookID int64, p Page) ([]gpuportal.WebhookDelivery, error) {
	if err := db.count(ctx, p, "webhook_deliveries", "webhook_id = ?", webhookID); err != nil {
		return nil, err
	}
	list, err := scanAll(ctx, db.read, func(r *sql.Rows, d *gpuportal.WebhookDelivery) error {
		got, err := scanDelivery(r)
		if err == nil {
			*d = *got
		}
		return err
	}, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
		WHERE d.webhook_id = ? ORDER BY d.id DESC LIMIT ? OFFSET ?`, webhookID, p.Limit, max(0, p.Offset))
	if err != nil {
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	if list == nil {
		list = []gpuportal.WebhookDelivery{}
	}
	return list, nil
}

// WebhookDeliveries is a page of an endpoint's deliveries, newest first.
func (db *DB) WebhookDeliveries(ctx context.Context, user *gpuportal.User, id int64, p Page) ([]gpuportal.WebhookDelivery, error) {
	if _, err := db.Webhook(ctx, user, id); err != nil {
		return nil, err
	}
	return db.deliveries(ctx, id, p)
}

// Redeliver sends an event to an endpoint again, as a delivery of its
// own, at once (even while the endpoint backs off: a person asked).
func (db *DB) Redeliver(ctx context.Context, user *gpuportal.User, webhookID, deliveryID int64) (*gpuportal.WebhookDelivery, error) {
	var id int64
	err := db.inTx(ctx, "redeliver", func(tx *sql.Tx) error {
		if _, err := webhookFor(ctx, tx, user, webhookID); err != nil {
			return err
		}
		var eventID int64
		err := tx.QueryRowContext(ctx, `SELECT event_id FROM webhook_deliveries WHERE id = ? AND webhook_id = ?`, deliveryID, webhookID).Scan(&eventID)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Delivery %d of webhook %d not found.", deliveryID, webhookID)
		} else if err != nil {
			return err
		}
		id, err = db.enqueueDelivery(ctx, tx, webhookID, eventID, true)
		return err
	})
	if err != nil {
		return nil, err
	}
	return scanDelivery(db.read.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.id = ?`, id))
}

// TestWebhook sends a webhook.test event to one endpoint: the "send test
// event" button.
func (db *DB) TestWebhook(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.WebhookDelivery, error) {
	var deliveryID int64
	err := db.inTx(ctx, "test webhook", func(tx *sql.Tx) error {
		w, err := webhookFor(ctx, tx, user, id)
		if err != nil {
			return err
		}
		data, err := json.Marshal(map[string]any{"webhook_id": w.ID, "url": w.URL, "message": "A test event from gpuportal: your endpoint answers."})
		if err != nil {
			return err
		}
		var eventID int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO webhook_events (user_id, type, data, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
			user.ID, gpuportal.EventWebhookTest, string(data), db.Wall.Now().Unix()).Scan(&eventID); err != nil {
			return err
		}
		deliveryID, err = db.enqueueDelivery(ctx, tx, id, eventID, true)
		return err
	})
	if err != nil {
		return nil, err
	}
	return scanDelivery(db.read.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.id = ?`, deliveryID))
}

// enqueueDelivery adds a delivery and makes its endpoint due: at once
// when now is asked or it has nothing pending, else when it was due
// already (after its backoff).
func (db *DB) enqueueDelivery(ctx context.Context, tx *sql.Tx, webhookID, eventID int64, now bool) (int64, error) {
	at := db.Wall.Now().Unix()
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_id, status, created_at, next_attempt_at) VALUES (?, ?, 'pending', ?, ?) RETURNING id`,
		webhookID, eventID, at, at).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("enqueue delivery: %w", err)
	}
	due := `coalesce(due_at, ?)`
	if now {
		due = `min(coalesce(due_at, ?), CAST(? AS BIGINT))`
		if db.dialect == "postgres" {
			due = `least(coalesce(due_at, ?), CAST(? AS BIGINT))`
		}
		_, err = tx.ExecContext(ctx, `UPDATE webhooks SET due_at = `+due+`, retry_at = 0 WHERE id = ?`, at, at, webhookID)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE webhooks SET due_at = `+due+` WHERE id = ?`, at, webhookID)
	}
	return id, err
}

// emit writes an event for the account's webhooks that listen for its
// type, in the transaction of its cause; data is read only when one
// does (most accounts have none: then one indexed read is the cost).
func (db *DB) emit(ctx context.Context, tx *sql.Tx, account int64, typ string, data func() (any, error)) error {
	hooks, err := scanAll(ctx, tx, func(r *sql.Rows, w *gpuportal.Webhook) error {
		var events string
		if err := r.Scan(&w.ID, &events); err != nil {
			return err
		}
		w.Events = strings.Split(events, ",")
		return nil
	}, `SELECT id, events FROM webhooks WHERE user_id = ? AND deleted_at IS NULL`, account)
	if err != nil {
		return fmt.Errorf("emit %s: %w", typ, err)
	}
	var eventID int64
	for _, w := range hooks {
		if !w.Wants(typ) {
			continue
		}
		if eventID == 0 {
			obj, err := data()
			if err != nil {
				return fmt.Errorf("emit %s: %w", typ, err)
			}
			raw, err := json.Marshal(obj)
			if err != nil {
				return fmt.Errorf("emit %s: %w", typ, err)
			}
			if err := tx.QueryRowContext(ctx, `INSERT INTO webhook_events (user_id, type, data, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
				account, typ, string(raw), db.Wall.Now().Unix()).Scan(&eventID); err != nil {
				return fmt.Errorf("emit %s: %w", typ, err)
			}
		}
		if _, err := db.enqueueDelivery(ctx, tx, w.ID, eventID, false); err != nil {
			return err
		}
	}
	return nil
}

// emitInstance emits an instance event with the instance as GET returns
// it, as the transaction leaves it.
func (db *DB) emitInstance(ctx context.Context, tx *sql.Tx, id int64, typ string) error {
	var account int64
	if err := tx.QueryRowContext(ctx, `SELECT user_id FROM instances WHERE id = ?`, id).Scan(&account); err != nil {
		return fmt.Errorf("emit %s: instance %d: %w", typ, id, err)
	}
	return db.emit(ctx, tx, account, typ, func() (any, error) {
		i, err := scanInstance(tx.QueryRowContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE id = ?`, id))
		if err != nil {
			return nil, err
		}
		list := []*gpuportal.Instance{i}
		if err := db.instanceGPUs(ctx, tx, list); err != nil {
			return nil, err
		}
		if err := db.instanceVolumes(ctx, tx, list); err != nil {
			return nil, err
		}
		if err := instanceLabels(ctx, tx, list); err != nil {
			return nil, err
		}
		db.live(i)
		return i, nil
	})
}

// emitReservation emits a reservation event with the reservation as GET
// returns it.
func (db *DB) emitReservation(ctx context.Context, tx *sql.Tx, id int64, typ string) error {
	var account int64
	if err := tx.QueryRowContext(ctx, `SELECT user_id FROM reservations WHERE id = ?`, id).Scan(&account); err != nil {
		return fmt.Errorf("emit %s: reservation %d: %w", typ, id, err)
	}
	return db.emit(ctx, tx, account, typ, func() (any, error) {
		r, err := scanReservation(tx.QueryRowContext(ctx, `SELECT `+reservationColumns+` FROM reservations WHERE id = ?`, id))
		if err != nil {
			return nil, err
		}
		if err := reservationLabels(ctx, tx, []*gpuportal.Reservation{r}); err != nil {
			return nil, err
		}
		return r, nil
	})
}

// DueWebhooks lists endpoints with something to send now.
func (db *DB) DueWebhooks(ctx context.Context, now time.Time, limit int) ([]int64, error) {
	return scanAll(ctx, db.read, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT id FROM webhooks WHERE due_at IS NOT NULL AND due_at <= ? ORDER BY due_at, id LIMIT ?`, now.Unix(), limit)
}

// staleDelivery is how long a claimed endpoint stays with one deliverer
// before another assumes it died (the delivery is then sent again: at
// least once). Longer than the 10 s an endpoint has to answer.
const staleDelivery = time.Minute

// ClaimDelivery takes an endpoint that is due for this deliverer and
// returns its oldest delivery to send (nil: none, or another deliverer
// has it). A delivery past its 24 hours is given up instead.
func (db *DB) ClaimDelivery(ctx context.Context, webhookID int64, now time.Time) (*gpuportal.WebhookDelivery, error) {
	var out *gpuportal.WebhookDelivery
	err := db.inTx(ctx, "claim delivery", func(tx *sql.Tx) error {
		out = nil
		res, err := tx.ExecContext(ctx, `UPDATE webhooks SET due_at = ? WHERE id = ? AND due_at IS NOT NULL AND due_at <= ? AND deleted_at IS NULL`,
			now.Add(staleDelivery).Unix(), webhookID, now.Unix())
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		var data string
		var url, secret string
		d, err := scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+`, w.url, w.secret, e.data
			FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id JOIN webhooks w ON w.id = d.webhook_id
			WHERE d.webhook_id = ? AND d.status IN ('pending', 'sending') ORDER BY d.id LIMIT 1`, webhookID), &url, &secret, &data)
		if errors.Is(err, sql.ErrNoRows) {
			_, err := tx.ExecContext(ctx, `UPDATE webhooks SET due_at = NULL WHERE id = ?`, webhookID)
			return err
		} else if err != nil {
			return err
		}
		if d.Attempts > 0 && now.Sub(d.CreatedAt) >= gpuportal.WebhookRetryFor {
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = 'failed', last_error = ? WHERE id = ?`,
				"given up after 24 hours: "+d.LastError, d.ID); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE webhooks SET due_at = ? WHERE id = ?`, now.Unix(), webhookID)
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = 'sending', attempts = attempts + 1, next_attempt_at = ? WHERE id = ?`,
			now.Add(staleDelivery).Unix(), d.ID); err != nil {
			return err
		}
		d.Attempts++
		d.Status = gpuportal.DeliverySending
		d.URL, d.Secret, d.Data = url, secret, json.RawMessage(data)
		out = d
		return nil
	})
	return out, err
}

// DeliveryResult is what came of one attempt: the endpoint's status code
// (0: none came), the first KB of its answer, or what went wrong.
type DeliveryResult struct {
	StatusCode int
	Response   string
	Error      string
}

// Delivered reports a 2xx answer.
func (r DeliveryResult) Delivered() bool {
	return r.Error == "" && r.StatusCode >= 200 && r.StatusCode < 300
}

// FinishDelivery records an attempt. A failure backs the whole endpoint
// off (WebhookBackoff of its failures in a row), keeps the delivery for
// another try within its 24 hours, and tells the owner once when the
// endpoint has failed WebhookFailingAfter times in a row.
func (db *DB) FinishDelivery(ctx context.Context, d *gpuportal.WebhookDelivery, r DeliveryResult, now time.Time) error {
	if len(r.Response) > gpuportal.WebhookResponseKeep {
		r.Response = r.Response[:gpuportal.WebhookResponseKeep]
	}
	var code sql.NullInt64
	if r.StatusCode != 0 {
		code = sql.NullInt64{Int64: int64(r.StatusCode), Valid: true}
	}
	if r.Error == "" && !r.Delivered() {
		r.Error = fmt.Sprintf("HTTP %d", r.StatusCode)
	}
	return db.inTx(ctx, "finish delivery", func(tx *sql.Tx) error {
		stillPending := `CASE WHEN EXISTS (SELECT 1 FROM webhook_deliveries WHERE webhook_id = ? AND status = 'pending') THEN CAST(? AS BIGINT) ELSE NULL END`
		if r.Delivered() {
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = 'delivered', status_code = ?, response = ?, last_error = '', delivered_at = ?
				WHERE id = ? AND status = 'sending'`, code, r.Response, now.Unix(), d.ID); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE webhooks SET failures = 0, retry_at = 0, failing_noticed = 0, due_at = `+stillPending+`
				WHERE id = ? AND deleted_at IS NULL`, d.WebhookID, now.Unix(), d.WebhookID)
			return err
		}
		var failures, account int64
		var noticed bool
		var url string
		err := tx.QueryRowContext(ctx, `UPDATE webhooks SET failures = failures + 1 WHERE id = ? AND deleted_at IS NULL
			RETURNING failures, failing_noticed <> 0, user_id, url`, d.WebhookID).Scan(&failures, &noticed, &account, &url)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // deleted meanwhile: its deliveries were given up
		} else if err != nil {
			return err
		}
		retry := now.Add(gpuportal.WebhookBackoff(int(failures)))
		status, next := gpuportal.DeliveryPending, retry.Unix()
		if retry.Sub(d.CreatedAt) > gpuportal.WebhookRetryFor {
			status, next = gpuportal.DeliveryFailed, 0
			r.Error = "given up after 24 hours: " + r.Error
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, status_code = ?, response = ?, last_error = ?, next_attempt_at = ?
			WHERE id = ? AND status = 'sending'`, status, code, r.Response, r.Error, next, d.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET retry_at = ?, due_at = `+stillPending+` WHERE id = ?`,
			retry.Unix(), d.WebhookID, retry.Unix(), d.WebhookID); err != nil {
			return err
		}
		if failures >= gpuportal.WebhookFailingAfter && !noticed {
			if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET failing_noticed = 1 WHERE id = ?`, d.WebhookID); err != nil {
				return err
			}
			return db.notify(ctx, tx, account, gpuportal.NoteWebhookFailing, gpuportal.NoteParams{Subject: url, Reason: r.Error})
		}
		return nil
	})
}
