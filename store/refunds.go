package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gpuportal"
)

// Refunds of unused balance: a customer asks (RequestRefund), an
// administrator approves (StartRefund: the payout is posted to the ledger
// and spread over the payments it came from, newest first) and the
// provider is asked for each share (web); FinishRefund keeps what the
// provider did — a share it refused goes back into the balance. Never more
// than what is unused (balance less what running instances have cost so
// far, credit not counted) or than what came in through providers.

const refundColumns = `id, user_id, amount_fen, note, status, created_at, decided_at, refs, error`

func scanRefund(row interface{ Scan(...any) error }) (*gpuportal.RefundRequest, error) {
	var r gpuportal.RefundRequest
	var created int64
	var decided sql.NullInt64
	if err := row.Scan(&r.ID, &r.UserID, &r.Amount, &r.Note, &r.Status, &created, &decided, &r.Refs, &r.Error); err != nil {
		return nil, err
	}
	r.CreatedAt, r.DecidedAt = fromUnix(created), fromNullUnix(decided)
	return &r, nil
}

// refundable is what of a user's money can go back now: the unused
// balance, and no more than what providers paid in and was not refunded.
func (db *DB) refundable(ctx context.Context, q queryer, userID int64) (gpuportal.Fen, error) {
	b, err := db.balanceIn(ctx, q, userID, db.now())
	if err != nil {
		return 0, err
	}
	var paidIn gpuportal.Fen
	if err := q.QueryRowContext(ctx, `SELECT coalesce(sum(amount_fen - refunded_fen), 0) FROM topups WHERE user_id = ? AND status = 'paid'`, userID).Scan(&paidIn); err != nil {
		return 0, fmt.Errorf("paid top-ups: %w", err)
	}
	return max(0, min(b.Balance-b.Held, paidIn)), nil
}

// RequestRefund asks for amount of the user's unused balance back.
func (db *DB) RequestRefund(ctx context.Context, user *gpuportal.User, amount gpuportal.Fen, note string) (*gpuportal.RefundRequest, error) {
	note = strings.TrimSpace(note)
	if amount < gpuportal.MinTopUp || amount > gpuportal.MaxTopUp {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "amount_fen", "A refund is %s to %s.", gpuportal.MinTopUp.String(), gpuportal.MaxTopUp.String())
	}
	if len(note) > 500 {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "note", "The note is at most 500 characters.")
	}
	var id int64
	err := db.inTx(ctx, "request refund", func(tx *sql.Tx) error {
		var open int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM refund_requests WHERE user_id = ? AND status IN ('requested', 'refunding')`, user.ID).Scan(&open); err != nil {
			return named("read refund_requests", err)
		}
		if open > 0 {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "A refund request of yours is waiting already; it is answered first.")
		}
		can, err := db.refundable(ctx, tx, user.ID)
		if err != nil {
			return err
		}
		if amount > can {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "amount_fen", "At most %s can go back: what is unused of what you paid in.", can.String())
		}
		return tx.QueryRowContext(ctx, `INSERT INTO refund_requests (user_id, amount_fen, note, status, created_at) VALUES (?, ?, ?, 'requested', ?) RETURNING id`,
			user.ID, amount, note, unix(db.now())).Scan(&id)
	})
	if err != nil {
		return nil, err
	}
	return db.RefundRequest(ctx, user, id)
}

// RefundRequest is one request (the owner's, or any for an admin).
func (db *DB) RefundRequest(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.RefundRequest, error) {
	r, err := scanRefund(db.write.QueryRowContext(ctx, `SELECT `+refundColumns+` FROM refund_requests WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !user.CanSee(r.UserID)) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Refund request %d not found.", id)
	}
	return r, err
}

// RefundRequests lists the user's requests, newest first; for an admin
// with all set, everybody's (of status, "" any).
func (db *DB) RefundRequests(ctx context.Context, user *gpuportal.User, all bool, status string, p Page) ([]gpuportal.RefundRequest, error) {
	where, args := "user_id = ?", []any{user.ID}
	if all {
		if !user.IsAdmin() {
			return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
		}
		where, args = "1 = 1", nil
	}
	if status != "" {
		where += " AND status = ?"
		args = append(args, status)
	}
	if err := db.count(ctx, p, "refund_requests", where, args...); err != nil {
		return nil, err
	}
	list, err := scanEach(ctx, db.read, scanRefund, `SELECT `+refundColumns+` FROM refund_requests WHERE `+where+` ORDER BY id DESC LIMIT ? OFFSET ?`, append(args, p.Limit, max(0, p.Offset))...)
	if err != nil {
		return nil, fmt.Errorf("refund requests: %w", err)
	}
	return values(list), nil
}

// StartRefund approves a request: the payout leaves the balance now (in
// the ledger), spread over the user's paid top-ups newest first; the
// caller asks each share's provider to refund it and then calls
// FinishRefund. Audited.
func (db *DB) StartRefund(ctx context.Context, actor *gpuportal.User, id int64) (*gpuportal.RefundRequest, []gpuportal.RefundPart, error) {
	if !actor.IsAdmin() {
		return nil, nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	var parts []gpuportal.RefundPart
	err := db.inTx(ctx, "start refund", func(tx *sql.Tx) error {
		r, err := scanRefund(tx.QueryRowContext(ctx, `SELECT `+refundColumns+` FROM refund_requests WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Refund request %d not found.", id)
		} else if err != nil {
			return err
		}
		if r.Status != gpuportal.RefundRequested {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Refund request %d is %s already.", id, r.Status)
		}
		if err := db.lockAccount(ctx, tx, r.UserID); err != nil {
			return named("lock account", err)
		}
		can, err := db.refundable(ctx, tx, r.UserID)
		if err != nil {
			return err
		}
		if r.Amount > can {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Only %s of the account is unused now; the request is for %s.", can.String(), r.Amount.String())
		}
		topups, err := scanEach(ctx, tx, scanTopUp, `SELECT `+topUpColumns+` FROM topups WHERE user_id = ? AND status = 'paid' AND amount_fen > refunded_fen ORDER BY id DESC`, r.UserID)
		if err != nil {
			return named("read topups", err)
		}
		left := make([]gpuportal.Fen, len(topups))
		for k, t := range topups {
			left[k] = t.Amount - t.Refunded
		}
		shares, rest := gpuportal.RefundSplit(r.Amount, left)
		if rest > 0 {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Only %s came in through payment providers and can go back that way.", (r.Amount - rest).String())
		}
		now := db.now()
		for k, share := range shares {
			if share == 0 {
				continue
			}
			t := topups[k]
			parts = append(parts, gpuportal.RefundPart{TopUpID: t.ID, Provider: t.Provider, PaymentID: t.PaymentID, Amount: share})
			if _, err := tx.ExecContext(ctx, `UPDATE topups SET refunded_fen = refunded_fen + ? WHERE id = ?`, share, t.ID); err != nil {
				return named("update topups", err)
			}
			if err := db.postLedger(ctx, tx, ledgerPost{userID: r.UserID, at: now, kind: gpuportal.LedgerPayout, amount: share, topUpID: &t.ID,
				desc: fmt.Sprintf("Refund #%d of unused balance to top-up #%d (%s)", r.ID, t.ID, t.Provider)}); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE refund_requests SET status = 'refunding', decided_by = ?, decided_at = ? WHERE id = ?`, actor.ID, unix(now), r.ID); err != nil {
			return named("update refund_requests", err)
		}
		return db.audit(ctx, tx, actor.ID, "refund.approve", fmt.Sprintf("refund/%d", r.ID), map[string]any{"status": r.Status}, map[string]any{"status": gpuportal.RefundRefunding, "parts": parts})
	})
	if err != nil {
		return nil, nil, err
	}
	r, err := db.RefundRequest(ctx, actor, id)
	return r, parts, err
}

// FinishRefund keeps what the providers did with a refund's shares: each
// made one is recorded; one refused goes back into the balance (and to its
// top-up), and the request says why.
func (db *DB) FinishRefund(ctx context.Context, id int64, parts []gpuportal.RefundPart) (*gpuportal.RefundRequest, error) {
	err := db.inTx(ctx, "finish refund", func(tx *sql.Tx) error {
		r, err := scanRefund(tx.QueryRowContext(ctx, `SELECT `+refundColumns+` FROM refund_requests WHERE id = ?`, id))
		if err != nil {
			return named("read refund_requests", err)
		}
		if r.Status != gpuportal.RefundRefunding {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Refund request %d is %s.", id, r.Status)
		}
		var refs, errs []string
		now := db.now()
		for _, p := range parts {
			if p.Error == "" {
				refs = append(refs, p.Ref)
				continue
			}
			errs = append(errs, fmt.Sprintf("top-up #%d: %s", p.TopUpID, p.Error))
			if _, err := tx.ExecContext(ctx, `UPDATE topups SET refunded_fen = refunded_fen - ? WHERE id = ?`, p.Amount, p.TopUpID); err != nil {
				return named("update topups", err)
			}
			topUpID := p.TopUpID
			if err := db.postLedger(ctx, tx, ledgerPost{userID: r.UserID, at: now, kind: gpuportal.LedgerPayout, amount: -p.Amount, topUpID: &topUpID,
				desc: fmt.Sprintf("Refund #%d to top-up #%d refused by %s: back in the balance", r.ID, p.TopUpID, p.Provider)}); err != nil {
				return err
			}
		}
		status := gpuportal.RefundRefunded
		if len(refs) == 0 {
			status = gpuportal.RefundFailed
		}
		raw, _ := json.Marshal(parts)
		if _, err := tx.ExecContext(ctx, `UPDATE refund_requests SET status = ?, refs = ?, error = ? WHERE id = ?`, status, strings.Join(refs, ","), strings.Join(errs, "; "), r.ID); err != nil {
			return named("update refund_requests", err)
		}
		return db.audit(ctx, tx, 0, "refund.finish", fmt.Sprintf("refund/%d", r.ID), nil, json.RawMessage(raw))
	})
	if err != nil {
		return nil, err
	}
	return db.RefundRequest(ctx, &gpuportal.User{Role: gpuportal.RoleAdmin}, id)
}

// RejectRefund turns a request down. Audited.
func (db *DB) RejectRefund(ctx context.Context, actor *gpuportal.User, id int64, why string) (*gpuportal.RefundRequest, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	err := db.inTx(ctx, "reject refund", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE refund_requests SET status = 'rejected', decided_by = ?, decided_at = ?, error = ? WHERE id = ? AND status = 'requested'`,
			actor.ID, unix(db.now()), strings.TrimSpace(why), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Refund request %d is not waiting for a decision.", id)
		}
		return db.audit(ctx, tx, actor.ID, "refund.reject", fmt.Sprintf("refund/%d", id), nil, map[string]string{"why": why})
	})
	if err != nil {
		return nil, err
	}
	return db.RefundRequest(ctx, actor, id)
}
