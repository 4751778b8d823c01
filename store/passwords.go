package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// PasswordResetTTL is how long a password reset link works.
const PasswordResetTTL = time.Hour

// EndSessions ends every session of a user (logout everywhere): sessions
// carry the user's session version, and a bumped version no longer matches.
func (db *DB) EndSessions(ctx context.Context, userID int64) error {
	return db.inTx(ctx, "end sessions", func(tx *sql.Tx) error { return bumpSessions(ctx, tx, userID) })
}

func bumpSessions(ctx context.Context, tx *sql.Tx, userID int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE users SET session_version = session_version + 1 WHERE id = ?`, userID)
	return err
}

// ChangePassword sets a new password after checking the current one, and
// ends every session of the user; the caller starts a fresh one for the
// browser that made the change.
func (db *DB) ChangePassword(ctx context.Context, userID int64, current, next string, revokeTokens bool) (*gpuportal.User, error) {
	u, err := db.UserByID(ctx, userID)
	if err != nil {
		return nil, named("read user", err)
	}
	if _, err := db.Authenticate(ctx, u.Email, current); err != nil {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "current_password", "The current password is wrong.")
	}
	var extra func(tx *sql.Tx) error
	if revokeTokens {
		extra = func(tx *sql.Tx) error { return db.endAPITokens(ctx, tx, userID, "password_change") }
	}
	return db.setPassword(ctx, userID, next, extra)
}

// endAPITokens revokes every API token of the user, audits it and tells
// them (why: password_change or password_reset).
func (db *DB) endAPITokens(ctx context.Context, tx *sql.Tx, userID int64, why string) error {
	n, err := db.revokeAllAPITokens(ctx, tx, userID)
	if err != nil || n == 0 {
		return err
	}
	if err := db.audit(ctx, tx, userID, "account.api_tokens_revoked", fmt.Sprintf("user/%d", userID), nil, map[string]any{"tokens": n, "why": why}); err != nil {
		return err
	}
	return db.notify(ctx, tx, userID, gpuportal.NoteTokensRevoked, gpuportal.NoteParams{Count: int(n), Reason: why})
}

// setPassword stores a new password hash and bumps the session version,
// inside extra's transaction step when one is given.
func (db *DB) setPassword(ctx context.Context, userID int64, password string, extra func(tx *sql.Tx) error) (*gpuportal.User, error) {
	if err := gpuportal.ValidatePassword(password); err != nil {
		return nil, err
	}
	hash, err := gpuportal.HashPassword(password)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	err = db.inTx(ctx, "set password", func(tx *sql.Tx) error {
		if extra != nil {
			if err := extra(tx); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ?, session_version = session_version + 1 WHERE id = ?`, hash, userID); err != nil {
			return fmt.Errorf("update the hash: %w", err)
		}
		// A reset link issued before the change must not undo it.
		_, err := tx.ExecContext(ctx, `UPDATE password_resets SET used_at = ? WHERE user_id = ? AND used_at IS NULL`, unix(db.Wall.Now()), userID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.UserByID(ctx, userID)
}

// RequestPasswordReset makes a one-time reset link for the account with
// this email and queues it by email. An unknown email does nothing and is
// no error (the form must not reveal which accounts exist); without email
// configured the user is pointed to an admin, who can issue the link.
func (db *DB) RequestPasswordReset(ctx context.Context, email string) error {
	// Asked before the account is looked up: the answer must be the same
	// for an address that has an account and one that has none.
	if !db.Channels[gpuportal.ChannelEmail] {
		return gpuportal.Errorf(gpuportal.ECONFLICT, "This portal cannot send email; please ask an administrator for a password reset link.")
	}
	u, err := db.UserByEmail(ctx, email)
	if gpuportal.ErrorCode(err) == gpuportal.ENOTFOUND {
		return nil // the same answer
	} else if err != nil {
		return err
	}
	// An address never verified gets the link too (whoever missed the
	// first mail is not locked out; following the link verifies it), but
	// at most PasswordResetsPerHour of them: a sign-up with somebody
	// else's address cannot make the portal flood it.
	return db.inTx(ctx, "request password reset", func(tx *sql.Tx) error {
		var recent int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM notifications WHERE user_id = ? AND kind = ? AND created_at >= ?`,
			u.ID, gpuportal.NotePasswordReset, db.Wall.Now().Add(-time.Hour).Unix()).Scan(&recent); err != nil {
			return err
		}
		if recent >= PasswordResetsPerHour {
			return nil // the same answer again
		}
		// Email only: the link must not sit in the in-app list or an SMS
		// log. The row carries no secret: the dispatcher makes the link
		// (PasswordResetLink) as it sends.
		return db.addToOutbox(ctx, tx, u.ID, gpuportal.NotePasswordReset, "{}", gpuportal.ChannelEmail, u.Email, "pending")
	})
}

// PasswordResetsPerHour bounds the reset links one account is emailed in
// an hour.
const PasswordResetsPerHour = 3

// PasswordResetLink makes a one-time reset link for a user now, for the
// dispatcher to send (its token exists only in the email).
func (db *DB) PasswordResetLink(ctx context.Context, userID int64) (token string, expires time.Time, err error) {
	err = db.inTx(ctx, "password reset link", func(tx *sql.Tx) error {
		token, expires, err = db.newPasswordReset(ctx, tx, userID, 0)
		return err
	})
	return token, expires, err
}

// IssuePasswordReset lets an admin make a reset link for a user (when the
// portal cannot email it); the admin hands it over. Audited.
func (db *DB) IssuePasswordReset(ctx context.Context, actor *gpuportal.User, userID int64) (token string, expires time.Time, err error) {
	if !actor.IsAdmin() {
		return "", time.Time{}, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	u, err := db.UserByID(ctx, userID)
	if err != nil {
		return "", time.Time{}, err
	}
	err = db.inTx(ctx, "issue password reset", func(tx *sql.Tx) error {
		if token, expires, err = db.newPasswordReset(ctx, tx, u.ID, actor.ID); err != nil {
			return err
		}
		return db.audit(ctx, tx, actor.ID, "user.password_reset_link", fmt.Sprintf("user/%d", u.ID), nil, map[string]string{"expires_at": expires.Format(time.RFC3339)})
	})
	return token, expires, err
}

func (db *DB) newPasswordReset(ctx context.Context, tx *sql.Tx, userID, actorID int64) (string, time.Time, error) {
	token := gpuportal.NewSecret("gpr_")
	now := db.Wall.Now()
	expires := now.Add(PasswordResetTTL)
	var by sql.NullInt64
	if actorID != 0 {
		by = sql.NullInt64{Int64: actorID, Valid: true}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO password_resets (token_hash, user_id, created_at, expires_at, created_by) VALUES (?, ?, ?, ?, ?)`,
		gpuportal.HashSecret(token), userID, unix(now), unix(expires), by); err != nil {
		return "", time.Time{}, fmt.Errorf("password reset: %w", err)
	}
	return token, expires, nil
}

// errResetGone is the one answer to a reset link that is unknown, used or
// expired.
var errResetGone = gpuportal.Errorf(gpuportal.EGONE, "This password reset link has expired or was already used; ask for a new one.")

// CheckPasswordReset tells whether a reset link still works, and whose it is.
func (db *DB) CheckPasswordReset(ctx context.Context, token string) (*gpuportal.User, error) {
	var userID, expires int64
	var used sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT user_id, expires_at, used_at FROM password_resets WHERE token_hash = ?`, gpuportal.HashSecret(token)).Scan(&userID, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && (used.Valid || db.Wall.Now().Unix() >= expires)) {
		return nil, errResetGone
	} else if err != nil {
		return nil, fmt.Errorf("check password reset: %w", err)
	}
	return db.UserByID(ctx, userID)
}

// ResetPassword sets a new password with a reset link, once: the link is
// used up in the same transaction, and every session of the user ends.
func (db *DB) ResetPassword(ctx context.Context, token, password string) (*gpuportal.User, error) {
	u, err := db.CheckPasswordReset(ctx, token)
	if err != nil {
		return nil, err
	}
	return db.setPassword(ctx, u.ID, password, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE password_resets SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?`,
			unix(db.Wall.Now()), gpuportal.HashSecret(token), unix(db.Wall.Now()))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errResetGone // a second use racing the first
		}
		// A link that came by email (not one an admin handed over) proves
		// the address is theirs.
		if _, err := tx.ExecContext(ctx, `UPDATE users SET email_verified_at = ? WHERE id = ? AND email_verified_at IS NULL
			AND EXISTS (SELECT 1 FROM password_resets WHERE token_hash = ? AND created_by IS NULL)`, unix(db.Wall.Now()), u.ID, gpuportal.HashSecret(token)); err != nil {
			return err
		}
		// Whoever needed a reset may have lost more than the password:
		// every API token ends too.
		return db.endAPITokens(ctx, tx, u.ID, "password_reset")
	})
}
