package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gpuportal"
)

// BulkInsertReservationsForBenchmark (compiled only for this package's tests) writes a large book quickly (one
// transaction, no per-booking checks) for benchmarks that need 200,000
// reservations in place. It keeps the hourly usage consistent with what
// Book would have left, but does not check capacity: never use it for
// real bookings.
func (db *DB) BulkInsertReservationsForBenchmark(ctx context.Context, userID int64, reqs []gpuportal.BookingRequest) error {
	tiers, _ := json.Marshal(gpuportal.DefaultPolicy().CancellationTiers)
	usage := map[[3]any]int{}
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO reservations (user_id, model_id, region_id, count, start_at, end_at, status, price_fen, quote_json, tiers_json, created_at)
			VALUES (?, ?, ?, ?, ?, ?, 'confirmed', 0, '{}', ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range reqs {
			if _, err := stmt.ExecContext(ctx, userID, r.Model, r.Region, r.Count, unix(r.Start), unix(r.End), string(tiers), unix(db.now())); err != nil {
				return err
			}
			for t := r.Start; t.Before(r.End); t = t.Add(time.Hour) {
				usage[[3]any{r.Model, r.Region, unix(t)}] += r.Count
			}
		}
		up, err := tx.PrepareContext(ctx, `INSERT INTO hourly_usage (model_id, region_id, hour, reserved) VALUES (?, ?, ?, ?)
			ON CONFLICT (model_id, region_id, hour) DO UPDATE SET reserved = hourly_usage.reserved + excluded.reserved`)
		if err != nil {
			return err
		}
		defer up.Close()
		for k, n := range usage {
			if _, err := up.ExecContext(ctx, k[0], k[1], k[2], n); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// BulkRunSpotForBenchmark puts n running 1-GPU spot instances on the first
// n free GPUs of a model (benchmarks only: no checks, no placement).
func (db *DB) BulkRunSpotForBenchmark(ctx context.Context, userID int64, model, region string, n int) error {
	return db.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT g.uuid, g.node_id FROM gpus g JOIN nodes nd ON nd.id = g.node_id WHERE g.model_id = ? AND nd.region_id = ?
			AND g.uuid NOT IN (SELECT gpu_uuid FROM instance_gpus) ORDER BY g.node_id, g.idx LIMIT ?`, model, region, n)
		if err != nil {
			return err
		}
		type gpu struct{ uuid, node string }
		var gpus []gpu
		for rows.Next() {
			var g gpu
			if err := rows.Scan(&g.uuid, &g.node); err != nil {
				rows.Close()
				return err
			}
			gpus = append(gpus, g)
		}
		rows.Close()
		now := unix(db.now())
		for i, g := range gpus {
			var id int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO instances (user_id, kind, model_id, region_id, count, command, status, node_id, attempt, checkpoint_key, price_fen, created_at, started_at)
				VALUES (?, 'spot', ?, ?, 1, 'train', 'running', ?, 1, ?, 240, ?, ?) RETURNING id`, userID, model, region, g.node, fmt.Sprintf("bench-%d", i), now, now).Scan(&id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO instance_gpus (gpu_uuid, instance_id) VALUES (?, ?)`, g.uuid, id); err != nil {
				return err
			}
		}
		return nil
	})
}
