package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// SampleEvery is how often the tick records running instances' GPU use;
// SamplesKept how long the records stay.
const (
	SampleEvery = 5 * time.Minute
	SamplesKept = 7 * 24 * time.Hour
)

// sampleInstances records, every SampleEvery, the mean utilisation and the
// memory in use of every running instance's GPUs (one statement for the
// fleet), and forgets records older than SamplesKept. Between samples a
// tick reads one row.
func (db *DB) sampleInstances(ctx context.Context, tx *sql.Tx, now time.Time) error {
	var last int64
	err := tx.QueryRowContext(ctx, `SELECT last_at FROM instance_sampling WHERE id = 1`).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if err == nil && now.Sub(fromUnix(last)) < SampleEvery {
		return nil
	}
	at := unix(now.Truncate(time.Minute))
	if _, err := tx.ExecContext(ctx, `INSERT INTO instance_samples (instance_id, at, utilization_percent, memory_used_mib)
		SELECT ig.instance_id, ?, CAST(avg(g.utilization_percent) AS INTEGER), sum(g.memory_used_mib)
		FROM instance_gpus ig JOIN gpus g ON g.uuid = ig.gpu_uuid GROUP BY ig.instance_id
		ON CONFLICT (instance_id, at) DO NOTHING`, at); err != nil {
		return fmt.Errorf("sample instances: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM instance_samples WHERE at < ?`, unix(now.Add(-SamplesKept))); err != nil {
		return fmt.Errorf("forget old samples: %w", err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO instance_sampling (id, last_at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET last_at = excluded.last_at`, at)
	return err
}

// InstanceSamples is an instance's GPU use over its life, oldest first,
// for one it may see.
func (db *DB) InstanceSamples(ctx context.Context, user *gpuportal.User, id int64) ([]gpuportal.GPUUseSample, error) {
	if _, err := instanceFor(ctx, db.read, user, id); err != nil {
		return nil, err
	}
	out, err := scanAll(ctx, db.read, func(r *sql.Rows, s *gpuportal.GPUUseSample) error {
		var at int64
		err := r.Scan(&at, &s.UtilizationPercent, &s.MemoryUsedMiB)
		s.At = fromUnix(at)
		return err
	}, `SELECT at, utilization_percent, memory_used_mib FROM instance_samples WHERE instance_id = ? ORDER BY at`, id)
	if err != nil {
		return nil, fmt.Errorf("instance samples: %w", err)
	}
	return out, nil
}

// InstanceGPUsNow is each GPU an instance holds now, as its node's last
// heartbeat said, for one it may see (none once it has ended).
func (db *DB) InstanceGPUsNow(ctx context.Context, user *gpuportal.User, id int64) ([]gpuportal.GPUNow, error) {
	if _, err := instanceFor(ctx, db.read, user, id); err != nil {
		return nil, err
	}
	out, err := scanAll(ctx, db.read, func(r *sql.Rows, g *gpuportal.GPUNow) error {
		return r.Scan(&g.Index, &g.UUID, &g.UtilizationPercent, &g.MemoryUsedMiB, &g.MemoryTotalMiB)
	}, `SELECT g.idx, g.uuid, g.utilization_percent, g.memory_used_mib, g.memory_total_mib FROM instance_gpus ig JOIN gpus g ON g.uuid = ig.gpu_uuid
		WHERE ig.instance_id = ? ORDER BY g.idx`, id)
	if err != nil {
		return nil, fmt.Errorf("an instance's GPUs now: %w", err)
	}
	return out, nil
}
