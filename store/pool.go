package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SafeUntil is the earliest hour at which the reservation book would
// reclaim GPUs from spot instances if one more of k GPUs ran now (k = 0:
// as things are). Nil when nothing booked in the next 90 days would. It
// reads two aggregates rather than the whole pool: the interruption-rates
// answer and every spot launch ask for it.
func (db *DB) SafeUntil(ctx context.Context, model, region string, k int) (*time.Time, error) {
	healthy, err := db.healthyGPUs(ctx, db.read, model, region)
	if err != nil {
		return nil, err
	}
	var onDemand, spot int
	if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(CASE WHEN kind = 'on_demand' THEN count ELSE 0 END), 0),
		coalesce(sum(CASE WHEN kind = 'spot' AND node_id IS NOT NULL THEN count ELSE 0 END), 0)
		FROM instances WHERE model_id = ? AND region_id = ? AND kind IN ('spot', 'on_demand') AND status IN ('pending', 'running')`,
		model, region).Scan(&onDemand, &spot); err != nil {
		return nil, fmt.Errorf("safe until: %w", err)
	}
	return firstReclaimedHour(ctx, db.read, model, region, db.now(), healthy-onDemand-spot-k)
}

// firstReclaimedHour is the first hour of the next 90 days that books more
// than threshold GPUs (now, when threshold is negative), or nil.
func firstReclaimedHour(ctx context.Context, q queryer, model, region string, now time.Time, threshold int) (*time.Time, error) {
	if threshold < 0 {
		t := now
		return &t, nil
	}
	var hour int64
	err := q.QueryRowContext(ctx, `SELECT hour FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ? AND reserved > ? ORDER BY hour LIMIT 1`,
		model, region, unix(now.Truncate(time.Hour)), unix(now.Add(90*24*time.Hour)), threshold).Scan(&hour)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	t := fromUnix(hour)
	if t.Before(now) {
		t = now
	}
	return &t, nil
}
