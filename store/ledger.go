package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

func (db *DB) addLedger(ctx context.Context, tx *sql.Tx, userID int64, at time.Time, kind string, amount gpuportal.Fen, reservationID *int64, desc string) error {
	_, err := db.execTx(ctx, tx, `INSERT INTO ledger_entries (user_id, at, kind, amount_fen, reservation_id, description) VALUES (?, ?, ?, ?, ?, ?)`,
		userID, unix(at), kind, amount, reservationID, desc)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", kind, err)
	}
	return nil
}

// Ledger returns a user's entries, newest first, and their total.
func (db *DB) Ledger(ctx context.Context, userID int64, limit int) ([]gpuportal.LedgerEntry, gpuportal.Fen, error) {
	if limit <= 0 || limit > 5000 {
		limit = 500
	}
	var total gpuportal.Fen
	if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(amount_fen), 0) FROM ledger_entries WHERE user_id = ?`, userID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("ledger total: %w", err)
	}
	rows, err := db.read.QueryContext(ctx, `SELECT id, at, kind, amount_fen, reservation_id, description FROM ledger_entries
		WHERE user_id = ? ORDER BY at DESC, id DESC LIMIT ?`, userID, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("ledger: %w", err)
	}
	defer rows.Close()
	out := []gpuportal.LedgerEntry{}
	for rows.Next() {
		var e gpuportal.LedgerEntry
		var at int64
		var res sql.NullInt64
		if err := rows.Scan(&e.ID, &at, &e.Kind, &e.Amount, &res, &e.Description); err != nil {
			return nil, 0, err
		}
		e.At = fromUnix(at)
		if res.Valid {
			e.ReservationID = &res.Int64
		}
		out = append(out, e)
	}
	return out, total, rows.Err()
}
