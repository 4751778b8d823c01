package store

import (
	"context"
	"database/sql"
	"fmt"
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

// rollup folds every run that has ended and every interruption not yet
// counted into spot_hourly — a run's GPU-seconds spread over the hours it
// ran, an interruption into its hour by reason, and a burst for each
// interruption with no other of its model and region in the 3 minutes
// before it. Rows are marked as counted, so history inserted late (the
// demo's) or a clock moved back is still counted once.
func (db *DB) rollup(ctx context.Context, tx *sql.Tx, now time.Time) error {
	type key struct {
		model, region string
		hour          int64
	}
	secs := map[key]int64{}
	rows, err := tx.QueryContext(ctx, `SELECT model_id, region_id, gpus, started_at, ended_at FROM spot_runs WHERE rolled = 0 AND ended_at <= ?`, unix(now))
	if err != nil {
		return fmt.Errorf("roll up runs: %w", err)
	}
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
	ints := map[key]map[string]int64{} // column → count
	rows, err = tx.QueryContext(ctx, `SELECT i.model_id, i.region_id, i.reason, i.notice_at,
		NOT EXISTS (SELECT 1 FROM interruptions j WHERE j.model_id = i.model_id AND j.region_id = i.region_id
			AND j.notice_at >= i.notice_at - 180 AND (j.notice_at < i.notice_at OR (j.notice_at = i.notice_at AND j.id < i.id)))
		FROM interruptions i WHERE i.rolled = 0 AND i.notice_at <= ?`, unix(now))
	if err != nil {
		return fmt.Errorf("roll up interruptions: %w", err)
	}
	for rows.Next() {
		var model, region, reason string
		var at int64
		var burst bool
		if err := rows.Scan(&model, &region, &reason, &at, &burst); err != nil {
			rows.Close()
			return err
		}
		k := key{model, region, at - at%3600}
		if ints[k] == nil {
			ints[k] = map[string]int64{}
		}
		ints[k]["interruptions"]++
		ints[k]["by_"+reason]++
		if burst {
			ints[k]["bursts"]++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	add := func(k key, col string, n int64) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO spot_hourly (model_id, region_id, hour, `+col+`) VALUES (?, ?, ?, ?)
			ON CONFLICT (model_id, region_id, hour) DO UPDATE SET `+col+` = spot_hourly.`+col+` + excluded.`+col, k.model, k.region, k.hour, n)
		return err
	}
	for k, n := range secs {
		if err := add(k, "gpu_seconds", n); err != nil {
			return err
		}
	}
	for k, cols := range ints {
		for col, n := range cols {
			switch col {
			case "interruptions", "bursts", "by_reservation", "by_on_demand", "by_node_failure", "by_admin":
				if err := add(k, col, n); err != nil {
					return err
				}
			}
		}
	}
	// The day each instance last ran and was last interrupted, for the
	// trailing counts (see Rates).
	greatest := "max"
	if db.dialect == "postgres" {
		greatest = "GREATEST"
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO spot_instance_days (instance_id, model_id, region_id, ran_day)
		SELECT instance_id, model_id, region_id, max(ended_at - ended_at % 86400) FROM spot_runs WHERE rolled = 0 AND ended_at <= ?
		GROUP BY instance_id, model_id, region_id
		ON CONFLICT (instance_id) DO UPDATE SET ran_day = `+greatest+`(coalesce(spot_instance_days.ran_day, 0), excluded.ran_day)`, unix(now)); err != nil {
		return fmt.Errorf("roll up run days: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO spot_instance_days (instance_id, model_id, region_id, hit_day)
		SELECT instance_id, model_id, region_id, max(notice_at - notice_at % 86400) FROM interruptions WHERE rolled = 0 AND notice_at <= ?
		GROUP BY instance_id, model_id, region_id
		ON CONFLICT (instance_id) DO UPDATE SET hit_day = `+greatest+`(coalesce(spot_instance_days.hit_day, 0), excluded.hit_day)`, unix(now)); err != nil {
		return fmt.Errorf("roll up interruption days: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE spot_runs SET rolled = 1 WHERE rolled = 0 AND ended_at <= ?`, unix(now)); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE interruptions SET rolled = 1 WHERE rolled = 0 AND notice_at <= ?`, unix(now))
	return err
}

// RollupAll folds all spot history up to now (demo seeding, tests).
func (db *DB) RollupAll(ctx context.Context, now time.Time) error {
	return db.inTx(ctx, "roll up rates", func(tx *sql.Tx) error { return db.rollup(ctx, tx, now) })
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
		Reasons: map[gpuportal.InterruptReason]int{}, TimeZone: db.Location.String(), ComputedAt: now}
	// The trailing counts, by whole UTC days: instances whose rolled-up
	// runs last ended (or interruptions last came) on a day of the window —
	// an index range count — plus those running, or with history the
	// scheduler has not rolled up yet, that the days do not count already.
	firstDay := unix(since) - unix(since)%86400
	// What has not been rolled up is a minute's worth at most: read it
	// through the partial indexes of rows not rolled up yet, which SQLite
	// (without statistics) would pass over for the model/region ones.
	runsToRoll, intsToRoll := "spot_runs", "interruptions i"
	if db.dialect == "sqlite" {
		runsToRoll, intsToRoll = "spot_runs INDEXED BY spot_runs_to_roll", "interruptions i INDEXED BY interruptions_to_roll"
	}
	if err := db.read.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM spot_instance_days WHERE model_id = ? AND region_id = ? AND ran_day >= ?) +
		(SELECT count(*) FROM (
			SELECT instance_id FROM spot_runs WHERE model_id = ? AND region_id = ? AND ended_at IS NULL AND started_at < ?
			UNION SELECT instance_id FROM `+runsToRoll+` WHERE rolled = 0 AND ended_at >= ? AND model_id = ? AND region_id = ?) AS r
			WHERE NOT EXISTS (SELECT 1 FROM spot_instance_days d WHERE d.instance_id = r.instance_id AND d.ran_day >= ?))`,
		model, region, firstDay, model, region, unix(now), unix(since), model, region, firstDay).Scan(&r.Trailing.Instances); err != nil {
		return nil, fmt.Errorf("rates: %w", err)
	}
	if err := db.read.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM spot_instance_days WHERE model_id = ? AND region_id = ? AND hit_day >= ?) +
		(SELECT count(DISTINCT i.instance_id) FROM `+intsToRoll+` WHERE i.rolled = 0 AND i.notice_at >= ? AND i.notice_at <= ? AND i.model_id = ? AND i.region_id = ?
			AND NOT EXISTS (SELECT 1 FROM spot_instance_days d WHERE d.instance_id = i.instance_id AND d.hit_day >= ?))`,
		model, region, firstDay, unix(since), unix(now), model, region, firstDay).Scan(&r.Trailing.Interrupted); err != nil {
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
	spotHours := 0.0
	for i := range r.ByHour {
		spotHours += r.GPUHours[i]
		if r.GPUHours[i] > 0 {
			r.ByHour[i] = float64(interrupts[i]) / r.GPUHours[i] * 100
		}
	}
	// The work the window's interruptions lost (measured when each ended).
	var lost int64
	var under int
	if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(lost_gpu_seconds), 0), count(*), coalesce(sum(CASE WHEN lost_gpu_seconds < gpus * ? THEN 1 ELSE 0 END), 0)
		FROM interruptions WHERE model_id = ? AND region_id = ? AND notice_at >= ? AND notice_at <= ? AND lost_gpu_seconds IS NOT NULL`,
		int64(gpuportal.LostUnder/time.Second), model, region, unix(since), unix(now)).Scan(&lost, &r.Trailing.MeasuredInterrupted, &under); err != nil {
		return nil, fmt.Errorf("rates: lost work: %w", err)
	}
	r.Trailing.LostGPUHours = float64(lost) / 3600
	r.Trailing.ShareLostUnder5Min = 1
	if r.Trailing.MeasuredInterrupted > 0 {
		r.Trailing.ShareLostUnder5Min = float64(under) / float64(r.Trailing.MeasuredInterrupted)
	}
	if spotHours > 0 {
		r.Trailing.LostPer100GPUHours = r.Trailing.LostGPUHours / spotHours * 100
	}
	if r.SafeUntil, err = db.SafeUntil(ctx, model, region, count); err != nil {
		return nil, err
	}
	return r, nil
}

// LostGPUSeconds is the work the interruptions noticed in [from, to) lost
// (those measured: their instances have ended), for `portal simulate`.
func (db *DB) LostGPUSeconds(ctx context.Context, from, to time.Time) (int64, error) {
	var lost int64
	if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(lost_gpu_seconds), 0) FROM interruptions WHERE notice_at >= ? AND notice_at < ?`, unix(from), unix(to)).Scan(&lost); err != nil {
		return 0, fmt.Errorf("lost work: %w", err)
	}
	return lost, nil
}
