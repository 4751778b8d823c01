package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// Refunds of unused balance: a customer asks (RequestRefund), an
// administrator approves (StartRefund: the payout is posted to the ledger
// and spread over the payments it came from, newest first, one kept part
// per payment) and the provider is asked for each part (web);
// SettleRefundPart keeps what the provider did — a part it refused goes
// back into the balance, a part whose outcome is unknown stays pending
// and is asked again (PendingRefundParts) until the provider says. Never
// more than what is unused (balance less what running instances have
// cost so far, credit not counted) or than what came in through
// providers.

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
			part := gpuportal.RefundPart{RefundID: r.ID, TopUpID: t.ID, Provider: t.Provider, PaymentID: t.PaymentID, Amount: share, Status: gpuportal.RefundPartPending}
			parts = append(parts, part)
			if _, err := tx.ExecContext(ctx, `INSERT INTO refund_parts (refund_id, topup_id, provider, payment_id, amount_fen, status, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)`,
				r.ID, t.ID, t.Provider, t.PaymentID, share, unix(db.Wall.Now())); err != nil {
				return named("insert refund part", err)
			}
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

// SettleRefundPart keeps what the provider did with one part of a
// refund: made (its refund id kept), or refused (its money goes back into
// the balance and to its top-up, and the request says why). A part is
// settled once, whoever says first (the approval, the retry, a webhook) —
// but a made refund the provider later reports failed is refused then
// (its money never left). Once no part is pending the request is refunded
// (any made) or failed (none). Settling what is settled already changes
// nothing.
func (db *DB) SettleRefundPart(ctx context.Context, u gpuportal.RefundUpdate) error {
	if u.Status != gpuportal.RefundPartMade && u.Status != gpuportal.RefundPartRefused {
		return gpuportal.Errorf(gpuportal.EINVALID, "A refund part is settled as made or refused, not %q.", u.Status)
	}
	return db.inTx(ctx, "settle refund part", func(tx *sql.Tx) error {
		var p gpuportal.RefundPart
		err := tx.QueryRowContext(ctx, `SELECT refund_id, topup_id, provider, amount_fen, status FROM refund_parts WHERE refund_id = ? AND topup_id = ?`, u.RefundID, u.TopUpID).
			Scan(&p.RefundID, &p.TopUpID, &p.Provider, &p.Amount, &p.Status)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Refund %d has no part for top-up %d.", u.RefundID, u.TopUpID)
		} else if err != nil {
			return named("read refund part", err)
		}
		switch {
		case p.Status == u.Status, p.Status == gpuportal.RefundPartRefused:
			return nil // said before
		case u.Status == gpuportal.RefundPartMade:
			if _, err := tx.ExecContext(ctx, `UPDATE refund_parts SET status = 'made', ref = ?, error = '', updated_at = ? WHERE refund_id = ? AND topup_id = ?`,
				u.Ref, unix(db.Wall.Now()), p.RefundID, p.TopUpID); err != nil {
				return named("update refund part", err)
			}
		default: // refused: the money stays the customer's
			if _, err := tx.ExecContext(ctx, `UPDATE refund_parts SET status = 'refused', error = ?, updated_at = ? WHERE refund_id = ? AND topup_id = ?`,
				u.Error, unix(db.Wall.Now()), p.RefundID, p.TopUpID); err != nil {
				return named("update refund part", err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE topups SET refunded_fen = refunded_fen - ? WHERE id = ?`, p.Amount, p.TopUpID); err != nil {
				return named("update topups", err)
			}
			var userID int64
			if err := tx.QueryRowContext(ctx, `SELECT user_id FROM refund_requests WHERE id = ?`, p.RefundID).Scan(&userID); err != nil {
				return named("read refund request", err)
			}
			topUpID := p.TopUpID
			if err := db.postLedger(ctx, tx, ledgerPost{userID: userID, at: db.now(), kind: gpuportal.LedgerPayout, amount: -p.Amount, topUpID: &topUpID,
				desc: fmt.Sprintf("Refund #%d to top-up #%d refused by %s: back in the balance", p.RefundID, p.TopUpID, p.Provider)}); err != nil {
				return err
			}
		}
		if err := db.audit(ctx, tx, 0, "refund.part_"+u.Status, fmt.Sprintf("refund/%d", p.RefundID), nil,
			map[string]any{"topup_id": p.TopUpID, "ref": u.Ref, "error": u.Error}); err != nil {
			return err
		}
		return db.finishRefundIfSettled(ctx, tx, p.RefundID)
	})
}

// finishRefundIfSettled ends a request whose parts the provider has all
// answered: refunded when any was made, failed when none was.
func (db *DB) finishRefundIfSettled(ctx context.Context, tx *sql.Tx, id int64) error {
	type part struct {
		status, ref, err string
		topUp            int64
	}
	parts, err := scanAll(ctx, tx, func(r *sql.Rows, p *part) error { return r.Scan(&p.status, &p.ref, &p.err, &p.topUp) },
		`SELECT status, ref, error, topup_id FROM refund_parts WHERE refund_id = ? ORDER BY topup_id DESC`, id)
	if err != nil {
		return named("read refund parts", err)
	}
	var refs, errs []string
	for _, p := range parts {
		switch p.status {
		case gpuportal.RefundPartPending:
			return nil // the provider has not said for all of them yet
		case gpuportal.RefundPartMade:
			refs = append(refs, p.ref)
		default:
			errs = append(errs, fmt.Sprintf("top-up #%d: %s", p.topUp, p.err))
		}
	}
	status := gpuportal.RefundRefunded
	if len(refs) == 0 {
		status = gpuportal.RefundFailed
	}
	if _, err := tx.ExecContext(ctx, `UPDATE refund_requests SET status = ?, refs = ?, error = ? WHERE id = ?`, status, strings.Join(refs, ","), strings.Join(errs, "; "), id); err != nil {
		return named("update refund_requests", err)
	}
	return nil
}

// RefundPartUnknown records that asking the provider about a part gave no
// answer (a timeout, a 5xx): the part stays pending, to be asked again.
func (db *DB) RefundPartUnknown(ctx context.Context, refundID, topUpID int64, why string) error {
	return db.inTx(ctx, "refund part unknown", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE refund_parts SET attempts = attempts + 1, error = ?, updated_at = ? WHERE refund_id = ? AND topup_id = ? AND status = 'pending'`,
			why, unix(db.Wall.Now()), refundID, topUpID)
		return err
	})
}

// PendingRefundParts are the parts still waiting for their provider's
// answer and not touched since before (real time): the approval that was
// asking crashed or got no answer. Oldest first, at most limit.
func (db *DB) PendingRefundParts(ctx context.Context, before time.Time, limit int) ([]gpuportal.RefundPart, error) {
	return scanAll(ctx, db.read, func(r *sql.Rows, p *gpuportal.RefundPart) error {
		return r.Scan(&p.RefundID, &p.TopUpID, &p.Provider, &p.PaymentID, &p.Amount, &p.Status, &p.Ref, &p.Error, &p.Attempts)
	}, `SELECT refund_id, topup_id, provider, payment_id, amount_fen, status, ref, error, attempts FROM refund_parts WHERE status = 'pending' AND updated_at < ?
		ORDER BY updated_at LIMIT ?`, unix(before), limit)
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
