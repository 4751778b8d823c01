package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

// addLedger posts an entry about a reservation.
func (db *DB) addLedger(ctx context.Context, tx *sql.Tx, userID int64, at time.Time, kind string, amount gpuportal.Fen, reservationID *int64, desc string) error {
	return db.postLedger(ctx, tx, ledgerPost{userID: userID, at: at, kind: kind, amount: amount, reservationID: reservationID, desc: desc})
}

// post writes the ledger lines a rule asked for (see gpuportal.Posting).
func (db *DB) post(ctx context.Context, tx *sql.Tx, userID int64, at time.Time, reservationID *int64, lines []gpuportal.Posting) error {
	for _, l := range lines {
		if err := db.addLedger(ctx, tx, userID, at, l.Kind, l.Amount, reservationID, l.Description); err != nil {
			return err
		}
	}
	return nil
}

// LedgerFilter picks a page of a user's ledger: entries in [From, To)
// (zero: unbounded), of one kind ("" any), newest first.
type LedgerFilter struct {
	From, To      time.Time
	Kind          string
	Limit, Offset int
	// Total, when set, receives how many entries match (the page aside).
	Total *int
}

// Ledger returns a user's entries, newest first, and the balance they add
// up to (−Σ amount_fen of the whole ledger).
func (db *DB) Ledger(ctx context.Context, userID int64, limit int) ([]gpuportal.LedgerEntry, gpuportal.Fen, error) {
	if limit <= 0 || limit > 5000 {
		limit = 500
	}
	entries, err := db.LedgerPage(ctx, userID, LedgerFilter{Limit: limit})
	if err != nil {
		return nil, 0, err
	}
	sum, err := db.LedgerSum(ctx, userID)
	return entries, sum, err
}

// LedgerPage returns the entries of a filter, with what each is about.
func (db *DB) LedgerPage(ctx context.Context, userID int64, f LedgerFilter) ([]gpuportal.LedgerEntry, error) {
	query := `SELECT l.id, l.at, l.kind, l.amount_fen, l.reservation_id, l.instance_id, l.topup_id, l.volume_id, l.description,
		coalesce(r.count, i.count, 0), coalesce(rm.name, im.name, ''), coalesce(v.name, '')
		FROM ledger_entries l LEFT JOIN volumes v ON v.id = l.volume_id
		LEFT JOIN reservations r ON r.id = l.reservation_id LEFT JOIN models rm ON rm.id = r.model_id
		LEFT JOIN instances i ON i.id = l.instance_id LEFT JOIN models im ON im.id = i.model_id
`
	where, args := `l.user_id = ?`, []any{userID}
	if !f.From.IsZero() {
		where += ` AND l.at >= ?`
		args = append(args, unix(f.From))
	}
	if !f.To.IsZero() {
		where += ` AND l.at < ?`
		args = append(args, unix(f.To))
	}
	if f.Kind != "" {
		where += ` AND l.kind = ?`
		args = append(args, f.Kind)
	}
	if err := db.count(ctx, Page{Total: f.Total}, "ledger_entries l", where, args...); err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		f.Limit = 500
	}
	query += ` WHERE ` + where
	query += ` ORDER BY l.at DESC, l.id DESC LIMIT ? OFFSET ?`
	args = append(args, f.Limit, f.Offset)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer rows.Close()
	out := []gpuportal.LedgerEntry{}
	for rows.Next() {
		var e gpuportal.LedgerEntry
		var at int64
		var res, inst, topUp, volume sql.NullInt64
		if err := rows.Scan(&e.ID, &at, &e.Kind, &e.Amount, &res, &inst, &topUp, &volume, &e.Description, &e.Count, &e.Model, &e.VolumeName); err != nil {
			return nil, err
		}
		e.At = fromUnix(at)
		for _, ref := range []struct {
			v  sql.NullInt64
			to **int64
		}{{res, &e.ReservationID}, {inst, &e.InstanceID}, {topUp, &e.TopUpID}, {volume, &e.VolumeID}} {
			if ref.v.Valid {
				id := ref.v.Int64
				*ref.to = &id
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// SpendByKind sums a user's charges (net of refunds) in [from, to) by
// ledger kind: what this month cost, by product.
func (db *DB) SpendByKind(ctx context.Context, userID int64, from, to time.Time) (map[string]gpuportal.Fen, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT kind, sum(amount_fen) FROM ledger_entries WHERE user_id = ? AND at >= ? AND at < ?
		AND kind IN (`+spendKinds+`) GROUP BY kind`, userID, unix(from), unix(to))
	if err != nil {
		return nil, fmt.Errorf("spend: %w", err)
	}
	defer rows.Close()
	out := map[string]gpuportal.Fen{}
	for rows.Next() {
		var kind string
		var sum gpuportal.Fen
		if err := rows.Scan(&kind, &sum); err != nil {
			return nil, err
		}
		out[kind] = sum
	}
	return out, rows.Err()
}
