package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

// One attempt of an instance, from its end: what it costs, whether it
// restarts, and interruptions with their notice.

// finishAttempt ends an instance's current run: bill it, free its GPUs and
// set its outcome; an interrupted auto-restart spot instance goes back to
// pending (on any node, same checkpoint directory).
func (db *DB) finishAttempt(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, outcome gpuportal.InstanceStatus, exitCode *int, errText string, userStopped bool, cause endCause, now time.Time) error {
	minutes, minimum := 0, 0
	if i.StartedAt != nil {
		policy, err := db.policies(ctx, tx)
		if err != nil {
			return err
		}
		interrupted := outcome == gpuportal.InstanceInterrupted
		minutes = gpuportal.BillableMinutes(*i.StartedAt, now, i.Kind, interrupted, userStopped, policy.For(i.Model).OnDemandMinBillableMinutes)
		if minutes > gpuportal.BillableMinutes(*i.StartedAt, now, i.Kind, interrupted, false, 0) {
			minimum = minutes // billed up to the minimum: said on its page and ledger line
		}
	}
	cost := gpuportal.RunCost(i.PricePerGPU, i.Count, minutes)
	var code sql.NullInt64
	if exitCode != nil {
		code = sql.NullInt64{Int64: int64(*exitCode), Valid: true}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM instance_gpus WHERE instance_id = ?`, i.ID); err != nil {
		return err
	}
	if err := recordRunEnd(ctx, tx, i, now); err != nil {
		return err
	}
	if outcome == gpuportal.InstanceInterrupted && i.StartedAt != nil {
		// What the interruption cost the workload: GPU-seconds since its
		// last checkpoint report (since the run started when none).
		lost := i.WorkAtRisk(now)
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET lost_gpu_seconds = coalesce(lost_gpu_seconds, 0) + ? WHERE id = ?`, lost, i.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE interruptions SET lost_gpu_seconds = ? WHERE id = (SELECT max(id) FROM interruptions WHERE instance_id = ?) AND lost_gpu_seconds IS NULL`, lost, i.ID); err != nil {
			return err
		}
	}
	var disabled bool
	if err := tx.QueryRowContext(ctx, `SELECT disabled_at IS NOT NULL FROM users WHERE id = ?`, i.UserID).Scan(&disabled); err != nil {
		return fmt.Errorf("owner of instance %d: %w", i.ID, err)
	}
	if gpuportal.AutoRestarts(i, outcome, disabled) {
		_, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'pending', last_node_id = node_id, node_id = NULL, started_at = NULL, billed_minutes = billed_minutes + ?, cost_fen = cost_fen + ?,
			restarts = restarts + 1, exit_code = ?, error = ? WHERE id = ?`, minutes, cost, code, errText, i.ID)
		if err != nil {
			return err
		}
	} else {
		var applied sql.NullInt64
		if minimum > 0 {
			applied = sql.NullInt64{Int64: int64(minimum), Valid: true}
		}
		_, err := tx.ExecContext(ctx, `UPDATE instances SET status = ?, ended_at = ?, billed_minutes = billed_minutes + ?, cost_fen = cost_fen + ?, exit_code = ?, error = ?, minimum_applied_minutes = ? WHERE id = ?`,
			outcome, unix(now), minutes, cost, code, errText, applied, i.ID)
		if err != nil {
			return err
		}
		// A kept disk is billed while kept, from its end on (a disk within
		// the free part was not billed while it ran).
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET disk_billed_until = coalesce(disk_billed_until, ?) WHERE id = ? AND disk_kept <> 0 AND disk_released_at IS NULL`,
			unix(now), i.ID); err != nil {
			return err
		}
	}
	if i.JobID != nil {
		if err := db.taskAttemptEnded(ctx, tx, i, outcome, exitCode, errText, userStopped, cause, now); err != nil {
			return err
		}
	}
	if cost > 0 {
		desc := gpuportal.RunLedgerLine(i.ID, i.Kind, i.Count, i.Model, minutes, minimum)
		if err := db.postLedger(ctx, tx, ledgerPost{userID: i.UserID, at: now, kind: gpuportal.LedgerInstance, amount: cost, instanceID: &i.ID, desc: desc}); err != nil {
			return err
		}
	}
	return db.emitInstance(ctx, tx, i.ID, instanceEndEvent(outcome))
}

// interrupt gives a running spot instance its notice: SIGTERM at deadline,
// SIGKILL grace later. It is recorded for the published rates.
func (db *DB) interrupt(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, reason gpuportal.InterruptReason, now, deadline time.Time, grace int) error {
	// Only an instance on a node can be given notice: one waiting for a
	// place (an auto-restart the same tick sent back to pending, say) has
	// nothing to stop, and would stay "interrupting" with no node for ever.
	res, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'interrupting', notice_at = ?, notice_wall_at = ?, deadline_at = ?, grace_seconds = ?, interrupt_reason = ?
		WHERE id = ? AND status IN ('pending', 'running') AND node_id IS NOT NULL`, unix(now), db.Wall.Now().Unix(), unix(deadline), grace, reason, i.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	// A job task giving way to other spot work, or a stop for lack of
	// balance, is not an interruption of spot capacity: the published rates
	// leave them out.
	if gpuportal.CountsForRates(reason) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO interruptions (instance_id, user_id, model_id, region_id, gpus, notice_at, deadline_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			i.ID, i.UserID, i.Model, i.Region, i.Count, unix(now), unix(deadline), reason); err != nil {
			return err
		}
	}
	if err := db.emitInstance(ctx, tx, i.ID, gpuportal.EventInstanceNotice); err != nil {
		return err
	}
	// A job's tasks are queued again by themselves; the job page counts
	// their interruptions instead of a message for each.
	if i.JobID == nil {
		if err := db.notify(ctx, tx, i.UserID, gpuportal.NoteSpotInterruption, gpuportal.NoteParams{InstanceID: i.ID, Model: i.Model, Region: i.Region, Count: i.Count, Deadline: deadline, Reason: string(reason), Kind: string(i.Kind)}); err != nil {
			return err
		}
	}
	return bumpNode(ctx, tx, i.Node)
}

// instanceEndEvent is the webhook event of a run's outcome.
func instanceEndEvent(outcome gpuportal.InstanceStatus) string {
	switch outcome {
	case gpuportal.InstanceInterrupted:
		return gpuportal.EventInstanceInterrupted
	case gpuportal.InstanceFailed:
		return gpuportal.EventInstanceFailed
	}
	return gpuportal.EventInstanceStopped
}
