package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// The agent's side of instances: what a node should run (DesiredFor), and
// what it reports back about the workloads it runs (ApplyWorkloadReports).

// bumpNode tells a node's agent that its desired state changed: agents
// wait on the node's revision (DesiredFor answers with it).
func bumpNode(ctx context.Context, tx *sql.Tx, nodeID string) error {
	if nodeID == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE nodes SET revision = revision + 1 WHERE id = ?`, nodeID)
	return err
}

// DesiredFor is what a node should run now.
func (db *DB) DesiredFor(ctx context.Context, nodeID string) (gpuportal.AgentDesired, error) {
	d := gpuportal.AgentDesired{Workloads: []gpuportal.DesiredWorkload{}}
	// Whether sessions wait for this node comes with its revision: every
	// heartbeat reads this, almost always with no session to ask for.
	var sessionsWait bool
	var rawEnv string // the region's workload variables (JSON)
	if err := db.read.QueryRowContext(ctx, `SELECT revision, heartbeat_seconds, rotate_token,
			EXISTS (SELECT 1 FROM `+db.indexedAs("sessions", "s", "sessions_open_by_node")+` WHERE s.node_id = nodes.id AND s.closed_at IS NULL AND s.connected_at IS NULL AND s.opened_at >= ?),
			coalesce((SELECT r.workload_env FROM regions r WHERE r.id = nodes.region_id), '')
		FROM nodes WHERE id = ?`, unix(db.Wall.Now().Add(-gpuportal.SessionConnectTimeout)), nodeID).Scan(&d.Revision, &d.HeartbeatSeconds, &d.RotateToken, &sessionsWait, &rawEnv); err != nil {
		return d, fmt.Errorf("node revision: %w", err)
	}
	// Instances asked to stop stay listed (with Stop) until their exit is
	// applied: dropping them earlier lost the exits of workloads that
	// ended between two reports, and left them billing forever.
	// With each its job's task count and its reservation's end (read
	// here, not one by one: every heartbeat of every node reads this).
	rows, err := db.read.QueryContext(ctx, `SELECT `+instanceColumns+`, notice_wall_at, grace_seconds, stop_requested_at IS NOT NULL, rebalance_at IS NOT NULL,
			coalesce((SELECT j.task_count FROM jobs j WHERE j.id = instances.job_id), 0),
			coalesce((SELECT r.end_at FROM reservations r WHERE r.id = instances.reservation_id), 0)
		FROM instances WHERE node_id = ? AND status IN ('pending', 'running', 'interrupting') ORDER BY id`, nodeID)
	if err != nil {
		return d, fmt.Errorf("desired state: %w", err)
	}
	type extra struct {
		wall           sql.NullInt64
		grace          sql.NullInt64
		stop           bool
		rebalance      bool
		tasks          int   // its job's task count
		reservationEnd int64 // its reservation's end (unix)
	}
	var list []*gpuportal.Instance
	var extras []extra
	for rows.Next() {
		var x extra
		i, err := scanInstance(rows, &x.wall, &x.grace, &x.stop, &x.rebalance, &x.tasks, &x.reservationEnd)
		if err != nil {
			rows.Close()
			return d, err
		}
		list = append(list, i)
		extras = append(extras, x)
	}
	rows.Close()
	if err := db.instanceGPUs(ctx, db.read, list); err != nil {
		return d, err
	}
	if err := db.instanceVolumes(ctx, db.read, list); err != nil {
		return d, err
	}
	wallNow, now := db.Wall.Now(), db.now()
	var regionEnv map[string]string
	if len(list) > 0 && rawEnv != "" {
		if err := json.Unmarshal([]byte(rawEnv), &regionEnv); err != nil {
			return d, fmt.Errorf("the region's workload variables: %w", err)
		}
	}
	for k, i := range list {
		dw := gpuportal.DesiredWorkload{InstanceID: i.ID, Attempt: i.Attempt, Lifecycle: i.Lifecycle(), GPUs: i.GPUs, Command: i.Command, Image: i.Image, CheckpointKey: i.CheckpointKey,
			Stop: extras[k].stop, Rebalance: extras[k].rebalance, Volumes: i.Volumes, Env: regionEnv}
		if i.Disk != nil {
			dw.DiskGiB, dw.DiskKept = i.Disk.SizeGiB, i.Disk.Kept
		}
		if n, ok := gpuportal.PrivateImageOf(i.Image); ok {
			dw.ImageArchive = gpuportal.PrivateImageArchive(n)
		}
		if i.JobID != nil {
			dw.Task = &gpuportal.TaskRef{JobID: *i.JobID, Index: *i.TaskIndex, Count: extras[k].tasks}
		}
		if i.Status == gpuportal.InstanceInterrupting && i.Interruption != nil && !dw.Stop {
			// The notice counts in real time from when it was issued, so a
			// test clock moved ahead does not eat it.
			notice := i.Interruption.Deadline.Sub(i.Interruption.NoticeAt)
			if extras[k].wall.Valid {
				notice -= wallNow.Sub(time.Unix(extras[k].wall.Int64, 0))
			}
			action := gpuportal.NoticeTerminate
			if i.Interruption.Reason == gpuportal.ReasonBalance {
				action = gpuportal.NoticeStop
			}
			dw.Interrupt = &gpuportal.Interruption{Action: action, DeadlineInSeconds: max(0, notice.Seconds()), GraceSeconds: int(extras[k].grace.Int64), Reason: i.Interruption.Reason}
		}
		if dw.Interrupt == nil && !dw.Stop {
			dw.Interrupt = drillNotice(i, wallNow)
		}
		if i.Kind == gpuportal.KindReserved && i.ReservationID != nil && !dw.Stop {
			if left := fromUnix(extras[k].reservationEnd).Sub(now); left <= gpuportal.ReservedStopNotice {
				dw.Interrupt = &gpuportal.Interruption{Action: gpuportal.NoticeStop, DeadlineInSeconds: max(0, left.Seconds()), GraceSeconds: reservedStopGraceSeconds, Reason: gpuportal.ReasonReservationEnd}
			}
		}
		d.Workloads = append(d.Workloads, dw)
	}
	if sessionsWait {
		if d.Sessions, err = db.desiredSessions(ctx, nodeID); err != nil {
			return d, fmt.Errorf("desired sessions: %w", err)
		}
	}
	return d, nil
}

// ApplyWorkloadReports records what a node's agent says about its
// workloads: started → running; ended → interrupted, stopped or failed,
// billed, GPUs released, auto-restart spot instances pending again. Reports
// are idempotent: an old or repeated one changes nothing.
func (db *DB) ApplyWorkloadReports(ctx context.Context, nodeID string, reports []gpuportal.WorkloadStatus) error {
	if len(reports) == 0 {
		return nil
	}
	// Most reports repeat the last: read first, and take the writer lock
	// only when one changes something.
	if news, err := db.reportsChangeAnything(ctx, nodeID, reports); err != nil {
		return fmt.Errorf("apply workload reports: %w", err)
	} else if !news {
		return nil
	}
	var changed bool
	err := db.inTx(ctx, "apply workload reports", func(tx *sql.Tx) error {
		var err error
		changed, err = db.applyReports(ctx, tx, nodeID, reports, db.now())
		return err
	})
	if err != nil {
		return fmt.Errorf("apply workload reports: %w", err)
	}
	if changed {
		db.wake(ctx, nodeID)
		db.Kick(ctx) // freed GPUs may let pending instances start
	}
	return nil
}

// NodeReports is one node's workload reports.
type NodeReports struct {
	Node    string
	Reports []gpuportal.WorkloadStatus
}

// ApplyReportsOfNodes applies several nodes' reports in one transaction,
// each node's as ApplyWorkloadReports applies them: for a caller that has
// every node's news at once (the simulator's nodes, a step at a time),
// without a transaction and a read ahead for each node.
func (db *DB) ApplyReportsOfNodes(ctx context.Context, batch []NodeReports) error {
	if len(batch) == 0 {
		return nil
	}
	var woken []string
	err := db.inTx(ctx, "apply workload reports", func(tx *sql.Tx) error {
		now := db.now()
		for _, n := range batch {
			changed, err := db.applyReports(ctx, tx, n.Node, n.Reports, now)
			if err != nil {
				return fmt.Errorf("node %s: %w", n.Node, err)
			}
			if changed {
				woken = append(woken, n.Node)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply workload reports: %w", err)
	}
	if len(woken) > 0 {
		db.wake(ctx, woken...)
		db.Kick(ctx)
	}
	return nil
}

// applyReports applies a node's workload reports in tx and says whether
// one changed something (the node's desired state has then moved on).
func (db *DB) applyReports(ctx context.Context, tx *sql.Tx, nodeID string, reports []gpuportal.WorkloadStatus, now time.Time) (bool, error) {
	changed := false
	for _, r := range reports {
		i, err := scanInstance(tx.QueryRowContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE id = ? AND node_id = ? AND attempt = ?`, r.InstanceID, nodeID, r.Attempt))
		if errors.Is(err, sql.ErrNoRows) {
			if r.State == gpuportal.WorkloadExited {
				// An old attempt's end: an instance restarted while this
				// node was away may start now.
				if res, err := tx.ExecContext(ctx, `UPDATE instances SET unconfirmed_node = NULL, unconfirmed_since = NULL WHERE id = ? AND unconfirmed_node = ?`, r.InstanceID, nodeID); err != nil {
					return false, err
				} else if n, _ := res.RowsAffected(); n > 0 {
					changed = true
				}
			}
			continue
		} else if err != nil {
			return false, err
		}
		if tail := gpuportal.LogTailOf(r.LogTail); r.LogTail != "" && tail != i.LogTail {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET log_tail = ? WHERE id = ?`, tail, i.ID); err != nil {
				return false, named("update instances", err)
			}
		}
		if err := recordDisk(ctx, tx, i, r.Disk); err != nil {
			return false, named("record disk", err)
		}
		if err := recordCheckpoint(ctx, tx, i, r, now); err != nil {
			return false, named("record checkpoint", err)
		}
		if err := recordDrillReady(ctx, tx, i, r); err != nil {
			return false, named("record drill ready", err)
		}
		switch gpuportal.ReportTransition(i.Status, r) {
		case gpuportal.ReportStarted:
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'running', started_at = ? WHERE id = ?`, unix(now), i.ID); err != nil {
				return false, named("update instances", err)
			}
			if err := db.startDiskBilling(ctx, tx, i, now); err != nil {
				return false, named("start disk billing", err)
			}
			if err := recordRunStart(ctx, tx, i, now); err != nil {
				return false, named("record run start", err)
			}
			if err := db.emitInstance(ctx, tx, i.ID, gpuportal.EventInstanceRunning); err != nil {
				return false, err
			}
		case gpuportal.ReportEnded:
			var stopAsked sql.NullInt64
			if err := tx.QueryRowContext(ctx, `SELECT stop_requested_at FROM instances WHERE id = ?`, i.ID).Scan(&stopAsked); err != nil {
				return false, named("read instances", err)
			}
			outcome := gpuportal.WorkloadOutcome(i, stopAsked.Valid, r)
			// A reserved instance's GPUs stay its reservation's: taking
			// them out of service would move (or refund) the booking
			// for what its own owner left running on them.
			if !r.GPUsFree && i.Kind != gpuportal.KindReserved {
				if err := holdBusyGPUs(ctx, tx, i); err != nil {
					return false, fmt.Errorf("hold the GPUs instance %d left busy: %w", i.ID, err)
				}
			}
			if err := db.finishAttempt(ctx, tx, i, outcome, r.ExitCode, r.Error, stopAsked.Valid, endReported, now); err != nil {
				return false, named("finish attempt", err)
			}
			changed = true
		}
	}
	if changed {
		return true, bumpNode(ctx, tx, nodeID)
	}
	return false, nil
}

// reportsChangeAnything reads (outside any write transaction) whether one
// of a node's workload reports changes something (gpuportal.ReportChanges),
// or ends an old attempt that a restarted instance waits on.
func (db *DB) reportsChangeAnything(ctx context.Context, nodeID string, reports []gpuportal.WorkloadStatus) (bool, error) {
	// One read of what the node runs, not one per report (a report of an
	// instance that has ended is read on its own).
	type kept struct {
		i     *gpuportal.Instance
		stamp string
	}
	onNode := map[int64]kept{}
	rows, err := db.read.QueryContext(ctx, `SELECT `+instanceColumns+`, coalesce(checkpoint_reported, '') FROM instances WHERE node_id = ? AND status IN ('pending', 'running', 'interrupting')`, nodeID)
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var stamp string
		i, err := scanInstance(rows, &stamp)
		if err != nil {
			rows.Close()
			return false, err
		}
		onNode[i.ID] = kept{i, stamp}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	for _, r := range reports {
		k, ok := onNode[r.InstanceID]
		if !ok || k.i.Attempt != r.Attempt {
			i, err := scanInstance(db.read.QueryRowContext(ctx, `SELECT `+instanceColumns+`, coalesce(checkpoint_reported, '') FROM instances WHERE id = ? AND node_id = ? AND attempt = ?`,
				r.InstanceID, nodeID, r.Attempt), &k.stamp)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return false, err
			}
			k.i, ok = i, err == nil
		}
		if ok {
			if gpuportal.ReportChanges(k.i, r, k.stamp) {
				return true, nil
			}
			continue
		}
		if r.State != gpuportal.WorkloadExited {
			continue
		}
		// An old attempt's end that a restarted instance may wait on.
		var waiting int
		if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM instances WHERE id = ? AND unconfirmed_node = ?`, r.InstanceID, nodeID).Scan(&waiting); err != nil {
			return false, err
		}
		if waiting > 0 {
			return true, nil
		}
	}
	return false, nil
}

// recordCheckpoint stamps, in business time, a checkpoint report (and a
// "ready" after a notice) the agent passed on. The agent repeats its last
// report in every status; its own stamp tells a new one from a repeat.
func recordCheckpoint(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, r gpuportal.WorkloadStatus, now time.Time) error {
	if r.CheckpointAt != nil {
		stamp := gpuportal.CheckpointStamp(*r.CheckpointAt)
		res, err := tx.ExecContext(ctx, `UPDATE instances SET last_checkpoint_at = ?, checkpoint_reported = ? WHERE id = ? AND coalesce(checkpoint_reported, '') <> ?`, unix(now), stamp, i.ID, stamp)
		if err != nil {
			return fmt.Errorf("record checkpoint of instance %d: %w", i.ID, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			i.LastCheckpoint = &now
		}
	}
	if r.ReadyAt != nil && i.ReadyAt == nil && i.Status == gpuportal.InstanceInterrupting {
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET ready_at = ? WHERE id = ?`, unix(now), i.ID); err != nil {
			return fmt.Errorf("record ready of instance %d: %w", i.ID, err)
		}
		i.ReadyAt = &now
	}
	return nil
}

// holdBusyGPUs takes the GPUs of an ended instance out of service when its
// agent could not see them free (something of the instance is still on
// them): handing them to the next tenant would share them with it. They
// come back when their node reports them idle (see heartbeatChangingCapacity).
func holdBusyGPUs(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance) error {
	if _, err := tx.ExecContext(ctx, `UPDATE gpus SET healthy = 0, busy_after_instance = ? WHERE uuid IN (SELECT gpu_uuid FROM instance_gpus WHERE instance_id = ?)`, i.ID, i.ID); err != nil {
		return err
	}
	return recomputeCapacity(ctx, tx)
}
