package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"gpuportal"
)

// Contact verification: an email address gets a one-time link, a phone a
// six-digit code; until then nothing else is sent to them (a sign-up with
// somebody else's address is no way to mail them). The link and the code
// are made by the dispatcher as it sends them (EmailVerificationLink,
// PhoneVerificationCode): no secret waits in the outbox.

const (
	emailVerificationTTL = 48 * time.Hour
	phoneCodeTTL         = 10 * time.Minute
	phoneCodeTries       = 5
	// verificationsPerHour bounds the verification messages one account
	// can have sent, each kind.
	verificationsPerHour = 3
	// MessagesPerHour bounds the email and SMS messages one account is
	// sent an hour; past it, notifications are in-app only.
	MessagesPerHour = 30
)

// SetContactsVerified marks a user's email and phone verified: for
// accounts an operator vouches for (the admin that PORTAL_ADMIN_EMAIL
// makes, the demo's seed) and for tests.
func (db *DB) SetContactsVerified(ctx context.Context, userID int64) error {
	now := unix(db.Wall.Now())
	_, err := db.write.ExecContext(ctx, `UPDATE users SET email_verified_at = coalesce(email_verified_at, CAST(? AS BIGINT)),
		phone_verified_at = CASE WHEN phone <> '' THEN coalesce(phone_verified_at, CAST(? AS BIGINT)) END WHERE id = ?`, now, now, userID)
	if err != nil {
		return fmt.Errorf("mark contacts verified: %w", err)
	}
	return nil
}

// verificationsSent counts the verification messages of kind the user was
// sent in the last hour.
func (db *DB) verificationsSent(ctx context.Context, q queryer, userID int64, kind string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM notifications WHERE user_id = ? AND kind = ? AND created_at >= ?`,
		userID, kind, db.Wall.Now().Add(-time.Hour).Unix()).Scan(&n)
	return n, err
}

// SendEmailVerification queues the link that verifies the user's email
// (at most verificationsPerHour an hour).
func (db *DB) SendEmailVerification(ctx context.Context, userID int64) error {
	return db.inTx(ctx, "send email verification", func(tx *sql.Tx) error { return db.queueEmailVerification(ctx, tx, userID) })
}

func (db *DB) queueEmailVerification(ctx context.Context, tx *sql.Tx, userID int64) error {
	var email string
	var verified sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT email, email_verified_at FROM users WHERE id = ?`, userID).Scan(&email, &verified); err != nil {
		return fmt.Errorf("user %d: %w", userID, err)
	}
	if verified.Valid {
		return gpuportal.Errorf(gpuportal.ECONFLICT, "Your email address is verified already.")
	}
	if !db.Channels[gpuportal.ChannelEmail] {
		return gpuportal.Errorf(gpuportal.ECONFLICT, "This portal cannot send email; notifications are in-app only.")
	}
	if n, err := db.verificationsSent(ctx, tx, userID, gpuportal.NoteVerifyEmail); err != nil {
		return err
	} else if n >= verificationsPerHour {
		return gpuportal.Errorf(gpuportal.ERATELIMITED, "A verification email was sent %d times in the last hour; please check your mailbox or try again later.", n)
	}
	return db.addToOutbox(ctx, tx, userID, gpuportal.NoteVerifyEmail, "{}", gpuportal.ChannelEmail, email, "pending")
}

// EmailVerificationLink makes the one-time token that verifies the user's
// present email address, for the dispatcher to send.
func (db *DB) EmailVerificationLink(ctx context.Context, userID int64) (token string, expires time.Time, err error) {
	token = gpuportal.NewSecret("gpv_")
	now := db.Wall.Now()
	expires = now.Add(emailVerificationTTL)
	err = db.inTx(ctx, "email verification link", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO email_verifications (token_hash, user_id, email, created_at, expires_at) SELECT ?, id, email, ?, ? FROM users WHERE id = ?`,
			gpuportal.HashSecret(token), unix(now), unix(expires), userID)
		return err
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return token, expires, nil
}

// VerifyEmail takes a verification link: the address it was sent to is
// verified, if it is still the account's. A used, expired or unknown link
// is gone (410).
func (db *DB) VerifyEmail(ctx context.Context, token string) (*gpuportal.User, error) {
	gone := gpuportal.Errorf(gpuportal.EGONE, "This verification link has expired or was already used; ask for a new one on your settings page.")
	var userID int64
	err := db.inTx(ctx, "verify email", func(tx *sql.Tx) error {
		now := db.Wall.Now()
		var email string
		err := tx.QueryRowContext(ctx, `SELECT v.user_id, v.email FROM email_verifications v JOIN users u ON u.id = v.user_id AND u.email = v.email
			WHERE v.token_hash = ? AND v.used_at IS NULL AND v.expires_at > ?`, gpuportal.HashSecret(token), unix(now)).Scan(&userID, &email)
		if errors.Is(err, sql.ErrNoRows) {
			return gone
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE email_verifications SET used_at = ? WHERE token_hash = ?`, unix(now), gpuportal.HashSecret(token)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE users SET email_verified_at = ? WHERE id = ?`, unix(now), userID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.UserByID(ctx, userID)
}

// SendPhoneCode queues the SMS with a code that verifies the user's phone.
func (db *DB) SendPhoneCode(ctx context.Context, userID int64) error {
	return db.inTx(ctx, "send phone code", func(tx *sql.Tx) error {
		var phone string
		var verified sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT phone, phone_verified_at FROM users WHERE id = ?`, userID).Scan(&phone, &verified); err != nil {
			return fmt.Errorf("user %d: %w", userID, err)
		}
		switch {
		case phone == "":
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "phone", "Add a phone number first.")
		case verified.Valid:
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Your phone number is verified already.")
		case !db.Channels[gpuportal.ChannelSMS]:
			return gpuportal.Errorf(gpuportal.ECONFLICT, "This portal cannot send SMS; notifications are in-app only.")
		}
		if n, err := db.verificationsSent(ctx, tx, userID, gpuportal.NoteVerifyPhone); err != nil {
			return err
		} else if n >= verificationsPerHour {
			return gpuportal.Errorf(gpuportal.ERATELIMITED, "A code was sent %d times in the last hour; please try again later.", n)
		}
		return db.addToOutbox(ctx, tx, userID, gpuportal.NoteVerifyPhone, "{}", gpuportal.ChannelSMS, phone, "pending")
	})
}

// PhoneVerificationCode makes a new six-digit code for the user's phone
// (the last one made is the one that counts), for the dispatcher to send.
func (db *DB) PhoneVerificationCode(ctx context.Context, userID int64) (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	code := fmt.Sprintf("%06d", n.Int64())
	_, err = db.write.ExecContext(ctx, `UPDATE users SET phone_code_hash = ?, phone_code_expires_at = ?, phone_code_tries = 0 WHERE id = ?`,
		gpuportal.HashSecret(fmt.Sprintf("%d:%s", userID, code)), unix(db.Wall.Now().Add(phoneCodeTTL)), userID)
	if err != nil {
		return "", fmt.Errorf("phone code: %w", err)
	}
	return code, nil
}

// VerifyPhone checks a code the user typed: right, the phone is verified;
// wrong, 400 (five tries a code); expired or spent, 410.
func (db *DB) VerifyPhone(ctx context.Context, userID int64, code string) error {
	var wrong bool
	err := db.inTx(ctx, "verify phone", func(tx *sql.Tx) error {
		var hash sql.NullString
		var expires sql.NullInt64
		var tries int
		if err := tx.QueryRowContext(ctx, `SELECT phone_code_hash, phone_code_expires_at, phone_code_tries FROM users WHERE id = ?`, userID).Scan(&hash, &expires, &tries); err != nil {
			return named("read users", err)
		}
		now := db.Wall.Now()
		if !hash.Valid || !expires.Valid || now.Unix() >= expires.Int64 || tries >= phoneCodeTries {
			return gpuportal.Errorf(gpuportal.EGONE, "This code has expired or was tried too often; ask for a new one.")
		}
		if gpuportal.HashSecret(fmt.Sprintf("%d:%s", userID, code)) != hash.String {
			wrong = true
			_, err := tx.ExecContext(ctx, `UPDATE users SET phone_code_tries = phone_code_tries + 1 WHERE id = ?`, userID)
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE users SET phone_verified_at = ?, phone_code_hash = NULL, phone_code_expires_at = NULL WHERE id = ?`, unix(now), userID)
		return err
	})
	if err == nil && wrong {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "code", "That code is not the one we sent.")
	}
	return err
}

// messagesSentLastHour counts the email and SMS messages queued for the
// user in the last hour (verifications aside).
func (db *DB) messagesSentLastHour(ctx context.Context, q queryer, userID int64) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM notifications WHERE user_id = ? AND channel IN ('email', 'sms') AND created_at >= ?
		AND kind NOT IN ('verify_email', 'verify_phone', 'password_reset')`, userID, db.Wall.Now().Add(-time.Hour).Unix()).Scan(&n)
	return n, err
}
