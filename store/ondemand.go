package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// A confirmed reservation always gets all its GPUs (DESIGN §2, Capacity):
// for every hour, confirmed reservations + on-demand GPUs ≤ the bookable
// capacity. On-demand instances run until they are stopped, so bookings
// and the availability grid count their GPUs as taken in every hour ahead,
// and an on-demand launch is refused unless it fits beside every booked
// hour ahead. Both checks run in the transaction of their write; on
// PostgreSQL, where bookings run side by side, a booking holds the
// model/region's capacity row FOR SHARE and an on-demand launch FOR
// UPDATE, so neither can slip past the other.

// onDemandGPUs is what on-demand instances of a model in a region hold or
// wait for.
func (db *DB) onDemandGPUs(ctx context.Context, q queryer, model, region string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT coalesce(sum(count), 0) FROM instances WHERE model_id = ? AND region_id = ? AND kind = 'on_demand'
		AND status IN ('pending', 'running', 'interrupting')`, model, region).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("on-demand GPUs: %w", err)
	}
	return n, nil
}

// reservableNow is what reservations of a model in a region may hold in
// any hour: the bookable capacity less the on-demand GPUs. lock (in a
// booking's transaction) holds the capacity row against a concurrent
// on-demand launch on PostgreSQL.
func (db *DB) reservableNow(ctx context.Context, q queryer, model, region string, policy gpuportal.Policy, lock bool) (int, error) {
	if lock && db.dialect == "postgres" {
		var one int
		if err := q.QueryRowContext(ctx, `SELECT 1 FROM capacity WHERE model_id = ? AND region_id = ? FOR SHARE`, model, region).Scan(&one); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
	}
	healthy, err := db.healthyGPUs(ctx, q, model, region)
	if err != nil {
		return 0, err
	}
	onDemand, err := db.onDemandGPUs(ctx, q, model, region)
	if err != nil {
		return 0, err
	}
	return max(0, gpuportal.BookableGPUs(healthy, policy.ReservablePercent)-onDemand), nil
}

// mostReservedFrom is the most GPUs of a model in a region booked in any
// hour from now on.
func mostReservedFrom(ctx context.Context, db *DB, q queryer, model, region string, now time.Time) (int, error) {
	var most int
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(reserved), 0) FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ?`,
		model, region, unix(now.Truncate(time.Hour))).Scan(&most); err != nil {
		return 0, fmt.Errorf("most GPUs booked ahead: %w", err)
	}
	return most, nil
}

// checkOnDemandFits refuses an on-demand start of count GPUs that would
// take GPUs a booked hour ahead needs (gpuportal.OnDemandFits), naming
// the first such hour. count 0 checks a start already counted among the
// on-demand GPUs (a pending launch being placed).
func (db *DB) checkOnDemandFits(ctx context.Context, tx *sql.Tx, model, region string, count int, policy gpuportal.Policy, now time.Time) error {
	if db.dialect == "postgres" {
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM capacity WHERE model_id = ? AND region_id = ? FOR UPDATE`, model, region); err != nil {
			return err
		}
	}
	healthy, err := db.healthyGPUs(ctx, tx, model, region)
	if err != nil {
		return err
	}
	onDemand, err := db.onDemandGPUs(ctx, tx, model, region)
	if err != nil {
		return err
	}
	bookable := gpuportal.BookableGPUs(healthy, policy.ReservablePercent)
	if !gpuportal.OnDemandFits(bookable, onDemand, count, 0) {
		return gpuportal.FieldErrorf(gpuportal.ECAPACITY, "count", "Only %d %s GPUs can run on-demand now; %d asked for.", max(0, bookable-onDemand), model, count)
	}
	most, err := mostReservedFrom(ctx, db, tx, model, region, now)
	if err != nil {
		return err
	}
	if gpuportal.OnDemandFits(bookable, onDemand, count, most) {
		return nil
	}
	room := bookable - onDemand - count
	var hour int64
	err = tx.QueryRowContext(ctx, `SELECT hour FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND reserved > ? ORDER BY hour LIMIT 1`,
		model, region, unix(now.Truncate(time.Hour)), room).Scan(&hour)
	if err != nil {
		return fmt.Errorf("check booked hours: %w", err)
	}
	return gpuportal.FieldErrorf(gpuportal.ECAPACITY, "count", "An on-demand instance of %d GPUs would take GPUs booked from %s (%s) on; %d can run on-demand beside the bookings.",
		count, fromUnix(hour).In(db.Location).Format("2006-01-02 15:04"), db.Location.String(), max(0, room+count-most))
}
