package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// idempotencyTTL is how long a key's answer is kept.
const idempotencyTTL = 24 * time.Hour

// StoredResponse is the first answer to a request with an Idempotency-Key.
type StoredResponse struct {
	Status int
	Body   string
}

// ClaimIdempotencyKey claims a key for a request. It returns nil when the
// request should run now (the key is new), the stored answer when it ran
// before, and a conflict when the key belongs to a different request or to
// one that has not finished (or whose process died while it ran: such a
// request is never run twice; the caller can check its result and retry
// with a new key).
func (db *DB) ClaimIdempotencyKey(ctx context.Context, userID int64, key, fingerprint string) (*StoredResponse, error) {
	if key == "" || len(key) > 255 {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "Idempotency-Key", "The Idempotency-Key header must be 1 to 255 characters.")
	}
	now := db.now()
	var stored *StoredResponse
	err := db.inTx(ctx, "claim idempotency key", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND created_at < ?`,
			userID, key, unix(now.Add(-idempotencyTTL))); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (user_id, key, fingerprint, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (user_id, key) DO NOTHING`, userID, key, fingerprint, unix(now))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var fp string
		var r StoredResponse
		if err := tx.QueryRowContext(ctx, `SELECT fingerprint, status, body FROM idempotency_keys WHERE user_id = ? AND key = ?`, userID, key).
			Scan(&fp, &r.Status, &r.Body); err != nil {
			return err
		}
		if fp != fingerprint {
			return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "Idempotency-Key", "This Idempotency-Key was already used for a different request.")
		}
		if r.Status == 0 {
			return ErrIdempotencyInFlight
		}
		stored = &r
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrIdempotencyInFlight) {
			return nil, err
		}
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
			return nil, fmt.Errorf("claim idempotency key: %w", err)
		}
		return nil, err
	}
	return stored, nil
}

// ErrIdempotencyInFlight: the first request with this key is still
// running (or its process died while it ran); wait for its answer with
// IdempotentAnswer.
var ErrIdempotencyInFlight = gpuportal.FieldErrorf(gpuportal.ECONFLICT, "Idempotency-Key", "A request with this Idempotency-Key is still running or did not finish; check the result before retrying with a new key.")

// IdempotentAnswer is the stored answer of a claimed key, or nil while
// its request still runs.
func (db *DB) IdempotentAnswer(ctx context.Context, userID int64, key string) (*StoredResponse, error) {
	var r StoredResponse
	err := db.write.QueryRowContext(ctx, `SELECT status, body FROM idempotency_keys WHERE user_id = ? AND key = ?`, userID, key).Scan(&r.Status, &r.Body)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && r.Status == 0) {
		return nil, nil // still running (or released: the caller's wait runs out)
	} else if err != nil {
		return nil, fmt.Errorf("idempotent answer: %w", err)
	}
	return &r, nil
}

// FinishIdempotencyKey stores the answer to a claimed key.
func (db *DB) FinishIdempotencyKey(ctx context.Context, userID int64, key string, status int, body string) error {
	_, err := db.write.ExecContext(ctx, `UPDATE idempotency_keys SET status = ?, body = ? WHERE user_id = ? AND key = ?`, status, body, userID, key)
	if err != nil {
		return fmt.Errorf("finish idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey forgets a claimed key whose request surely had no
// effect (503: the store could not write), so that a retry runs it again.
func (db *DB) ReleaseIdempotencyKey(ctx context.Context, userID int64, key string) error {
	_, err := db.write.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND status = 0`, userID, key)
	return err
}
