package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"gpuportal"
)

// Models lists the GPU models in catalog order.
func (db *DB) Models(ctx context.Context) ([]gpuportal.Model, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, name, memory_gib, list_price_fen FROM models ORDER BY sort_order, id`)
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	defer rows.Close()
	out := []gpuportal.Model{}
	for rows.Next() {
		var m gpuportal.Model
		if err := rows.Scan(&m.ID, &m.Name, &m.MemoryGiB, &m.ListPrice); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Model returns one model, or not_found.
func (db *DB) Model(ctx context.Context, id string) (*gpuportal.Model, error) {
	var m gpuportal.Model
	err := db.read.QueryRowContext(ctx, `SELECT id, name, memory_gib, list_price_fen FROM models WHERE id = ?`, id).
		Scan(&m.ID, &m.Name, &m.MemoryGiB, &m.ListPrice)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.FieldErrorf(gpuportal.ENOTFOUND, "model", "Unknown GPU model %q.", id)
	}
	return &m, err
}

// Regions lists the regions.
func (db *DB) Regions(ctx context.Context) ([]gpuportal.Region, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, name, time_zone FROM regions ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list regions: %w", err)
	}
	defer rows.Close()
	out := []gpuportal.Region{}
	for rows.Next() {
		var r gpuportal.Region
		if err := rows.Scan(&r.ID, &r.Name, &r.TimeZone); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Region returns one region, or not_found.
func (db *DB) Region(ctx context.Context, id string) (*gpuportal.Region, error) {
	var r gpuportal.Region
	err := db.read.QueryRowContext(ctx, `SELECT id, name, time_zone FROM regions WHERE id = ?`, id).Scan(&r.ID, &r.Name, &r.TimeZone)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.FieldErrorf(gpuportal.ENOTFOUND, "region", "Unknown region %q.", id)
	}
	return &r, err
}

// SetListPrice changes a model's list price (admin only; audited).
func (db *DB) SetListPrice(ctx context.Context, actor *gpuportal.User, modelID string, price gpuportal.Fen) (*gpuportal.Model, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins can change prices.")
	}
	if err := gpuportal.ValidateListPrice(price); err != nil {
		return nil, err
	}
	err := db.inTx(ctx, "set list price", func(tx *sql.Tx) error {
		var old gpuportal.Fen
		err := tx.QueryRowContext(ctx, `SELECT list_price_fen FROM models WHERE id = ?`, modelID).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.FieldErrorf(gpuportal.ENOTFOUND, "model", "Unknown GPU model %q.", modelID)
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE models SET list_price_fen = ? WHERE id = ?`, price, modelID); err != nil {
			return named("update models", err)
		}
		return db.audit(ctx, tx, actor.ID, "model.list_price", "model/"+modelID, old, price)
	})
	if err != nil {
		return nil, err
	}
	return db.Model(ctx, modelID)
}

// audit records an admin change in the same transaction as the change.
func (db *DB) audit(ctx context.Context, tx *sql.Tx, actorID int64, action, subject string, oldValue, newValue any) error {
	oldJSON, err := json.Marshal(oldValue)
	if err != nil {
		return err
	}
	newJSON, err := json.Marshal(newValue)
	if err != nil {
		return err
	}
	var actor sql.NullInt64
	if actorID != 0 {
		actor = sql.NullInt64{Int64: actorID, Valid: true}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO audit_log (at, actor_id, action, subject, old_value, new_value) VALUES (?, ?, ?, ?, ?, ?)`,
		unix(db.now()), actor, action, subject, string(oldJSON), string(newJSON))
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}
