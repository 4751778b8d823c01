package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"gpuportal"
)

// recordRunStart notes that a spot instance's attempt started running.
func recordRunStart(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, now time.Time) error {
	if i.Kind != gpuportal.KindSpot {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO spot_runs (instance_id, attempt, model_id, region_id, gpus, started_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (instance_id, attempt) DO NOTHING`, i.ID, i.Attempt, i.Model, i.Region, i.Count, unix(now))
	return err
}

// recordRunEnd notes that a spot instance's attempt ended.
func recordRunEnd(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, now time.Time) error {
	if i.Kind != gpuportal.KindSpot {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE spot_runs SET ended_at = ? WHERE instance_id = ? AND attempt = ? AND ended_at IS NULL`, unix(now), i.ID, i.Attempt)
	return err
}

// rollupHoursPerTick bounds one tick's catching up (a year takes a few
// dozen ticks; demo seeding rolls up in a loop).
const rollupHoursPerTick = 24 * 14

// rollupStep folds every completed hour since the last roll-up into
// spot_hourly: GPU-seconds of spot runs, interruptions by reason, bursts.
func (db *DB) rollupStep(ctx context.Context, tx *sql.Tx, now time.Time, _ *TickResult, _ *[]string) error {
	_, err := db.rollup(ctx, tx, now, rollupHoursPerTick)
	return err
}

// rollup folds the spot history into spot_hourly: the GPU-seconds of
// every run that ended since the last roll-up (spread over the hours it
// ran), and the interruptions and bursts of up to max completed hours.
// Both passes read only what is new, so catching up a year stays linear.
func (db *DB) rollup(ctx context.Context, tx *sql.Tx, now time.Time, max int) (int, error) {
	if err := rollupRuns(ctx, tx, now); err != nil {
		return 0, err
	}
	next, ok, err := setting(ctx, tx, "spot_rollup_next_hour")
	if err != nil {
		return 0, err
	}
	if !ok {
		var first sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT min(notice_at) FROM interruptions`).Scan(&first); err != nil {
			return 0, err
		}
		if !first.Valid {
			return 0, nil
		}
		next = first.Int64 - first.Int64%3600
	}
	done := 0
	for ; next+3600 <= unix(now) && done < max; next += 3600 {
		if err := rollupInterruptions(ctx, tx, next); err != nil {
			return done, err
		}
		done++
	}
	return done, setSetting(ctx, tx, "spot_rollup_next_hour", next)
}

func setting(ctx context.Context, tx *sql.Tx, key string) (int64, bool, error) {
	var v string
	err := tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	if err == sql.ErrNoRows {
		return 0, false, nil
	} else if err != nil {
		return 0, false, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("setting %s = %q: %w", key, v, err)
	}
	return n, true, nil
}

func setSetting(ctx context.Context, tx *sql.Tx, key string, n int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, strconv.FormatInt(n, 10))
	return err
}

// rollupRuns adds the GPU-seconds of runs that ended in [watermark, now)
// to the hours they ran in.
func rollupRuns(ctx context.Context, tx *sql.Tx, now time.Time) error {
	from, _, err := setting(ctx, tx, "spot_rollup_runs_until")
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT model_id, region_id, gpus, started_at, ended_at FROM spot_runs WHERE ended_at >= ? AND ended_at < ?`, from, unix(now))
	if err != nil {
		return fmt.Errorf("roll up runs: %w", err)
	}
	type key struct {
		model, region string
		hour          int64
	}
	secs := map[key]int64{}
	for rows.Next() {
		var model, region string
		var gpus, start, end int64
		if err := rows.Scan(&model, &region, &gpus, &start, &end); err != nil {
			rows.Close()
			return err
		}
		for h := start - start%3600; h < end; h += 3600 {
			secs[key{model, region, h}] += gpus * (min(end, h+3600) - max(start, h))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for k, n := range secs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO spot_hourly (model_id, region_id, hour, gpu_seconds) VALUES (?, ?, ?, ?)
			ON CONFLICT (model_id, region_id, hour) DO UPDATE SET gpu_seconds = spot_hourly.gpu_seconds + excluded.gpu_seconds`, k.model, k.region, k.hour, n); err != nil {
			return err
		}
	}
	return setSetting(ctx, tx, "spot_rollup_runs_until", unix(now))
}

func rollupInterruptions(ctx context.Context, tx *sql.Tx, h int64) error {
	end := h + 3600
	upsert := func(model, region string, col string, n int64) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO spot_hourly (model_id, region_id, hour, `+col+`) VALUES (?, ?, ?, ?)
			ON CONFLICT (model_id, region_id, hour) DO UPDATE SET `+col+` = excluded.`+col, model, region, h, n)
		return err
	}
	type row struct {
		model, region, key string
		n                  int64
	}
	collect := func(query string, args ...any) ([]row, error) {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.model, &r.region, &r.key, &r.n); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rows.Err()
	}
	reasons, err := collect(`SELECT model_id, region_id, reason, count(*) FROM interruptions WHERE notice_at >= ? AND notice_at < ? GROUP BY model_id, region_id, reason`, h, end)
	if err != nil {
		return fmt.Errorf("roll up interruptions: %w", err)
	}
	totals := map[[2]string]int64{}
	for _, r := range reasons {
		totals[[2]string{r.model, r.region}] += r.n
		if err := upsert(r.model, r.region, "by_"+r.key, r.n); err != nil {
			return err
		}
	}
	for k, n := range totals {
		if err := upsert(k[0], k[1], "interruptions", n); err != nil {
			return err
		}
	}
	// A burst starts with an interruption that has no other of the same
	// model and region in the 3 minutes before it.
	bursts, err := collect(`SELECT i.model_id, i.region_id, '', count(*) FROM interruptions i WHERE i.notice_at >= ? AND i.notice_at < ?
		AND NOT EXISTS (SELECT 1 FROM interruptions j WHERE j.model_id = i.model_id AND j.region_id = i.region_id
			AND j.notice_at >= i.notice_at - 180 AND (j.notice_at < i.notice_at OR (j.notice_at = i.notice_at AND j.id < i.id)))
		GROUP BY i.model_id, i.region_id`, h, end)
	if err != nil {
		return fmt.Errorf("roll up bursts: %w", err)
	}
	for _, r := range bursts {
		if err := upsert(r.model, r.region, "bursts", r.n); err != nil {
			return err
		}
	}
	return nil
}

// RollupAll rolls up every completed hour (demo seeding, tests).
func (db *DB) RollupAll(ctx context.Context, now time.Time) error {
	for {
		var n int
		err := db.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			n, err = db.rollup(ctx, tx, now, rollupHoursPerTick)
			return err
		})
		if err != nil || n < rollupHoursPerTick {
			return err
		}
	}
}

// Rates computes the interruption rates of a model in a region: the
// trailing 30 days' rate and bucket (live, from the runs of those days),
// the 168-cell hour-of-week heatmap and the reason and burst figures (from
// the hourly roll-up), and safe-until for a new spot instance of count GPUs.
func (db *DB) Rates(ctx context.Context, model, region string, count int) (*gpuportal.InterruptionRates, error) {
	if _, _, err := db.catalogEntry(ctx, db.read, model, region); err != nil {
		return nil, err
	}
	if count < 0 || count > gpuportal.MaxGPUsPerInstance {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "count", "An instance runs on 1 to %d GPUs of one node.", gpuportal.MaxGPUsPerInstance)
	}
	if count == 0 {
		count = 1
	}
	now := db.now()
	since := now.Add(-30 * 24 * time.Hour)
	r := &gpuportal.InterruptionRates{Model: model, Region: region, Count: count, ByHour: make([]float64, 168), GPUHours: make([]float64, 168),
		Reasons: map[string]int{}, TimeZone: db.Location.String(), ComputedAt: now}
	// Two index ranges (ended in the window; still running), deduplicated:
	// an OR of the two would scan the whole history.
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM (
			SELECT instance_id FROM spot_runs WHERE model_id = ? AND region_id = ? AND ended_at >= ?
			UNION SELECT instance_id FROM spot_runs WHERE model_id = ? AND region_id = ? AND ended_at IS NULL AND started_at < ?) AS ran`,
		model, region, unix(since), model, region, unix(now)).Scan(&r.Trailing.Instances); err != nil {
		return nil, fmt.Errorf("rates: %w", err)
	}
	if err := db.read.QueryRowContext(ctx, `SELECT count(DISTINCT instance_id) FROM interruptions WHERE model_id = ? AND region_id = ? AND notice_at >= ? AND notice_at <= ?`,
		model, region, unix(since), unix(now)).Scan(&r.Trailing.Interrupted); err != nil {
		return nil, fmt.Errorf("rates: %w", err)
	}
	if r.Trailing.Instances > 0 {
		r.Trailing.Rate = float64(r.Trailing.Interrupted) / float64(r.Trailing.Instances)
	}
	r.Trailing.Bucket = gpuportal.RateBucket(r.Trailing.Rate)
	rows, err := db.read.QueryContext(ctx, `SELECT hour, gpu_seconds, interruptions, bursts, by_reservation, by_on_demand, by_node_failure, by_admin FROM spot_hourly
		WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ?`, model, region, unix(since.Truncate(time.Hour)), unix(now))
	if err != nil {
		return nil, fmt.Errorf("rates: %w", err)
	}
	defer rows.Close()
	interrupts := make([]int64, 168)
	for rows.Next() {
		var hour, secs, n, bursts, res, od, nf, adm int64
		if err := rows.Scan(&hour, &secs, &n, &bursts, &res, &od, &nf, &adm); err != nil {
			return nil, err
		}
		cell := gpuportal.HourOfWeek(fromUnix(hour), db.Location)
		r.GPUHours[cell] += float64(secs) / 3600
		interrupts[cell] += n
		r.Bursts += int(bursts)
		r.Reasons[gpuportal.ReasonReservation] += int(res)
		r.Reasons[gpuportal.ReasonOnDemand] += int(od)
		r.Reasons[gpuportal.ReasonNodeFailure] += int(nf)
		r.Reasons[gpuportal.ReasonAdmin] += int(adm)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range r.ByHour {
		if r.GPUHours[i] > 0 {
			r.ByHour[i] = float64(interrupts[i]) / r.GPUHours[i] * 100
		}
	}
	if r.SafeUntil, err = db.SafeUntil(ctx, model, region, count); err != nil {
		return nil, err
	}
	return r, nil
}
