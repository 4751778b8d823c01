package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// GPU health: a GPU whose agent reports a fault leaves service in the
// heartbeat's transaction; what ran on it ends (restarting elsewhere
// where its kind does) and its owner is credited for the hour in
// progress; a node whose GPUs keep failing is drained; an admin returns
// a repaired GPU.

// reportedFault is the fault a heartbeat's sample reports ("" for none).
func reportedFault(g gpuportal.GPUSample) string {
	if g.Health == nil || g.Health.Healthy {
		return ""
	}
	if g.Health.Reason == "" {
		return "unhealthy"
	}
	return g.Health.Reason
}

// gpuFailed takes a GPU out of service for good (until returned): the
// fault recorded, the instances on it ended with reason gpu_failure and
// credited, and the node drained after GPUFailuresToDrain failures in
// GPUFailureWindow. now is business time, as every charge's.
func (db *DB) gpuFailed(ctx context.Context, tx *sql.Tx, nodeID string, g gpuportal.GPUSample, now time.Time) error {
	reason := reportedFault(g)
	at := now
	if g.Health.At != nil && g.Health.At.Before(now) {
		at = *g.Health.At
	}
	if _, err := tx.ExecContext(ctx, `UPDATE gpus SET fault_reason = ?, fault_xid = ?, fault_at = ?, healthy = 0 WHERE uuid = ?`,
		reason, g.Health.XID, unix(at), g.UUID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO gpu_faults (gpu_uuid, node_id, reason, xid, at) VALUES (?, ?, ?, ?, ?)`,
		g.UUID, nodeID, reason, g.Health.XID, unix(at)); err != nil {
		return err
	}
	ids, err := scanAll(ctx, tx, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT i.id FROM instance_gpus ig JOIN instances i ON i.id = ig.instance_id
		WHERE ig.gpu_uuid = ? AND i.status IN ('pending', 'running', 'interrupting') ORDER BY i.id`, g.UUID)
	if err != nil {
		return err
	}
	for _, id := range ids {
		// Each in a savepoint of its own: one instance's bad data never
		// fails the heartbeat of its node (its owner is told instead,
		// as for a scheduler decision that failed).
		if err := inSavepoint(ctx, tx, func() error { return db.endOnGPUFailure(ctx, tx, id, g.UUID, reason, now) }); err != nil {
			var owner int64
			if qerr := tx.QueryRowContext(ctx, `SELECT user_id FROM instances WHERE id = ?`, id).Scan(&owner); qerr != nil {
				return fmt.Errorf("instance %d: %w", id, err)
			}
			if nerr := db.notify(ctx, tx, owner, gpuportal.NoteScheduleFailed, gpuportal.NoteParams{Kind: gpuportal.StepGPUFailure,
				Subject: fmt.Sprintf("instance %d", id), Reason: err.Error(), InstanceID: id}); nerr != nil {
				return nerr
			}
		}
	}
	if err := db.drainOnRepeatedFailures(ctx, tx, nodeID, now); err != nil {
		return err
	}
	return bumpNode(ctx, tx, nodeID)
}

// endOnGPUFailure ends an instance whose GPU failed under it: a spot
// instance (or a job's task) is interrupted and restarts elsewhere where
// its kind does; others fail. Either way the failure is its reason, it
// never counts in the spot rates, and its owner gets back the hour in
// progress (the policy's gpu_failure_credit_percent of it).
func (db *DB) endOnGPUFailure(ctx context.Context, tx *sql.Tx, id int64, uuid, reason string, now time.Time) error {
	i, err := instanceFor(ctx, tx, nil, id)
	if err != nil {
		return err
	}
	pol, err := db.policies(ctx, tx)
	if err != nil {
		return err
	}
	outcome := gpuportal.InstanceFailed
	if i.Kind == gpuportal.KindSpot || i.JobID != nil {
		outcome = gpuportal.InstanceInterrupted
	}
	credit := gpuFailureCredit(i, outcome, pol, now)
	if _, err := tx.ExecContext(ctx, `UPDATE instances SET interrupt_reason = ?, notice_at = coalesce(notice_at, ?), deadline_at = coalesce(deadline_at, ?) WHERE id = ?`,
		gpuportal.ReasonGPUFailure, unix(now), unix(now), i.ID); err != nil {
		return err
	}
	errText := fmt.Sprintf("GPU failure: %s (GPU %s)", reason, uuid)
	if err := db.finishAttempt(ctx, tx, i, outcome, nil, errText, false, endNodeLost, now); err != nil {
		return err
	}
	if credit > 0 {
		if err := db.postLedger(ctx, tx, ledgerPost{userID: i.UserID, at: now, kind: gpuportal.LedgerRefund, amount: -credit, instanceID: &i.ID,
			desc: fmt.Sprintf("Instance #%d: its GPU failed (%s) — the hour in progress credited", i.ID, reason)}); err != nil {
			return err
		}
	}
	return db.notify(ctx, tx, i.UserID, gpuportal.NoteGPUFailure, gpuportal.NoteParams{InstanceID: i.ID, Model: i.Model, Region: i.Region, Count: i.Count,
		Kind: string(i.Kind), Reason: reason, Refund: credit, Subject: string(outcome)})
}

// gpuFailureCredit is what the instance's owner gets back: what its run
// was charged beyond its whole hours (the hour in progress, and the
// minimum's rest if it applied), times the policy's percentage.
func gpuFailureCredit(i *gpuportal.Instance, outcome gpuportal.InstanceStatus, pol gpuportal.Policies, now time.Time) gpuportal.Fen {
	if i.StartedAt == nil {
		return 0
	}
	minutes := gpuportal.BillableMinutes(*i.StartedAt, now, i.Kind, outcome == gpuportal.InstanceInterrupted, false, pol.For(i.Model).OnDemandMinBillableMinutes)
	charged := gpuportal.RunCost(i.PricePerGPU, i.Count, minutes)
	wholeHours := int(now.Sub(*i.StartedAt) / time.Hour)
	inProgress := charged - gpuportal.RunCost(i.PricePerGPU, i.Count, min(minutes, wholeHours*60))
	return max(0, inProgress*gpuportal.Fen(pol.Global.GPUFailureCreditPercent)/100)
}

// drainOnRepeatedFailures drains a node whose GPUs failed
// GPUFailuresToDrain times within GPUFailureWindow, with a note saying why
// (audited as the system's doing).
func (db *DB) drainOnRepeatedFailures(ctx context.Context, tx *sql.Tx, nodeID string, now time.Time) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM gpu_faults WHERE node_id = ? AND at > ?`, nodeID, unix(now.Add(-gpuportal.GPUFailureWindow))).Scan(&n); err != nil {
		return err
	}
	if n < gpuportal.GPUFailuresToDrain {
		return nil
	}
	note := fmt.Sprintf("drained by the portal: %d GPU failures within %s", n, gpuportal.GPUFailureWindow)
	res, err := tx.ExecContext(ctx, `UPDATE nodes SET drain = 1, drain_note = ? WHERE id = ? AND drain = 0`, note, nodeID)
	if err != nil {
		return err
	}
	if changed, _ := res.RowsAffected(); changed == 0 {
		return nil
	}
	return db.audit(ctx, tx, 0, "node.drain", "node/"+nodeID, map[string]any{"drain": false}, map[string]any{"drain": true, "note": note})
}

// GPUFault is one failure of a GPU, as the fleet page lists it.
type GPUFault struct {
	ID         int64      `json:"id"`
	GPU        string     `json:"gpu_uuid"`
	Node       string     `json:"node_id"`
	Reason     string     `json:"reason"`
	XID        uint64     `json:"xid,omitempty"`
	At         time.Time  `json:"at"`
	ReturnedAt *time.Time `json:"returned_at,omitempty"`
}

// ReturnGPU puts a failed GPU back in service (an admin; audited). A GPU
// whose node still reports it faulty is 409 with that fault.
func (db *DB) ReturnGPU(ctx context.Context, actor *gpuportal.User, uuid string) error {
	if !actor.IsAdmin() {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins return GPUs to service.")
	}
	return db.kickAfter(ctx, db.inTx(ctx, "return GPU", func(tx *sql.Tx) error {
		var node, reason, reported string
		var faultAt sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT node_id, fault_reason, fault_at, reported_fault FROM gpus WHERE uuid = ?`, uuid).Scan(&node, &reason, &faultAt, &reported)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "GPU %s not found.", uuid)
		} else if err != nil {
			return err
		}
		if !faultAt.Valid {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "GPU %s is in service; there is nothing to return.", uuid)
		}
		if reported != "" {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "GPU %s still reports a fault (%s); repair or reset it first.", uuid, reported)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpus SET fault_reason = '', fault_xid = 0, fault_at = NULL, healthy = 1 WHERE uuid = ?`, uuid); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpu_faults SET returned_at = ?, returned_by = ? WHERE gpu_uuid = ? AND returned_at IS NULL`, db.Wall.Now().Unix(), actor.ID, uuid); err != nil {
			return err
		}
		if err := db.audit(ctx, tx, actor.ID, "gpu.return", "gpu/"+uuid, map[string]any{"fault": reason}, map[string]any{"healthy": true}); err != nil {
			return err
		}
		if err := bumpNode(ctx, tx, node); err != nil {
			return err
		}
		return recomputeCapacity(ctx, tx)
	}))
}

// GPUFaults lists the latest failures (newest first).
func (db *DB) GPUFaults(ctx context.Context, limit int) ([]GPUFault, error) {
	list, err := scanAll(ctx, db.read, func(r *sql.Rows, f *GPUFault) error {
		var at int64
		var returned sql.NullInt64
		err := r.Scan(&f.ID, &f.GPU, &f.Node, &f.Reason, &f.XID, &at, &returned)
		f.At, f.ReturnedAt = fromUnix(at), fromNullUnix(returned)
		return err
	}, `SELECT id, gpu_uuid, node_id, reason, xid, at, returned_at FROM gpu_faults ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("GPU faults: %w", err)
	}
	return list, nil
}
