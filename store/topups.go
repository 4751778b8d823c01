package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

const topUpColumns = `id, user_id, amount_fen, provider, status, coalesce(payment_id, ''), created_at, expires_at, paid_at, coalesce(provider_ref, ''), coalesce(pay_url, ''), refunded_fen`

func scanTopUp(row interface{ Scan(...any) error }) (*gpuportal.TopUp, error) {
	var t gpuportal.TopUp
	var created, expires int64
	var paid sql.NullInt64
	if err := row.Scan(&t.ID, &t.UserID, &t.Amount, &t.Provider, &t.Status, &t.PaymentID, &created, &expires, &paid, &t.ProviderRef, &t.PayURL, &t.Refunded); err != nil {
		return nil, err
	}
	t.CreatedAt, t.ExpiresAt, t.PaidAt = fromUnix(created), fromUnix(expires), fromNullUnix(paid)
	return &t, nil
}

// CreateTopUp starts a top-up: pending until the provider says it is
// paid, for TopUpValidFor.
func (db *DB) CreateTopUp(ctx context.Context, user *gpuportal.User, req gpuportal.TopUpRequest) (*gpuportal.TopUp, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	now := db.now()
	var id int64
	err := db.inTx(ctx, "create top-up", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO topups (user_id, amount_fen, provider, status, created_at, expires_at) VALUES (?, ?, ?, 'pending', ?, ?) RETURNING id`,
			user.ID, req.Amount, req.Provider, unix(now), unix(now.Add(gpuportal.TopUpValidFor))).Scan(&id)
	})
	if err != nil {
		return nil, fmt.Errorf("create top-up: %w", err)
	}
	return db.TopUp(ctx, user, id)
}

// TopUp is one of the user's top-ups (any, for an admin).
func (db *DB) TopUp(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.TopUp, error) {
	t, err := scanTopUp(db.read.QueryRowContext(ctx, `SELECT `+topUpColumns+` FROM topups WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !user.CanSee(t.UserID)) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Top-up %d not found.", id)
	}
	return t, err
}

// SetTopUpCheckout keeps what the provider made for a pending top-up: its
// reference (a Stripe Checkout Session id) and the page the payer pays on.
func (db *DB) SetTopUpCheckout(ctx context.Context, id int64, ref, payURL string) error {
	if _, err := db.write.ExecContext(ctx, `UPDATE topups SET provider_ref = ?, pay_url = ? WHERE id = ? AND status = 'pending'`, ref, payURL, id); err != nil {
		return fmt.Errorf("keep the checkout of top-up %d: %w", id, err)
	}
	return nil
}

// UnconfirmedTopUps are a provider's top-ups created between from and to
// and not paid: those whose webhook may have been lost (reconciliation
// asks the provider about them).
func (db *DB) UnconfirmedTopUps(ctx context.Context, provider string, from, to time.Time) ([]gpuportal.TopUp, error) {
	list, err := scanEach(ctx, db.read, scanTopUp, `SELECT `+topUpColumns+` FROM topups WHERE provider = ? AND status IN ('pending', 'expired')
		AND created_at >= ? AND created_at < ? AND coalesce(provider_ref, '') <> '' ORDER BY id`, provider, unix(from), unix(to))
	if err != nil {
		return nil, fmt.Errorf("unconfirmed top-ups: %w", err)
	}
	return values(list), nil
}

// ExpireTopUp ends a pending top-up its provider says will not be paid.
func (db *DB) ExpireTopUp(ctx context.Context, id int64) error {
	_, err := db.write.ExecContext(ctx, `UPDATE topups SET status = 'expired' WHERE id = ? AND status = 'pending'`, id)
	return err
}

// AdminTopUps lists everybody's top-ups of one status ("" any), newest
// first, a page at a time.
func (db *DB) AdminTopUps(ctx context.Context, actor *gpuportal.User, status string, p Page) ([]gpuportal.TopUp, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	if err := db.count(ctx, p, "topups", "(? = '' OR status = ?)", status, status); err != nil {
		return nil, err
	}
	list, err := scanEach(ctx, db.read, scanTopUp, `SELECT `+topUpColumns+` FROM topups WHERE (? = '' OR status = ?) ORDER BY id DESC LIMIT ? OFFSET ?`, status, status, p.Limit, max(0, p.Offset))
	if err != nil {
		return nil, fmt.Errorf("top-ups: %w", err)
	}
	return values(list), nil
}

// TopUps lists the user's top-ups, newest first.
func (db *DB) TopUps(ctx context.Context, user *gpuportal.User, limit int) ([]gpuportal.TopUp, error) {
	return db.TopUpPage(ctx, user, Page{Limit: limit})
}

// TopUpPage is a page of the user's top-ups, newest first.
func (db *DB) TopUpPage(ctx context.Context, user *gpuportal.User, p Page) ([]gpuportal.TopUp, error) {
	if err := db.count(ctx, p, "topups", "user_id = ?", user.ID); err != nil {
		return nil, err
	}
	list, err := scanEach(ctx, db.read, scanTopUp, `SELECT `+topUpColumns+` FROM topups WHERE user_id = ? ORDER BY id DESC LIMIT ? OFFSET ?`, user.ID, p.Limit, max(p.Offset, 0))
	if err != nil {
		return nil, fmt.Errorf("top-ups: %w", err)
	}
	return values(list), nil
}

// values copies what a list of pointers points at (an empty list, not
// nil, for JSON).
func values[T any](list []*T) []T {
	out := make([]T, len(list))
	for k, v := range list {
		out[k] = *v
	}
	return out
}

// ApplyPayment credits a top-up its provider says is paid — once per
// payment_id, however often and in whatever order the provider sends it:
// a repeat changes nothing; a payment for an expired top-up still credits
// (the money arrived); a second payment id for a top-up already paid is a
// conflict for a person to look at, and so is an amount that does not
// match. The signature is checked before (web).
func (db *DB) ApplyPayment(ctx context.Context, provider string, ev gpuportal.PaymentEvent) (credited bool, err error) {
	if err := ev.Validate(); err != nil {
		return false, err
	}
	var mismatch *gpuportal.TopUp
	err = db.inTx(ctx, "apply payment", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM topups WHERE payment_id = ?`, ev.PaymentID).Scan(&n); err != nil {
			return named("read topups", err)
		}
		if n > 0 {
			return nil // delivered before: credited once already
		}
		t, err := scanTopUp(tx.QueryRowContext(ctx, `SELECT `+topUpColumns+` FROM topups WHERE id = ?`, ev.TopUpID))
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Top-up %d not found.", ev.TopUpID)
		} else if err != nil {
			return err
		}
		if t.Provider != provider {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Top-up %d not found.", ev.TopUpID)
		}
		// A paid checkout credits the top-up it was made for, whatever
		// its metadata claims: its reference is the top-up's own.
		if ev.CheckoutRef != "" && ev.CheckoutRef != t.ProviderRef {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Checkout %s was not made for top-up %d; nothing is credited.", ev.CheckoutRef, t.ID)
		}
		if t.Status == gpuportal.TopUpPaid {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Top-up %d was paid already, with payment %s.", t.ID, t.PaymentID)
		}
		if ev.Amount != t.Amount {
			mismatch = t
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Top-up %d is for %s, the payment for %s.", t.ID, t.Amount.String(), ev.Amount.String())
		}
		now := db.now()
		if _, err := tx.ExecContext(ctx, `UPDATE topups SET status = 'paid', payment_id = ?, paid_at = ? WHERE id = ?`, ev.PaymentID, unix(now), t.ID); err != nil {
			return named("update topups", err)
		}
		credited = true
		if err := db.postLedger(ctx, tx, ledgerPost{userID: t.UserID, at: now, kind: gpuportal.LedgerTopUp, amount: -t.Amount, topUpID: &t.ID,
			desc: fmt.Sprintf("Top-up #%d (%s)", t.ID, provider)}); err != nil {
			return err
		}
		return db.emit(ctx, tx, t.UserID, gpuportal.EventTopUpCredited, func() (any, error) {
			return scanTopUp(tx.QueryRowContext(ctx, `SELECT `+topUpColumns+` FROM topups WHERE id = ?`, t.ID))
		})
	})
	if mismatch != nil {
		// Credited nothing, and kept for a person to look at.
		if aerr := db.inTx(ctx, "apply payment", func(tx *sql.Tx) error {
			return db.audit(ctx, tx, 0, "payment.amount_mismatch", fmt.Sprintf("topup/%d", mismatch.ID),
				map[string]any{"amount_fen": mismatch.Amount}, map[string]any{"provider": provider, "payment_id": ev.PaymentID, "amount_fen": ev.Amount})
		}); aerr != nil {
			return false, aerr
		}
	}
	if err != nil {
		return false, err
	}
	if credited {
		db.Kick(ctx) // a stop for lack of balance may be called off now
	}
	return credited, nil
}

// Credit puts money into (or, negative, takes it out of) an account by
// hand: a bank transfer, a goodwill credit. Audited; actor nil is the
// system (the demo's seed).
func (db *DB) Credit(ctx context.Context, actor *gpuportal.User, userID int64, req gpuportal.CreditRequest) (gpuportal.Balance, error) {
	if actor != nil && !actor.IsAdmin() {
		return gpuportal.Balance{}, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	if err := req.Validate(); err != nil {
		return gpuportal.Balance{}, err
	}
	var actorID int64
	if actor != nil {
		actorID = actor.ID
	}
	err := db.inTx(ctx, "credit", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE id = ?`, userID).Scan(&n); err != nil || n == 0 {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "User %d not found.", userID)
		}
		if err := db.postLedger(ctx, tx, ledgerPost{userID: userID, at: db.now(), kind: gpuportal.LedgerCredit, amount: -req.Amount, desc: req.Note}); err != nil {
			return err
		}
		return db.audit(ctx, tx, actorID, "account.credit", fmt.Sprintf("user/%d", userID), nil, req)
	})
	if err != nil {
		return gpuportal.Balance{}, err
	}
	db.Kick(ctx) // a stop for lack of balance may be called off now
	return db.balanceIn(ctx, db.read, userID, db.now())
}

// expireTopUps ends the pending top-ups whose time is up (a payment that
// still arrives later is credited all the same).
func (db *DB) expireTopUps(ctx context.Context, tx *sql.Tx, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE topups SET status = 'expired' WHERE status = 'pending' AND expires_at <= ?`, unix(now))
	return err
}
