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
	err := db.inTx(ctx, "bulk insert reservations for benchmark", func(tx *sql.Tx) error {
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
	return db.inTx(ctx, "bulk run spot for benchmark", func(tx *sql.Tx) error {
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

// SpotRunForTest is a hand-built spot run for the rate tests.
type SpotRunForTest struct {
	Instance   int64
	GPUs       int
	Start, End time.Time
}

// InterruptionForTest is a hand-built interruption.
type InterruptionForTest struct {
	Instance int64
	At       time.Time
	Reason   gpuportal.InterruptReason
}

// InsertSpotHistoryForTest writes runs and interruptions (with the
// instances they need) directly.
func (db *DB) InsertSpotHistoryForTest(ctx context.Context, userID int64, model, region string, runs []SpotRunForTest, ints []InterruptionForTest) error {
	return db.inTx(ctx, "insert spot history for test", func(tx *sql.Tx) error {
		for _, r := range runs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO instances (id, user_id, kind, model_id, region_id, count, command, status, checkpoint_key, price_fen, created_at)
				VALUES (?, ?, 'spot', ?, ?, ?, 'x', 'stopped', 'k', 240, ?) ON CONFLICT (id) DO NOTHING`, r.Instance, userID, model, region, r.GPUs, unix(r.Start)); err != nil {
				return err
			}
			var end any
			if !r.End.IsZero() {
				end = unix(r.End)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO spot_runs (instance_id, attempt, model_id, region_id, gpus, started_at, ended_at)
				VALUES (?, (SELECT coalesce(max(attempt), 0) + 1 FROM spot_runs WHERE instance_id = ?), ?, ?, ?, ?, ?)`,
				r.Instance, r.Instance, model, region, r.GPUs, unix(r.Start), end); err != nil {
				return err
			}
		}
		for _, i := range ints {
			if _, err := tx.ExecContext(ctx, `INSERT INTO interruptions (instance_id, user_id, model_id, region_id, gpus, notice_at, deadline_at, reason) VALUES (?, ?, ?, ?, 1, ?, ?, ?)`,
				i.Instance, userID, model, region, unix(i.At), unix(i.At.Add(2*time.Minute)), i.Reason); err != nil {
				return err
			}
		}
		return nil
	})
}

// BulkSpotHistoryForBenchmark writes a year of spot runs (perHour starts an
// hour, a few GPUs each, hours long) and their interruptions, then rolls
// them up.
func (db *DB) BulkSpotHistoryForBenchmark(ctx context.Context, userID int64, model, region string, now time.Time, hours, perHour int) error {
	err := db.inTx(ctx, "bulk spot history for benchmark", func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO instances (id, user_id, kind, model_id, region_id, count, command, status, checkpoint_key, price_fen, created_at)
			VALUES (?, ?, 'spot', ?, ?, ?, 'x', 'stopped', '', 240, ?)`)
		if err != nil {
			return err
		}
		run, err := tx.PrepareContext(ctx, `INSERT INTO spot_runs (instance_id, attempt, model_id, region_id, gpus, started_at, ended_at) VALUES (?, 1, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		intr, err := tx.PrepareContext(ctx, `INSERT INTO interruptions (instance_id, user_id, model_id, region_id, gpus, notice_at, deadline_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?, 'reservation')`)
		if err != nil {
			return err
		}
		id := int64(1_000_000)
		start0 := now.Add(-time.Duration(hours) * time.Hour)
		for h := 0; h < hours; h++ {
			for k := 0; k < perHour; k++ {
				id++
				start := start0.Add(time.Duration(h)*time.Hour + time.Duration(k*3600/perHour)*time.Second)
				end := start.Add(time.Duration(2+k%14) * time.Hour)
				if end.After(now) {
					end = now
				}
				gpus := 1 + k%4
				if _, err := ins.ExecContext(ctx, id, userID, model, region, gpus, unix(start)); err != nil {
					return err
				}
				if _, err := run.ExecContext(ctx, id, model, region, gpus, unix(start), unix(end)); err != nil {
					return err
				}
				if k%17 == 0 {
					if _, err := intr.ExecContext(ctx, id, userID, model, region, gpus, unix(end), unix(end.Add(2*time.Minute))); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return db.RollupAll(ctx, now)
}

// Wake exposes wake to the cross-portal tests.
func (db *DB) Wake(ctx context.Context, nodeIDs ...string) { db.wake(ctx, nodeIDs...) }

// JournalSizeLimit is the write connection's journal_size_limit (SQLite).
func (db *DB) JournalSizeLimit(ctx context.Context) (int64, error) {
	var n int64
	err := db.write.QueryRowContext(ctx, `PRAGMA journal_size_limit`).Scan(&n)
	return n, err
}

// LeaderKey is the advisory lock key of the scheduler's leadership.
func (db *DB) LeaderKey() int64 { return db.leaderKey }

// FailDecisionsForTest makes the tick's applier fail the decisions fail
// names (returning an error for them), as if their own writes had failed.
func (db *DB) FailDecisionsForTest(fail func(step, subject string) error) { db.decisionFault = fail }

// MarkDisabledForTest sets an account disabled without closing it down,
// as a write that raced the close-down would leave it.
func (db *DB) MarkDisabledForTest(ctx context.Context, userID int64) error {
	_, err := db.write.ExecContext(ctx, `UPDATE users SET disabled_at = ? WHERE id = ?`, unix(db.now()), userID)
	return err
}

// BulkTeamForBenchmark gives team (whose account is account) members more
// members and n instances they made, ended this month with their charges
// in the team's ledger, written in bulk.
func (db *DB) BulkTeamForBenchmark(ctx context.Context, team, account int64, members, n int) ([]int64, error) {
	var ids []int64
	err := db.inTx(ctx, "bulk team for benchmark", func(tx *sql.Tx) error {
		now := db.now()
		for k := range members {
			var id int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO users (email, name, phone, password_hash, role, lang, created_at) VALUES (?, ?, '', ?, 'customer', '', ?) RETURNING id`,
				fmt.Sprintf("member-%d@example.com", k), fmt.Sprintf("Member %d", k), noLogin, unix(now)).Scan(&id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (user_id) VALUES (?)`, id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO team_members (team_id, user_id, role, monthly_spend_limit_fen, max_running_gpus, joined_at) VALUES (?, ?, 'member', 5000000, 8, ?)`,
				team, id, unix(now)); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		inst, err := tx.PrepareContext(ctx, `INSERT INTO instances (user_id, kind, model_id, region_id, count, command, status, checkpoint_key, price_fen, created_at, started_at, ended_at,
			billed_minutes, cost_fen, created_by) VALUES (?, 'on_demand', 'a100-80g', 'cd-1', 1, 'train', 'stopped', '', 800, ?, ?, ?, 60, 800, ?) RETURNING id`)
		if err != nil {
			return err
		}
		defer inst.Close()
		for k := range n {
			var id int64
			at := now.Add(-time.Duration(k%600) * time.Minute)
			if err := inst.QueryRowContext(ctx, account, unix(at), unix(at), unix(at.Add(time.Hour)), ids[k%len(ids)]).Scan(&id); err != nil {
				return err
			}
			if err := db.postLedger(ctx, tx, ledgerPost{userID: account, at: at, kind: gpuportal.LedgerInstance, amount: 800, instanceID: &id, desc: "bench"}); err != nil {
				return err
			}
		}
		return nil
	})
	return ids, err
}

// ReservedGPUs is the map of the active reservations' GPUs as the tick
// reads it (kept between ticks: kept.go).
func (db *DB) ReservedGPUs(ctx context.Context) (map[string]int64, error) {
	return (&assignments{}).reservations(ctx, db, db.read)
}

// AccountSums is each account's live runs summed as the tick reads them
// (kept between reads, accountsums.go) and as one aggregate reads them
// now, each sum written out.
func (db *DB) AccountSums(ctx context.Context) (kept, now []string, err error) {
	k, err := db.accountSums.read(ctx, db, db.read)
	if err != nil {
		return nil, nil, err
	}
	n, err := db.sumAccounts(ctx, db.read, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range k {
		kept = append(kept, fmt.Sprintf("%+v", a))
	}
	for _, a := range n {
		now = append(now, fmt.Sprintf("%+v", a))
	}
	return kept, now, nil
}
