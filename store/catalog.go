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
	rows, err := db.read.QueryContext(ctx, `SELECT id, name, time_zone, workload_env FROM regions ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list regions: %w", err)
	}
	defer rows.Close()
	out := []gpuportal.Region{}
	for rows.Next() {
		r, err := scanRegion(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func scanRegion(row interface{ Scan(...any) error }) (gpuportal.Region, error) {
	var r gpuportal.Region
	var env string
	if err := row.Scan(&r.ID, &r.Name, &r.TimeZone, &env); err != nil {
		return r, err
	}
	if env != "" {
		if err := json.Unmarshal([]byte(env), &r.WorkloadEnv); err != nil {
			return r, fmt.Errorf("region %s workload_env: %w", r.ID, err)
		}
	}
	return r, nil
}

// SetRegionWorkloadEnv sets the variables every workload of a region
// gets (admin only, audited); workloads started from then on get them.
func (db *DB) SetRegionWorkloadEnv(ctx context.Context, actor *gpuportal.User, id string, env map[string]string) (*gpuportal.Region, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	if err := gpuportal.ValidateWorkloadEnv(env); err != nil {
		return nil, err
	}
	raw := ""
	if len(env) > 0 {
		b, _ := json.Marshal(env)
		raw = string(b)
	}
	err := db.inTx(ctx, "set region env", func(tx *sql.Tx) error {
		old, err := scanRegion(tx.QueryRowContext(ctx, `SELECT id, name, time_zone, workload_env FROM regions WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Unknown region %q.", id)
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE regions SET workload_env = ? WHERE id = ?`, raw, id); err != nil {
			return fmt.Errorf("update region: %w", err)
		}
		return db.audit(ctx, tx, actor.ID, "region.workload_env", "region/"+id, old.WorkloadEnv, env)
	})
	if err != nil {
		return nil, err
	}
	return db.Region(ctx, id)
}

// Region returns one region, or not_found.
func (db *DB) Region(ctx context.Context, id string) (*gpuportal.Region, error) {
	r, err := scanRegion(db.read.QueryRowContext(ctx, `SELECT id, name, time_zone, workload_env FROM regions WHERE id = ?`, id))
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
	return db.auditFor(ctx, tx, 0, actorID, action, subject, oldValue, newValue)
}

// auditFor is audit with the team whose trail it belongs to (0: none).
func (db *DB) auditFor(ctx context.Context, tx *sql.Tx, teamID, actorID int64, action, subject string, oldValue, newValue any) error {
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
	var team sql.NullInt64
	if teamID != 0 {
		team = sql.NullInt64{Int64: teamID, Valid: true}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO audit_log (at, actor_id, action, subject, old_value, new_value, team_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		unix(db.now()), actor, action, subject, string(oldJSON), string(newJSON), team)
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}
