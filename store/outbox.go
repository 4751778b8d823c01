package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// notify writes a notification to the outbox in the caller's transaction:
// an in-app row always, and email/SMS rows as the user's settings, their
// verified contacts, the hourly limit and the portal's configured
// channels allow. The dispatcher sends them later.
// noteParams is a notification's facts as stored, naming the model as
// customers know it.
func (db *DB) noteParams(ctx context.Context, tx *sql.Tx, p gpuportal.NoteParams) (string, error) {
	if p.Model != "" && p.ModelName == "" {
		if err := tx.QueryRowContext(ctx, `SELECT name FROM models WHERE id = ?`, p.Model).Scan(&p.ModelName); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("notify: %w", err)
		}
	}
	if p.Region != "" && p.RegionName == "" {
		if err := tx.QueryRowContext(ctx, `SELECT name FROM regions WHERE id = ?`, p.Region).Scan(&p.RegionName); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("notify: %w", err)
		}
	}
	raw, err := json.Marshal(p)
	return string(raw), err
}

// notifyInApp writes a notification to the user's in-portal list alone
// (news too frequent or too soon stale for email and SMS).
func (db *DB) notifyInApp(ctx context.Context, tx *sql.Tx, userID int64, kind string, p gpuportal.NoteParams) error {
	params, err := db.noteParams(ctx, tx, p)
	if err != nil {
		return err
	}
	return db.addToOutbox(ctx, tx, userID, kind, params, gpuportal.ChannelApp, "", "sent")
}

func (db *DB) notify(ctx context.Context, tx *sql.Tx, userID int64, kind string, p gpuportal.NoteParams) error {
	if err := db.notifyOne(ctx, tx, userID, kind, p); err != nil {
		return err
	}
	// A team's account reads nothing itself (its members do, acting for
	// it, in the app): its notes go to people too — about an instance, to
	// the member who made it; else to its owners and billing members.
	people, err := teamRecipients(ctx, tx, userID, p.InstanceID)
	if err != nil {
		return err
	}
	for _, person := range people {
		if err := db.notifyOne(ctx, tx, person, kind, p); err != nil {
			return err
		}
	}
	return nil
}

// teamRecipients are the people a team account's note goes to (none for
// a person's account).
func teamRecipients(ctx context.Context, tx *sql.Tx, account, instanceID int64) ([]int64, error) {
	var team int64
	if err := tx.QueryRowContext(ctx, `SELECT id FROM teams WHERE account_id = ? AND deleted_at IS NULL`, account).Scan(&team); errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("notify: team: %w", err)
	}
	if instanceID != 0 {
		var maker sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT i.created_by FROM instances i JOIN team_members m ON m.team_id = ? AND m.user_id = i.created_by WHERE i.id = ?`, team, instanceID).Scan(&maker); err == nil && maker.Valid {
			return []int64{maker.Int64}, nil
		} else if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("notify: the instance's maker: %w", err)
		}
	}
	return scanAll(ctx, tx, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT user_id FROM team_members WHERE team_id = ? AND role IN ('owner', 'billing') ORDER BY user_id`, team)
}

// notifyOne is notify for one account.
func (db *DB) notifyOne(ctx context.Context, tx *sql.Tx, userID int64, kind string, p gpuportal.NoteParams) error {
	var email, phone string
	var wantEmail, wantSMS, emailOK, phoneOK bool
	err := tx.QueryRowContext(ctx, `SELECT email, phone, notify_email, notify_sms, email_verified_at IS NOT NULL, phone_verified_at IS NOT NULL FROM users WHERE id = ?`, userID).
		Scan(&email, &phone, &wantEmail, &wantSMS, &emailOK, &phoneOK)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	// Only verified addresses are written to, and at most MessagesPerHour
	// email and SMS messages an hour: past that it is in-app only.
	wantEmail, wantSMS = wantEmail && emailOK && db.Channels[gpuportal.ChannelEmail], wantSMS && phoneOK && phone != "" && db.Channels[gpuportal.ChannelSMS]
	if wantEmail || wantSMS {
		sent, err := db.messagesSentLastHour(ctx, tx, userID)
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		room := MessagesPerHour - sent
		wantEmail = wantEmail && room > 0
		if wantEmail {
			room--
		}
		wantSMS = wantSMS && room > 0
	}
	params, err := db.noteParams(ctx, tx, p)
	if err != nil {
		return err
	}
	add := func(channel, recipient, status string) error {
		return db.addToOutbox(ctx, tx, userID, kind, params, channel, recipient, status)
	}
	if err := add(gpuportal.ChannelApp, "", "sent"); err != nil {
		return err
	}
	if wantEmail {
		if err := add(gpuportal.ChannelEmail, email, "pending"); err != nil {
			return err
		}
	}
	if wantSMS {
		if err := add(gpuportal.ChannelSMS, phone, "pending"); err != nil {
			return err
		}
	}
	return nil
}

// addToOutbox writes one message for one channel ("sent" for in-app ones,
// which need no delivery; "pending" for the dispatcher).
func (db *DB) addToOutbox(ctx context.Context, tx *sql.Tx, userID int64, kind, params, channel, recipient, status string) error {
	now := db.Wall.Now().Unix()
	var sentAt any // NULL until sent
	if status == "sent" {
		sentAt = now
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO notifications (user_id, kind, params, channel, recipient, status, next_attempt_at, created_at, sent_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, userID, kind, params, channel, recipient, status, now, now, sentAt)
	return err
}

const noteColumns = `id, user_id, kind, params, channel, recipient, status, attempts, last_error, created_at, sent_at, next_attempt_at`

func scanNote(row interface{ Scan(...any) error }) (*gpuportal.Notification, error) {
	var n gpuportal.Notification
	var params string
	var created, next int64
	var sent sql.NullInt64
	if err := row.Scan(&n.ID, &n.UserID, &n.Kind, &params, &n.Channel, &n.Recipient, &n.Status, &n.Attempts, &n.LastError, &created, &sent, &next); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(params), &n.Params); err != nil {
		return nil, fmt.Errorf("notification %d params: %w", n.ID, err)
	}
	n.CreatedAt, n.SentAt, n.NextTry = fromUnix(created), fromNullUnix(sent), fromUnix(next)
	return &n, nil
}

func (db *DB) listNotes(ctx context.Context, query string, args ...any) ([]gpuportal.Notification, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+noteColumns+` FROM notifications WHERE `+query, args...)
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	defer rows.Close()
	out := []gpuportal.Notification{}
	for rows.Next() {
		n, err := scanNote(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *n)
	}
	return out, rows.Err()
}

// InApp lists a user's in-app notifications, newest first.
func (db *DB) InApp(ctx context.Context, userID int64, limit int) ([]gpuportal.Notification, error) {
	return db.InAppPage(ctx, userID, Page{Limit: limit})
}

// InAppPage is a page of a user's in-app notifications, newest first.
func (db *DB) InAppPage(ctx context.Context, userID int64, p Page) ([]gpuportal.Notification, error) {
	if err := db.count(ctx, p, "notifications", "user_id = ? AND channel = 'app'", userID); err != nil {
		return nil, err
	}
	return db.listNotes(ctx, `user_id = ? AND channel = 'app' ORDER BY id DESC LIMIT ? OFFSET ?`, userID, p.Limit, max(0, p.Offset))
}

// UnreadCount is how many in-app notifications a user has not seen: those
// newer than their last visit to the notifications page.
func (db *DB) UnreadCount(ctx context.Context, userID int64) (int, error) {
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM notifications WHERE user_id = ? AND channel = 'app'
		AND id > coalesce((SELECT notifications_seen_id FROM users WHERE id = ?), 0)`, userID, userID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("unread notifications: %w", err)
	}
	return n, nil
}

// MarkNotificationsSeen records that the user has seen every in-app
// notification up to now.
func (db *DB) MarkNotificationsSeen(ctx context.Context, userID int64) error {
	return db.inTx(ctx, "mark notifications seen", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE users SET notifications_seen_id = coalesce((SELECT max(id) FROM notifications WHERE user_id = ? AND channel = 'app'), 0)
			WHERE id = ?`, userID, userID)
		return err
	})
}

// Outbox lists email and SMS notifications for admins, newest first,
// optionally only those with a status.
func (db *DB) Outbox(ctx context.Context, status string, limit int) ([]gpuportal.Notification, error) {
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	return db.OutboxPage(ctx, status, Page{Limit: limit})
}

// OutboxPage is a page of the outbox (status "": every message), newest
// first.
func (db *DB) OutboxPage(ctx context.Context, status string, p Page) ([]gpuportal.Notification, error) {
	if err := db.count(ctx, p, "notifications", "channel <> 'app' AND (? = '' OR status = ?)", status, status); err != nil {
		return nil, err
	}
	return db.listNotes(ctx, `channel <> 'app' AND (? = '' OR status = ?) ORDER BY id DESC LIMIT ? OFFSET ?`, status, status, p.Limit, max(0, p.Offset))
}

// staleSending is how long a claimed message may stay unconfirmed before
// the dispatcher assumes its process died and tries it again (at most that
// one message is then sent twice).
const staleSending = 2 * time.Minute

// DueNotifications returns up to limit messages due for (re)sending.
func (db *DB) DueNotifications(ctx context.Context, now time.Time, limit int) ([]gpuportal.Notification, error) {
	return db.listNotes(ctx, `channel <> 'app' AND ((status = 'pending' AND next_attempt_at <= ?) OR (status = 'sending' AND next_attempt_at <= ?))
		ORDER BY next_attempt_at, id LIMIT ?`, now.Unix(), now.Add(-staleSending).Unix(), limit)
}

// ClaimNotification marks a message as being sent by this dispatcher; false
// if another got it first.
func (db *DB) ClaimNotification(ctx context.Context, id int64, now time.Time) (bool, error) {
	res, err := db.write.ExecContext(ctx, `UPDATE notifications SET status = 'sending', attempts = attempts + 1, next_attempt_at = ?
		WHERE id = ? AND ((status = 'pending' AND next_attempt_at <= ?) OR (status = 'sending' AND next_attempt_at <= ?))`,
		now.Unix(), id, now.Unix(), now.Add(-staleSending).Unix())
	if err != nil {
		return false, fmt.Errorf("claim notification: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// NotificationSent records a delivery.
func (db *DB) NotificationSent(ctx context.Context, id int64, now time.Time) error {
	_, err := db.write.ExecContext(ctx, `UPDATE notifications SET status = 'sent', sent_at = ?, last_error = '' WHERE id = ?`, now.Unix(), id)
	return err
}

// NotificationFailed records a failed attempt: retried at next, or given up
// (status failed, visible to admins) when next is zero.
func (db *DB) NotificationFailed(ctx context.Context, id int64, errText string, next time.Time) error {
	if len(errText) > 500 {
		errText = errText[:500]
	}
	if next.IsZero() {
		_, err := db.write.ExecContext(ctx, `UPDATE notifications SET status = 'failed', last_error = ? WHERE id = ?`, errText, id)
		return err
	}
	_, err := db.write.ExecContext(ctx, `UPDATE notifications SET status = 'pending', last_error = ?, next_attempt_at = ? WHERE id = ?`, errText, next.Unix(), id)
	return err
}

// Resend queues a message again (admin; audited).
func (db *DB) Resend(ctx context.Context, actor *gpuportal.User, id int64) error {
	if !actor.IsAdmin() {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins can resend notifications.")
	}
	return db.inTx(ctx, "resend", func(tx *sql.Tx) error {
		var status, channel string
		err := tx.QueryRowContext(ctx, `SELECT status, channel FROM notifications WHERE id = ?`, id).Scan(&status, &channel)
		if errors.Is(err, sql.ErrNoRows) || channel == gpuportal.ChannelApp {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Notification %d not found.", id)
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE notifications SET status = 'pending', attempts = 0, next_attempt_at = ?, last_error = '' WHERE id = ?`, db.Wall.Now().Unix(), id); err != nil {
			return named("update notifications", err)
		}
		return db.audit(ctx, tx, actor.ID, "notification.resend", fmt.Sprintf("notification/%d", id), map[string]string{"status": status}, map[string]string{"status": "pending"})
	})
}

// NotificationPrefs are a user's channel choices.
type NotificationPrefs struct {
	Email bool `json:"email"`
	SMS   bool `json:"sms"`
}

// Prefs returns a user's notification choices.
func (db *DB) Prefs(ctx context.Context, userID int64) (NotificationPrefs, error) {
	var p NotificationPrefs
	err := db.read.QueryRowContext(ctx, `SELECT notify_email, notify_sms FROM users WHERE id = ?`, userID).Scan(&p.Email, &p.SMS)
	return p, err
}

// SetPrefs changes a user's notification choices.
func (db *DB) SetPrefs(ctx context.Context, userID int64, p NotificationPrefs) error {
	_, err := db.write.ExecContext(ctx, `UPDATE users SET notify_email = ?, notify_sms = ? WHERE id = ?`, p.Email, p.SMS, userID)
	return err
}

// NotificationsSeenUpTo is the last in-app notification the user has seen.
func (db *DB) NotificationsSeenUpTo(ctx context.Context, userID int64) (int64, error) {
	var id int64
	if err := db.read.QueryRowContext(ctx, `SELECT notifications_seen_id FROM users WHERE id = ?`, userID).Scan(&id); err != nil {
		return 0, fmt.Errorf("notifications seen: %w", err)
	}
	return id, nil
}
