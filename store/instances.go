package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"gpuportal/scheduler"
	"strings"
	"time"

	"gpuportal"
)

const instanceColumns = `id, user_id, kind, model_id, region_id, count, command, auto_restart, reservation_id, status, coalesce(node_id, ''),
	attempt, checkpoint_key, price_fen, created_at, started_at, ended_at, cost_fen, notice_at, deadline_at, interrupt_reason, exit_code, error, restarts, log_tail, image,
	job_id, task_index, last_checkpoint_at, lost_gpu_seconds, ready_at, drill_started_at, drill_wall_at, drill_seconds, drill_ready_after, idle_stop_minutes, idle_since, coalesce(stop_reason, '')`

// scanInstance reads instanceColumns, then any extra columns into extra.
func scanInstance(row interface{ Scan(...any) error }, extra ...any) (*gpuportal.Instance, error) {
	var i gpuportal.Instance
	var resID, started, ended, notice, deadline, exit, jobID, taskIndex, checkpoint, lost, ready, drillAt, drillWall, drillSeconds sql.NullInt64
	var drillReady sql.NullFloat64
	var idleStop, idleSince sql.NullInt64
	var reason sql.NullString
	var created int64
	dest := append([]any{&i.ID, &i.UserID, &i.Kind, &i.Model, &i.Region, &i.Count, &i.Command, &i.AutoRestart, &resID, &i.Status, &i.Node,
		&i.Attempt, &i.CheckpointKey, &i.PricePerGPU, &created, &started, &ended, &i.Cost, &notice, &deadline, &reason, &exit, &i.Error, &i.Restarts, &i.LogTail, &i.Image,
		&jobID, &taskIndex, &checkpoint, &lost, &ready, &drillAt, &drillWall, &drillSeconds, &drillReady, &idleStop, &idleSince, &i.StopReason}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if jobID.Valid && taskIndex.Valid {
		t := int(taskIndex.Int64)
		i.JobID, i.TaskIndex = &jobID.Int64, &t
	}
	i.CreatedAt = fromUnix(created)
	i.StartedAt, i.EndedAt = fromNullUnix(started), fromNullUnix(ended)
	i.LastCheckpoint, i.ReadyAt = fromNullUnix(checkpoint), fromNullUnix(ready)
	if lost.Valid {
		i.Lost = &lost.Int64
	}
	if idleStop.Valid {
		m := int(idleStop.Int64)
		i.IdleStopMinutes = &m
	}
	i.IdleSince = fromNullUnix(idleSince)
	if drillAt.Valid && drillWall.Valid {
		i.Drill = &gpuportal.Drill{StartedAt: fromUnix(drillAt.Int64), Deadline: fromUnix(drillAt.Int64 + drillSeconds.Int64),
			WallAt: time.Unix(drillWall.Int64, 0), Seconds: int(drillSeconds.Int64), Result: gpuportal.DrillRunning}
		if drillReady.Valid {
			i.Drill.ReadyAfterSeconds = &drillReady.Float64
		}
	}
	if resID.Valid {
		i.ReservationID = &resID.Int64
	}
	if notice.Valid && deadline.Valid {
		i.Interruption = &gpuportal.InstanceInterruption{NoticeAt: fromUnix(notice.Int64), Deadline: fromUnix(deadline.Int64), Reason: reason.String}
	}
	if exit.Valid {
		c := int(exit.Int64)
		i.ExitCode = &c
	}
	i.GPUs = []string{}
	return &i, nil
}

// live fills in what an instance's reader sees change by the minute: its
// cost so far, the work at risk, its drill's result.
func (db *DB) live(i *gpuportal.Instance) {
	liveCost(i, db.now())
	if i.Drill != nil {
		i.Drill.Settle(db.Wall.Now())
	}
}

// liveCost adds the running attempt's cost so far (every started minute)
// and the work an interruption now would lose.
func liveCost(i *gpuportal.Instance, now time.Time) {
	if i.StartedAt != nil && (i.Status == gpuportal.InstanceRunning || i.Status == gpuportal.InstanceInterrupting) {
		min := gpuportal.BillableMinutes(*i.StartedAt, now, i.Kind, false, false, 0)
		i.Cost += gpuportal.RunCost(i.PricePerGPU, i.Count, min)
		work := i.WorkAtRisk(now)
		i.WorkSinceCheckpoint = &work
	}
}

func (db *DB) instanceGPUs(ctx context.Context, q queryer, list []*gpuportal.Instance) error {
	if len(list) == 0 {
		return nil
	}
	byID := map[int64]*gpuportal.Instance{}
	ids := make([]any, 0, len(list))
	for _, i := range list {
		byID[i.ID] = i
		ids = append(ids, i.ID)
	}
	// The ids are bound as parameters, not written into the text: one
	// statement per list length stays prepared (a node's few instances, a
	// page's), where a text per list filled the statement cache and
	// emptied it again.
	rows, err := q.QueryContext(ctx, `SELECT ig.instance_id, ig.gpu_uuid FROM instance_gpus ig JOIN gpus g ON g.uuid = ig.gpu_uuid
		WHERE ig.instance_id IN (?`+repeatArg(len(ids)-1)+`) ORDER BY g.idx`, ids...)
	if err != nil {
		return fmt.Errorf("instance gpus: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var uuid string
		if err := rows.Scan(&id, &uuid); err != nil {
			return err
		}
		byID[id].GPUs = append(byID[id].GPUs, uuid)
	}
	return rows.Err()
}

// Instances lists the user's instances (an admin's: everybody's), newest first.
func (db *DB) Instances(ctx context.Context, user *gpuportal.User, limit int) ([]gpuportal.Instance, error) {
	return db.InstanceList(ctx, user, InstanceFilter{Limit: limit})
}

// InstanceFilter narrows an instance list.
type InstanceFilter struct {
	// Tab: "active" (pending, running, interrupting) or "ended"; "" for all.
	Tab    string
	Limit  int // default 200, at most 1000
	Offset int
	Total  *int // set: also how many the whole list has
	// UserID: only this user's (an admin's view of one customer); 0: all
	// the caller may see.
	UserID int64
}

// Instance list tabs.
const (
	TabActive = "active"
	TabEnded  = "ended"
)

// InstanceList lists the user's instances (an admin's: everybody's),
// newest first, a page at a time.
func (db *DB) InstanceList(ctx context.Context, user *gpuportal.User, f InstanceFilter) ([]gpuportal.Instance, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 200
	}
	where, args := []string{"1 = 1"}, []any{}
	if !user.IsAdmin() {
		where, args = append(where, "user_id = ?"), append(args, user.ID)
	}
	if f.UserID != 0 {
		where, args = append(where, "user_id = ?"), append(args, f.UserID)
	}
	switch f.Tab {
	case "":
	case TabActive:
		where = append(where, "status IN ('pending', 'running', 'interrupting')")
	case TabEnded:
		where = append(where, "status IN ('interrupted', 'stopped', 'failed')")
	default:
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "tab", "Unknown list %q: active or ended.", f.Tab)
	}
	if err := db.count(ctx, Page{Total: f.Total}, "instances", strings.Join(where, " AND "), args...); err != nil {
		return nil, err
	}
	list, err := scanEach(ctx, db.read, scanOneInstance, `SELECT `+instanceColumns+` FROM instances WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ? OFFSET ?`,
		append(args, f.Limit, max(0, f.Offset))...)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	if err := db.instanceGPUs(ctx, db.read, list); err != nil {
		return nil, err
	}
	if err := db.instanceVolumes(ctx, db.read, list); err != nil {
		return nil, err
	}
	out := make([]gpuportal.Instance, len(list))
	for k, i := range list {
		db.live(i)
		out[k] = *i
	}
	return out, nil
}

// Instance returns one instance the user may see; another customer's is
// not_found.
func (db *DB) Instance(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Instance, error) {
	i, err := instanceFor(ctx, db.read, user, id)
	if err != nil {
		return nil, err
	}
	if err := db.instanceGPUs(ctx, db.read, []*gpuportal.Instance{i}); err != nil {
		return nil, err
	}
	if err := db.instanceVolumes(ctx, db.read, []*gpuportal.Instance{i}); err != nil {
		return nil, err
	}
	db.live(i)
	if gpuportal.AcceptsSessions(i.Status) {
		if i.Sessions, err = db.OpenSessions(ctx, i.ID); err != nil {
			return nil, err
		}
	}
	if i.Kind == gpuportal.KindSpot && (i.Status == gpuportal.InstanceRunning || i.Status == gpuportal.InstancePending) {
		if t, err := db.SafeUntil(ctx, i.Model, i.Region, 0); err == nil {
			i.SafeUntil = t
		}
	}
	return i, nil
}

func instanceFor(ctx context.Context, q queryer, user *gpuportal.User, id int64) (*gpuportal.Instance, error) {
	i, err := scanInstance(q.QueryRowContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !user.CanSee(i.UserID)) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Instance %d not found.", id)
	}
	return i, err
}

// Launch creates an instance (pending until the scheduler places it and
// its agent starts it). A spot launch is refused when no idle GPUs would
// outlast the notice horizon; a reserved one needs the user's own active
// reservation with GPUs to spare.
func (db *DB) Launch(ctx context.Context, user *gpuportal.User, req gpuportal.LaunchRequest) (*gpuportal.Instance, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	now := db.now()
	var inst *gpuportal.Instance
	err := db.inTx(ctx, "launch", func(tx *sql.Tx) error {
		if req.Kind == gpuportal.KindReserved {
			r, err := reservationFor(ctx, tx, user, *req.ReservationID)
			if err != nil || r.UserID != user.ID {
				return gpuportal.FieldErrorf(gpuportal.EINVALID, "reservation_id", "Reservation %d is not one of yours.", *req.ReservationID)
			}
			if r.Status != gpuportal.ReservationActive {
				return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "reservation_id", "Reservation %d is %s; reserved instances run while it is active.", r.ID, r.Status)
			}
			req.Model, req.Region = r.Model, r.Region
			var inUse int
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(count), 0) FROM instances WHERE reservation_id = ? AND status IN ('pending', 'running')`, r.ID).Scan(&inUse); err != nil {
				return fmt.Errorf("count the reservation's GPUs in use: %w", err)
			}
			var assigned int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM reservation_gpus rg JOIN reservations r ON r.id = rg.reservation_id AND r.status = 'active'
				WHERE rg.reservation_id = ?`, r.ID).Scan(&assigned); err != nil {
				return fmt.Errorf("count the reservation's GPUs: %w", err)
			}
			if inUse+req.Count > assigned {
				return gpuportal.FieldErrorf(gpuportal.ECAPACITY, "count", "Reservation %d has %d GPUs and %d are in use.", r.ID, assigned, inUse)
			}
		}
		model, policy, err := db.catalogEntry(ctx, tx, req.Model, req.Region)
		if err != nil {
			return named("read the catalog", err)
		}
		if err := req.ValidateNotice(policy); err != nil {
			return err
		}
		if err := req.ValidateIdleStop(); err != nil {
			return err
		}
		price := policy.HourPrice(*model, req.Kind)
		if req.Kind == gpuportal.KindSpot {
			pl, err := db.livePool(ctx, tx, scheduler.PoolKey{Model: req.Model, Region: req.Region}, now,
				func(pl *scheduler.Pool) bool { return scheduler.SpotLaunchNeedsDetail(pl, req.Count, now) })
			if err != nil {
				return fmt.Errorf("read the pool: %w", err)
			}
			// Job tasks give their GPUs to a spot launch (the scheduler
			// gives them notice and they queue again).
			if !scheduler.SpotLaunchFits(pl, req.Count, now) {
				return gpuportal.FieldErrorf(gpuportal.ECAPACITY, "count", "No idle %s GPUs that would last past the interruption notice right now: %d free for spot, %d asked for.",
					req.Model, scheduler.SpotRoom(pl, now), req.Count)
			}
		}
		if req.Kind != gpuportal.KindReserved {
			if err := db.checkRunningQuota(ctx, tx, user.ID, req.Count); err != nil {
				return named("check the quota", err)
			}
		}
		if req.Kind == gpuportal.KindOnDemand {
			if err := db.checkOnDemandFits(ctx, tx, req.Model, req.Region, req.Count, policy, now); err != nil {
				return named("check on-demand capacity", err)
			}
		}
		// A launch needs an hour of its price available, beside an hour
		// of what already runs.
		if price > 0 {
			if err := db.requireLaunchFunds(ctx, tx, user.ID, price*gpuportal.Fen(req.Count), now); err != nil {
				return named("check the balance", err)
			}
		}
		var resID sql.NullInt64
		if req.ReservationID != nil {
			resID = sql.NullInt64{Int64: *req.ReservationID, Valid: true}
		}
		image, err := imageForLaunch(ctx, tx, req.Image)
		if err != nil {
			return named("find the image", err)
		}
		mounts, err := db.resolveMounts(ctx, tx, user.ID, req.Region, req.Volumes)
		if err != nil {
			return named("find the volumes", err)
		}
		id, err := insertInstance(ctx, tx, user.ID, req, resID, price, image.Reference, now)
		if err != nil {
			return named("insert instance", err)
		}
		if err := db.mountVolumes(ctx, tx, id, mounts); err != nil {
			return named("mount the volumes", err)
		}
		inst, err = instanceFor(ctx, tx, user, id)
		return named("read it back", err)
	})
	if err != nil {
		return nil, err
	}
	db.Kick(ctx) // place it now
	if inst.Kind == gpuportal.KindSpot {
		inst.SafeUntil, _ = db.SafeUntil(ctx, inst.Model, inst.Region, inst.Count)
	}
	return inst, nil
}

// insertInstance writes a new pending instance (Launch and a
// reservation's own launch), its checkpoint directory named after it.
func insertInstance(ctx context.Context, tx *sql.Tx, userID int64, req gpuportal.LaunchRequest, resID sql.NullInt64, price gpuportal.Fen, imageRef string, now time.Time) (int64, error) {
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO instances (user_id, kind, model_id, region_id, count, command, auto_restart, reservation_id, status, checkpoint_key, price_fen, created_at, image, notice_seconds, idle_stop_minutes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', '', ?, ?, ?, ?, ?) RETURNING id`,
		userID, req.Kind, req.Model, req.Region, req.Count, req.Command, req.AutoRestart, resID, price, unix(now), imageRef, req.NoticeSeconds, req.IdleStopMinutes).Scan(&id); err != nil {
		return 0, fmt.Errorf("insert instance: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE instances SET checkpoint_key = ? WHERE id = ?`, fmt.Sprintf("instance-%d", id), id); err != nil {
		return 0, fmt.Errorf("name its checkpoint directory: %w", err)
	}
	return id, nil
}

// Stop asks for an instance to stop: at once if it has not started, else
// its agent stops it and reports. Stopping a finished instance changes
// nothing. An admin stopping another's instance is audited.
func (db *DB) Stop(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Instance, error) {
	var node string
	err := db.inTx(ctx, "stop", func(tx *sql.Tx) error {
		i, err := instanceFor(ctx, tx, user, id)
		if err != nil {
			return named("read instance", err)
		}
		switch i.Status {
		case gpuportal.InstanceStopped, gpuportal.InstanceFailed, gpuportal.InstanceInterrupted:
			return nil
		}
		now := db.now()
		if i.UserID != user.ID {
			if err := db.audit(ctx, tx, user.ID, "instance.admin_stop", fmt.Sprintf("instance/%d", i.ID), map[string]string{"status": i.Status}, map[string]string{"status": "stopped"}); err != nil {
				return named("audit", err)
			}
		}
		if i.Status == gpuportal.InstancePending && i.Node == "" {
			_, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'stopped', stop_requested_at = ?, ended_at = ? WHERE id = ?`, unix(now), unix(now), i.ID)
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET stop_requested_at = ? WHERE id = ? AND stop_requested_at IS NULL`, unix(now), i.ID); err != nil {
			return named("update instances", err)
		}
		node = i.Node
		return bumpNode(ctx, tx, node)
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, node)
	db.Kick(ctx) // an unplaced stop frees its place in the queue
	return db.Instance(ctx, user, id)
}

func bumpNode(ctx context.Context, tx *sql.Tx, nodeID string) error {
	if nodeID == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE nodes SET revision = revision + 1 WHERE id = ?`, nodeID)
	return err
}

// reservedStopGraceSeconds is how long a reserved instance has between
// SIGTERM at its reservation's end and SIGKILL.
const reservedStopGraceSeconds = 30

// DesiredFor is what a node should run now.
func (db *DB) DesiredFor(ctx context.Context, nodeID string) (gpuportal.AgentDesired, error) {
	d := gpuportal.AgentDesired{Workloads: []gpuportal.DesiredWorkload{}}
	// Whether sessions wait for this node comes with its revision: every
	// heartbeat reads this, almost always with no session to ask for.
	var sessionsWait bool
	if err := db.read.QueryRowContext(ctx, `SELECT revision, heartbeat_seconds, rotate_token,
			EXISTS (SELECT 1 FROM `+db.indexedAs("sessions", "s", "sessions_open_by_node")+` WHERE s.node_id = nodes.id AND s.closed_at IS NULL AND s.connected_at IS NULL AND s.opened_at >= ?)
		FROM nodes WHERE id = ?`, unix(db.Wall.Now().Add(-gpuportal.SessionConnectTimeout)), nodeID).Scan(&d.Revision, &d.HeartbeatSeconds, &d.RotateToken, &sessionsWait); err != nil {
		return d, fmt.Errorf("node revision: %w", err)
	}
	// Instances asked to stop stay listed (with Stop) until their exit is
	// applied: dropping them earlier lost the exits of workloads that
	// ended between two reports, and left them billing forever.
	rows, err := db.read.QueryContext(ctx, `SELECT `+instanceColumns+`, notice_wall_at, grace_seconds, stop_requested_at IS NOT NULL, rebalance_at IS NOT NULL FROM instances
		WHERE node_id = ? AND status IN ('pending', 'running', 'interrupting') ORDER BY id`, nodeID)
	if err != nil {
		return d, fmt.Errorf("desired state: %w", err)
	}
	type extra struct {
		wall      sql.NullInt64
		grace     sql.NullInt64
		stop      bool
		rebalance bool
	}
	var list []*gpuportal.Instance
	var extras []extra
	for rows.Next() {
		var x extra
		i, err := scanInstance(rows, &x.wall, &x.grace, &x.stop, &x.rebalance)
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
	taskCounts := map[int64]int{}
	for _, i := range list {
		if i.JobID != nil && taskCounts[*i.JobID] == 0 {
			var n int
			if err := db.read.QueryRowContext(ctx, `SELECT task_count FROM jobs WHERE id = ?`, *i.JobID).Scan(&n); err != nil {
				return d, fmt.Errorf("job of instance %d: %w", i.ID, err)
			}
			taskCounts[*i.JobID] = n
		}
	}
	wallNow, now := db.Wall.Now(), db.now()
	reservationEnds := map[int64]time.Time{}
	for _, i := range list {
		if i.ReservationID != nil {
			if _, ok := reservationEnds[*i.ReservationID]; !ok {
				var end int64
				if err := db.read.QueryRowContext(ctx, `SELECT end_at FROM reservations WHERE id = ?`, *i.ReservationID).Scan(&end); err != nil {
					return d, fmt.Errorf("reservation of instance %d: %w", i.ID, err)
				}
				reservationEnds[*i.ReservationID] = fromUnix(end)
			}
		}
	}
	for k, i := range list {
		dw := gpuportal.DesiredWorkload{InstanceID: i.ID, Attempt: i.Attempt, Lifecycle: i.Lifecycle(), GPUs: i.GPUs, Command: i.Command, Image: i.Image, CheckpointKey: i.CheckpointKey,
			Stop: extras[k].stop, Rebalance: extras[k].rebalance, Volumes: i.Volumes}
		if i.JobID != nil {
			dw.Task = &gpuportal.TaskRef{JobID: *i.JobID, Index: *i.TaskIndex, Count: taskCounts[*i.JobID]}
		}
		if i.Status == gpuportal.InstanceInterrupting && i.Interruption != nil && !dw.Stop {
			// The notice counts in real time from when it was issued, so a
			// test clock moved ahead does not eat it.
			notice := i.Interruption.Deadline.Sub(i.Interruption.NoticeAt)
			if extras[k].wall.Valid {
				notice -= wallNow.Sub(time.Unix(extras[k].wall.Int64, 0))
			}
			action := "terminate"
			if i.Interruption.Reason == gpuportal.ReasonBalance {
				action = "stop"
			}
			dw.Interrupt = &gpuportal.Interruption{Action: action, DeadlineInSeconds: max(0, notice.Seconds()), GraceSeconds: int(extras[k].grace.Int64), Reason: i.Interruption.Reason}
		}
		if dw.Interrupt == nil && !dw.Stop {
			dw.Interrupt = drillNotice(i, wallNow)
		}
		if i.Kind == gpuportal.KindReserved && i.ReservationID != nil && !dw.Stop {
			if left := reservationEnds[*i.ReservationID].Sub(now); left <= gpuportal.ReservedStopNotice {
				dw.Interrupt = &gpuportal.Interruption{Action: "stop", DeadlineInSeconds: max(0, left.Seconds()), GraceSeconds: reservedStopGraceSeconds, Reason: gpuportal.ReasonReservationEnd}
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
	changed := false
	err := db.inTx(ctx, "apply workload reports", func(tx *sql.Tx) error {
		now := db.now()
		for _, r := range reports {
			i, err := scanInstance(tx.QueryRowContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE id = ? AND node_id = ? AND attempt = ?`, r.InstanceID, nodeID, r.Attempt))
			if errors.Is(err, sql.ErrNoRows) {
				if r.State == gpuportal.WorkloadExited {
					// An old attempt's end: an instance restarted while this
					// node was away may start now.
					if res, err := tx.ExecContext(ctx, `UPDATE instances SET unconfirmed_node = NULL, unconfirmed_since = NULL WHERE id = ? AND unconfirmed_node = ?`, r.InstanceID, nodeID); err != nil {
						return err
					} else if n, _ := res.RowsAffected(); n > 0 {
						changed = true
					}
				}
				continue
			} else if err != nil {
				return err
			}
			if r.LogTail != "" && r.LogTail != i.LogTail {
				tail := r.LogTail
				if len(tail) > 4096 {
					tail = tail[len(tail)-4096:]
				}
				if _, err := tx.ExecContext(ctx, `UPDATE instances SET log_tail = ? WHERE id = ?`, tail, i.ID); err != nil {
					return named("update instances", err)
				}
			}
			if err := recordCheckpoint(ctx, tx, i, r, now); err != nil {
				return named("record checkpoint", err)
			}
			if err := recordDrillReady(ctx, tx, i, r); err != nil {
				return named("record drill ready", err)
			}
			switch {
			case r.State == gpuportal.WorkloadRunning && i.Status == gpuportal.InstancePending:
				if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'running', started_at = ? WHERE id = ?`, unix(now), i.ID); err != nil {
					return named("update instances", err)
				}
				if err := recordRunStart(ctx, tx, i, now); err != nil {
					return named("record run start", err)
				}
			case r.State == gpuportal.WorkloadExited && (i.Status == gpuportal.InstancePending || i.Status == gpuportal.InstanceRunning || i.Status == gpuportal.InstanceInterrupting):
				var stopAsked sql.NullInt64
				if err := tx.QueryRowContext(ctx, `SELECT stop_requested_at FROM instances WHERE id = ?`, i.ID).Scan(&stopAsked); err != nil {
					return named("read instances", err)
				}
				outcome := gpuportal.WorkloadOutcome(i, stopAsked.Valid, r)
				// A reserved instance's GPUs stay its reservation's: taking
				// them out of service would move (or refund) the booking
				// for what its own owner left running on them.
				if !r.GPUsFree && i.Kind != gpuportal.KindReserved {
					if err := holdBusyGPUs(ctx, tx, i); err != nil {
						return fmt.Errorf("hold the GPUs instance %d left busy: %w", i.ID, err)
					}
				}
				if err := db.finishAttempt(ctx, tx, i, outcome, r.ExitCode, r.Error, stopAsked.Valid, endReported, now); err != nil {
					return named("finish attempt", err)
				}
				changed = true
			}
		}
		if changed {
			return bumpNode(ctx, tx, nodeID)
		}
		return nil
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

// recordCheckpoint stamps, in business time, a checkpoint report (and a
// "ready" after a notice) the agent passed on. The agent repeats its last
// report in every status; its own stamp tells a new one from a repeat.
func recordCheckpoint(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, r gpuportal.WorkloadStatus, now time.Time) error {
	if r.CheckpointAt != nil {
		stamp := r.CheckpointAt.UTC().Format(time.RFC3339Nano)
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

// endCause is how the portal learnt that an attempt ended: what the
// rules after it (a job task queued again or failed) go by, never the
// error's text.
type endCause int

const (
	endReported     endCause = iota // its agent reported the exit
	endNodeLost                     // its node failed: the work was cut off, as by an interruption
	endWorkloadLost                 // its node is alive but no longer reports the workload
)

// finishAttempt ends an instance's current run: bill it, free its GPUs and
// set its outcome; an interrupted auto-restart spot instance goes back to
// pending (on any node, same checkpoint directory).
func (db *DB) finishAttempt(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, outcome string, exitCode *int, errText string, userStopped bool, cause endCause, now time.Time) error {
	minutes := 0
	if i.StartedAt != nil {
		policy, err := db.policies(ctx, tx)
		if err != nil {
			return err
		}
		minutes = gpuportal.BillableMinutes(*i.StartedAt, now, i.Kind, outcome == gpuportal.InstanceInterrupted, userStopped, policy.For(i.Model).OnDemandMinBillableMinutes)
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
		_, err := tx.ExecContext(ctx, `UPDATE instances SET status = ?, ended_at = ?, billed_minutes = billed_minutes + ?, cost_fen = cost_fen + ?, exit_code = ?, error = ? WHERE id = ?`,
			outcome, unix(now), minutes, cost, code, errText, i.ID)
		if err != nil {
			return err
		}
	}
	if i.JobID != nil {
		if err := db.taskAttemptEnded(ctx, tx, i, outcome, exitCode, errText, userStopped, cause, now); err != nil {
			return err
		}
	}
	if cost > 0 {
		desc := fmt.Sprintf("Instance #%d (%s, %d × %s): %d min", i.ID, i.Kind, i.Count, i.Model, minutes)
		if err := db.postLedger(ctx, tx, ledgerPost{userID: i.UserID, at: now, kind: gpuportal.LedgerInstance, amount: cost, instanceID: &i.ID, desc: desc}); err != nil {
			return err
		}
	}
	return nil
}

// interrupt gives a running spot instance its notice: SIGTERM at deadline,
// SIGKILL grace later. It is recorded for the published rates.
func (db *DB) interrupt(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, reason string, now, deadline time.Time, grace int) error {
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
	// A job's tasks are queued again by themselves; the job page counts
	// their interruptions instead of a message for each.
	if i.JobID == nil {
		if err := db.notify(ctx, tx, i.UserID, gpuportal.NoteSpotInterruption, gpuportal.NoteParams{InstanceID: i.ID, Model: i.Model, Region: i.Region, Count: i.Count, Deadline: deadline, Reason: reason, Kind: i.Kind}); err != nil {
			return err
		}
	}
	return bumpNode(ctx, tx, i.Node)
}

// AdminInterrupt interrupts a spot instance with the policy's notice
// (reason admin). Audited.
func (db *DB) AdminInterrupt(ctx context.Context, actor *gpuportal.User, id int64) (*gpuportal.Instance, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins can interrupt instances.")
	}
	var node string
	err := db.inTx(ctx, "admin interrupt", func(tx *sql.Tx) error {
		i, err := instanceFor(ctx, tx, actor, id)
		if err != nil {
			return named("read instance", err)
		}
		if i.Kind != gpuportal.KindSpot || (i.Status != gpuportal.InstanceRunning && i.Status != gpuportal.InstancePending) || i.Node == "" {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Only a placed spot instance that is not already interrupted can be interrupted (instance %d is a %s instance, %s).", i.ID, i.Kind, i.Status)
		}
		p, err := db.policies(ctx, tx)
		if err != nil {
			return named("read policies", err)
		}
		pol := p.For(i.Model)
		now := db.now()
		if err := db.interrupt(ctx, tx, i, gpuportal.ReasonAdmin, now, now.Add(time.Duration(pol.SpotNoticeSeconds)*time.Second), pol.SpotGraceSeconds); err != nil {
			return err
		}
		node = i.Node
		return db.audit(ctx, tx, actor.ID, "instance.admin_interrupt", fmt.Sprintf("instance/%d", i.ID), map[string]string{"status": i.Status}, map[string]string{"status": "interrupting"})
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, node)
	db.Kick(ctx)
	return db.Instance(ctx, actor, id)
}

// ReservationGPUs lists the GPUs assigned to an active reservation.
func (db *DB) ReservationGPUs(ctx context.Context, reservationID int64) ([]string, error) {
	gpus, err := scanAll(ctx, db.read, func(r *sql.Rows, g *string) error { return r.Scan(g) }, `SELECT rg.gpu_uuid FROM reservation_gpus rg JOIN gpus g ON g.uuid = rg.gpu_uuid
		JOIN reservations r ON r.id = rg.reservation_id AND r.status = 'active' WHERE rg.reservation_id = ? ORDER BY g.node_id, g.idx`, reservationID)
	if gpus == nil && err == nil {
		gpus = []string{}
	}
	return gpus, err
}

// scanOneInstance is scanInstance for a row of instanceColumns alone.
func scanOneInstance(row interface{ Scan(...any) error }) (*gpuportal.Instance, error) {
	return scanInstance(row)
}
