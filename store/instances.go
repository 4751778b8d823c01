package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"gpuportal/plan"
	"slices"
	"time"

	"gpuportal"
)

const instanceColumns = `id, user_id, kind, model_id, region_id, count, command, auto_restart, reservation_id, status, coalesce(node_id, ''),
	attempt, checkpoint_key, price_fen, created_at, started_at, ended_at, cost_fen, notice_at, deadline_at, interrupt_reason, exit_code, error, restarts, log_tail, image,
	job_id, task_index, last_checkpoint_at, lost_gpu_seconds, ready_at, drill_started_at, drill_wall_at, drill_seconds, drill_ready_after, idle_stop_minutes, idle_since, coalesce(stop_reason, ''),
	disk_gib, disk_used_bytes, disk_enforced, disk_note, disk_kept <> 0 AND disk_released_at IS NULL,
	created_by, (SELECT t.id FROM teams t WHERE t.account_id = instances.user_id) AS team_id, borrowed <> 0, rebalance_at, coalesce(minimum_applied_minutes, 0)`

// scanInstance reads instanceColumns, then any extra columns into extra.
func scanInstance(row interface{ Scan(...any) error }, extra ...any) (*gpuportal.Instance, error) {
	var i gpuportal.Instance
	var resID, started, ended, notice, deadline, exit, jobID, taskIndex, checkpoint, lost, ready, drillAt, drillWall, drillSeconds sql.NullInt64
	var drillReady sql.NullFloat64
	var idleStop, idleSince sql.NullInt64
	var reason sql.NullString
	var created int64
	var disk gpuportal.InstanceDisk
	var diskEnforced, rebalance sql.NullInt64
	dest := append([]any{&i.ID, &i.UserID, &i.Kind, &i.Model, &i.Region, &i.Count, &i.Command, &i.AutoRestart, &resID, &i.Status, &i.Node,
		&i.Attempt, &i.CheckpointKey, &i.PricePerGPU, &created, &started, &ended, &i.Cost, &notice, &deadline, &reason, &exit, &i.Error, &i.Restarts, &i.LogTail, &i.Image,
		&jobID, &taskIndex, &checkpoint, &lost, &ready, &drillAt, &drillWall, &drillSeconds, &drillReady, &idleStop, &idleSince, &i.StopReason,
		&disk.SizeGiB, &disk.UsedBytes, &diskEnforced, &disk.Note, &disk.Kept, &i.CreatedBy, &i.TeamID, &i.Borrowed, &rebalance, &i.MinimumApplied}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if disk.SizeGiB > 0 {
		if diskEnforced.Valid {
			enforced := diskEnforced.Int64 != 0
			disk.Enforced = &enforced
		}
		i.Disk = &disk
	}
	if jobID.Valid && taskIndex.Valid {
		t := int(taskIndex.Int64)
		i.JobID, i.TaskIndex = &jobID.Int64, &t
	}
	i.CreatedAt = fromUnix(created)
	i.StartedAt, i.EndedAt = fromNullUnix(started), fromNullUnix(ended)
	if rebalance.Valid {
		i.ExpectReclaim(fromUnix(rebalance.Int64))
	}
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
		i.Interruption = &gpuportal.InstanceInterruption{NoticeAt: fromUnix(notice.Int64), Deadline: fromUnix(deadline.Int64), Reason: gpuportal.InterruptReason(reason.String)}
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
	// Labels: only those with every one of these labels.
	Labels gpuportal.LabelFilter
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
	q := visibleTo(user, "instances").ofUser(f.UserID).labelled(labelInstance, f.Labels)
	switch f.Tab {
	case "":
	case TabActive:
		q.and("status IN ('pending', 'running', 'interrupting')")
	case TabEnded:
		q.and("status IN ('interrupted', 'stopped', 'failed')")
	default:
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "tab", "Unknown list %q: active or ended.", f.Tab)
	}
	query, args, err := q.page(ctx, db, Page{Limit: f.Limit, Offset: f.Offset, Total: f.Total}, instanceColumns, "id DESC")
	if err != nil {
		return nil, err
	}
	list, err := scanEach(ctx, db.read, scanOneInstance, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	if err := db.instanceGPUs(ctx, db.read, list); err != nil {
		return nil, err
	}
	if err := db.instanceVolumes(ctx, db.read, list); err != nil {
		return nil, err
	}
	if err := instanceLabels(ctx, db.read, list); err != nil {
		return nil, err
	}
	if err := db.priceTerms(ctx, list); err != nil {
		return nil, err
	}
	out := make([]gpuportal.Instance, len(list))
	for k, i := range list {
		db.live(i)
		out[k] = *i
	}
	return out, nil
}

// priceTerms says what the policy will charge that a customer should
// know before it happens: what keeping each instance's disk costs a day
// (at the volume price), and what stopping an on-demand run now bills
// under the minimum billable time.
func (db *DB) priceTerms(ctx context.Context, list []*gpuportal.Instance) error {
	minimumApplies := func(i *gpuportal.Instance) bool {
		return i.Kind == gpuportal.KindOnDemand && i.StartedAt != nil && (i.Status == gpuportal.InstanceRunning || i.Status == gpuportal.InstanceInterrupting)
	}
	if !slices.ContainsFunc(list, func(i *gpuportal.Instance) bool { return i.Disk != nil || minimumApplies(i) }) {
		return nil
	}
	pol, err := db.policies(ctx, db.read)
	if err != nil {
		return err
	}
	now := db.now()
	for _, i := range list {
		if i.Disk != nil {
			i.Disk.PricePerDayFen = gpuportal.KeptDiskPerDay(i.Disk.SizeGiB, gpuportal.Fen(pol.Global.VolumePricePerGiBMonthFen))
		}
		if minimumApplies(i) {
			least := pol.For(i.Model).OnDemandMinBillableMinutes
			if gpuportal.BillableMinutes(*i.StartedAt, now, i.Kind, false, false, 0) < least {
				i.MinimumCharge, i.MinimumMinutes = gpuportal.RunCost(i.PricePerGPU, i.Count, least), least
			}
		}
	}
	return nil
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
	if err := instanceLabels(ctx, db.read, []*gpuportal.Instance{i}); err != nil {
		return nil, err
	}
	if err := db.priceTerms(ctx, []*gpuportal.Instance{i}); err != nil {
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
	var reclaimed []string // nodes whose borrowed runs got notice
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
		keepOnInterrupt, err := req.KeepsDiskOnInterrupt()
		if err != nil {
			return err
		}
		if req.DiskGiB, err = diskOf(req.DiskGiB, policy, "disk_gib"); err != nil {
			return err
		}
		// What the launch names (its image, its volumes) is checked
		// before capacity and money: a launch that can never run says
		// why, not "no capacity".
		image, err := imageForLaunch(ctx, tx, user.ID, req.Region, req.Image)
		if err != nil {
			return named("find the image", err)
		}
		mounts, err := db.resolveMounts(ctx, tx, user.ID, req.Region, req.Volumes)
		if err != nil {
			return named("find the volumes", err)
		}
		admit, err := db.admitRun(ctx, tx, user, req.Kind, *model, req.Region, req.Count, policy, now)
		if err != nil {
			return err
		}
		price := admit.price
		if req.Kind != gpuportal.KindReserved {
			if err := db.checkMemberLimits(ctx, tx, user, req.Count, price*gpuportal.Fen(gpuportal.BilledUnits(req.Count))); err != nil {
				return err
			}
		}
		var resID sql.NullInt64
		if req.ReservationID != nil {
			resID = sql.NullInt64{Int64: *req.ReservationID, Valid: true}
		}
		id, err := insertInstance(ctx, tx, user.ID, user.MemberID(), req, resID, price, image.Reference, now)
		if err != nil {
			return named("insert instance", err)
		}
		if keepOnInterrupt {
			// Kept from the start: its runs end keeping the disk, unless
			// its owner stops it without keeping it.
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET disk_kept = 1 WHERE id = ?`, id); err != nil {
				return named("keep the disk on interruptions", err)
			}
		}
		if err := db.mountVolumes(ctx, tx, id, mounts); err != nil {
			return named("mount the volumes", err)
		}
		if reclaimed, err = db.lend(ctx, tx, user.ID, id, admit.lending, now); err != nil {
			return err
		}
		inst, err = instanceFor(ctx, tx, user, id)
		return named("read it back", err)
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, reclaimed...)
	db.Kick(ctx) // place it now
	if inst.Kind == gpuportal.KindSpot {
		inst.SafeUntil, _ = db.SafeUntil(ctx, inst.Model, inst.Region, inst.Count)
	}
	return inst, nil
}

// insertInstance writes a new pending instance (Launch and a
// reservation's own launch), its checkpoint directory named after it.
func insertInstance(ctx context.Context, tx *sql.Tx, userID int64, createdBy *int64, req gpuportal.LaunchRequest, resID sql.NullInt64, price gpuportal.Fen, imageRef string, now time.Time) (int64, error) {
	var id int64
	disk := 0
	if req.DiskGiB != nil {
		disk = *req.DiskGiB
	}
	if err := tx.QueryRowContext(ctx, `INSERT INTO instances (user_id, kind, model_id, region_id, count, command, auto_restart, reservation_id, status, checkpoint_key, price_fen, created_at, image, notice_seconds, idle_stop_minutes, disk_gib, created_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', '', ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		userID, req.Kind, req.Model, req.Region, req.Count, req.Command, req.AutoRestart, resID, price, unix(now), imageRef, req.NoticeSeconds, req.IdleStopMinutes, disk, createdBy).Scan(&id); err != nil {
		return 0, fmt.Errorf("insert instance: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE instances SET checkpoint_key = ? WHERE id = ?`, fmt.Sprintf("instance-%d", id), id); err != nil {
		return 0, fmt.Errorf("name its checkpoint directory: %w", err)
	}
	return id, saveLabels(ctx, tx, labelInstance, id, req.Labels)
}

// Stop asks for an instance to stop: at once if it has not started, else
// its agent stops it and reports. Stopping a finished instance changes
// nothing. An admin stopping another's instance is audited.
func (db *DB) Stop(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Instance, error) {
	return db.StopWith(ctx, user, id, gpuportal.StopOptions{})
}

// StopWith is Stop with the stop's options: KeepDisk keeps the disk of a
// running instance for its next start (refused for one whose node gives
// it no disk of its own, and for reserved instances and job tasks, which
// start by their reservation or job).
func (db *DB) StopWith(ctx context.Context, user *gpuportal.User, id int64, opts gpuportal.StopOptions) (*gpuportal.Instance, error) {
	var node string
	err := db.inTx(ctx, "stop", func(tx *sql.Tx) error {
		i, err := instanceFor(ctx, tx, user, id)
		if err != nil {
			return named("read instance", err)
		}
		if err := mayChangeInstance(user, i); err != nil {
			return err
		}
		switch i.Status {
		case gpuportal.InstanceStopped, gpuportal.InstanceFailed, gpuportal.InstanceInterrupted:
			return nil
		}
		if opts.KeepDisk {
			if err := gpuportal.CanKeepDisk(i); err != nil {
				return err
			}
		}
		// A stop keeps the disk when it says so, and lets a kept disk go
		// when it does not (its node removes it at the end).
		if i.Disk != nil && i.Disk.Kept != opts.KeepDisk {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET disk_kept = ?, disk_released_at = NULL WHERE id = ?`, opts.KeepDisk, i.ID); err != nil {
				return named("keep the disk", err)
			}
		}
		now := db.now()
		if i.UserID != user.ID {
			if err := db.audit(ctx, tx, user.ID, "instance.admin_stop", fmt.Sprintf("instance/%d", i.ID), map[string]string{"status": string(i.Status)}, map[string]string{"status": "stopped"}); err != nil {
				return named("audit", err)
			}
		}
		if i.Status == gpuportal.InstancePending && i.Node == "" {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'stopped', stop_requested_at = ?, ended_at = ? WHERE id = ?`, unix(now), unix(now), i.ID); err != nil {
				return err
			}
			return db.emitInstance(ctx, tx, i.ID, gpuportal.EventInstanceStopped)
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

// reservedStopGraceSeconds is how long a reserved instance has between
// SIGTERM at its reservation's end and SIGKILL.
const reservedStopGraceSeconds = 30

// endCause is how the portal learnt that an attempt ended: what the
// rules after it (a job task queued again or failed) go by, never the
// error's text.
type endCause int

const (
	endReported     endCause = iota // its agent reported the exit
	endNodeLost                     // its node failed: the work was cut off, as by an interruption
	endWorkloadLost                 // its node is alive but no longer reports the workload
)

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
		return db.audit(ctx, tx, actor.ID, "instance.admin_interrupt", fmt.Sprintf("instance/%d", i.ID), map[string]string{"status": string(i.Status)}, map[string]string{"status": "interrupting"})
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

// diskOf resolves a launch's disk_gib against the policy: what it asked
// for, within bounds, or the policy's default.
func diskOf(asked *int, policy gpuportal.Policy, field string) (*int, error) {
	n, err := policy.DiskFor(asked, field)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// admission is what admitRun decided for a run.
type admission struct {
	price   gpuportal.Fen // per GPU-hour
	lending gpuportal.Lending
}

// admitRun checks that a run of count GPUs of kind may start now — a
// launch's, or a stopped instance's start: room for it (spot: idle GPUs
// past the notice horizon; on-demand: what bookings leave), the owner's
// running-GPU quota (a team that lends: the member's share, or the team's
// idle GPUs borrowed at the spot price), and an hour of its price
// available beside what already runs.
func (db *DB) admitRun(ctx context.Context, tx *sql.Tx, user *gpuportal.User, kind gpuportal.InstanceKind, model gpuportal.Model, region string, count int, policy gpuportal.Policy, now time.Time) (admission, error) {
	var a admission
	if kind == gpuportal.KindSpot {
		pl, err := db.livePool(ctx, tx, plan.PoolKey{Model: model.ID, Region: region}, now,
			func(pl *plan.Pool) bool { return plan.SpotLaunchNeedsDetail(pl, count, now) })
		if err != nil {
			return a, fmt.Errorf("read the pool: %w", err)
		}
		// Job tasks give their GPUs to a spot launch (the scheduler
		// gives them notice and they queue again).
		if !plan.SpotLaunchFits(pl, count, now) {
			return a, gpuportal.FieldErrorf(gpuportal.ECAPACITY, "count", "No idle %s GPUs that would last past the interruption notice right now: %d free for spot, %d asked for.",
				model.ID, plan.SpotRoom(pl, now), count)
		}
	}
	if kind != gpuportal.KindReserved {
		var err error
		if a.lending, err = db.admitQuota(ctx, tx, user, count); err != nil {
			return a, named("check the quota", err)
		}
	}
	if kind == gpuportal.KindOnDemand {
		if err := db.checkOnDemandFits(ctx, tx, model.ID, region, count, policy, now); err != nil {
			return a, named("check on-demand capacity", err)
		}
	}
	a.price = policy.HourPrice(model, kind)
	if a.lending.Borrowed {
		a.price = policy.HourPrice(model, gpuportal.KindSpot)
	}
	// A run needs an hour of its price available, beside an hour of what
	// already runs.
	if a.price > 0 {
		if err := db.requireLaunchFunds(ctx, tx, user.ID, a.price*gpuportal.Fen(count), now); err != nil {
			return a, named("check the balance", err)
		}
	}
	return a, nil
}

// lend records what admitRun decided for a team's run: the run borrows,
// or borrowed runs are taken back for it. It returns the nodes to wake.
func (db *DB) lend(ctx context.Context, tx *sql.Tx, account, id int64, l gpuportal.Lending, now time.Time) ([]string, error) {
	if l.Borrowed {
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET borrowed = 1 WHERE id = ?`, id); err != nil {
			return nil, named("mark it borrowed", err)
		}
	}
	return db.reclaimBorrowed(ctx, tx, account, l.Reclaim, now)
}

// StartInstance starts a stopped instance whose disk was kept, on any
// node of its region: the same id, image, command, volumes and disk, count
// GPUs (nil: as many as before), a new attempt. 409 unless it is stopped
// with its disk kept; capacity, quota and money as a launch.
func (db *DB) StartInstance(ctx context.Context, user *gpuportal.User, id int64, count *int) (*gpuportal.Instance, error) {
	now := db.now()
	var reclaimed []string // nodes whose borrowed runs got notice
	err := db.inTx(ctx, "start instance", func(tx *sql.Tx) error {
		i, err := instanceFor(ctx, tx, user, id)
		if err != nil {
			return err
		}
		if i.UserID != user.ID {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only the instance's owner starts it.")
		}
		if err := mayChangeInstance(user, i); err != nil {
			return err
		}
		if err := gpuportal.CanStart(i); err != nil {
			return err
		}
		if suspended, err := diskSuspended(ctx, tx, i.ID); err != nil {
			return err
		} else if suspended {
			return gpuportal.Errorf(gpuportal.EFUNDS, "The kept disk of instance %d is suspended since your balance ran out: top up what it owes, and it can start again a minute later.", i.ID)
		}
		if saving, err := savingImageOf(ctx, tx, i.ID); err != nil {
			return err
		} else if saving {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d is being saved as an image; it starts once that is done.", i.ID)
		}
		n := i.Count
		if count != nil {
			n = *count
		}
		if n < 0 || n > gpuportal.MaxGPUsPerInstance {
			return gpuportal.FieldErrorf(gpuportal.EPOLICY, "count", "An instance runs on 1 to %d GPUs of one node, or on none (0: no-GPU mode).", gpuportal.MaxGPUsPerInstance)
		}
		if err := db.lockAccount(ctx, tx, user.ID); err != nil {
			return named("lock account", err)
		}
		model, policy, err := db.catalogEntry(ctx, tx, i.Model, i.Region)
		if err != nil {
			return named("read the catalog", err)
		}
		// One resumed on a reservation that has ended starts on demand.
		kind := i.Kind
		if kind == gpuportal.KindReserved {
			kind = gpuportal.KindOnDemand
		}
		var price gpuportal.Fen
		var lending gpuportal.Lending
		if n == 0 {
			// No-GPU mode takes no GPU from anyone: no capacity or quota
			// to check, an hour of the mode's price to have.
			price = gpuportal.Fen(policy.NoGPUPricePerHourFen)
			if err := db.requireLaunchFunds(ctx, tx, user.ID, price, now); err != nil {
				return named("check the balance", err)
			}
		} else {
			largest, err := largestNode(ctx, tx, i.Model, i.Region)
			if err != nil {
				return err
			}
			if n > largest {
				return gpuportal.FieldErrorf(gpuportal.EPOLICY, "count", "The largest %s node of %s has %d GPUs; an instance runs on one node.", i.Model, i.Region, largest)
			}
			admit, err := db.admitRun(ctx, tx, user, kind, *model, i.Region, n, policy, now)
			if err != nil {
				return err
			}
			price, lending = admit.price, admit.lending
		}
		if err := db.checkMemberLimits(ctx, tx, user, n, price*gpuportal.Fen(gpuportal.BilledUnits(n))); err != nil {
			return err
		}
		// Pending again, as a fresh launch of the same instance: the
		// scheduler places it on any node of the region, whose agent
		// mounts the kept disk (the next attempt).
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'pending', kind = ?, reservation_id = NULL, count = ?, price_fen = ?, node_id = NULL, started_at = NULL, ended_at = NULL,
			exit_code = NULL, error = '', stop_requested_at = NULL, notice_at = NULL, notice_wall_at = NULL, deadline_at = NULL, interrupt_reason = NULL,
			ready_at = NULL, stop_reason = NULL, idle_since = NULL, borrowed = 0, rebalance_at = NULL, minimum_applied_minutes = NULL WHERE id = ?`, kind, n, price, i.ID); err != nil {
			return named("start", err)
		}
		reclaimed, err = db.lend(ctx, tx, user.ID, i.ID, lending, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, reclaimed...)
	db.Kick(ctx) // place it now
	return db.Instance(ctx, user, id)
}

// LargestNode is the most GPUs of model one node of region has: the most
// one instance there can run on.
func (db *DB) LargestNode(ctx context.Context, model, region string) (int, error) {
	return largestNode(ctx, db.read, model, region)
}

// largestNode is LargestNode in a transaction.
func largestNode(ctx context.Context, q queryer, model, region string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT coalesce(max(c), 0) FROM (SELECT count(*) AS c FROM gpus g JOIN nodes n ON n.id = g.node_id
		WHERE g.model_id = ? AND n.region_id = ? GROUP BY g.node_id) per_node`, model, region).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("the largest node: %w", err)
	}
	return n, nil
}

// ReleaseDisk lets a stopped instance's kept disk go for good: billing
// stops, and the region's nodes remove its file. 409 while it runs.
func (db *DB) ReleaseDisk(ctx context.Context, user *gpuportal.User, id int64) error {
	return db.inTx(ctx, "release disk", func(tx *sql.Tx) error {
		i, err := instanceFor(ctx, tx, user, id)
		if err != nil {
			return err
		}
		if i.UserID != user.ID {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only the instance's owner releases its disk.")
		}
		if err := mayChangeInstance(user, i); err != nil {
			return err
		}
		switch i.Status {
		case gpuportal.InstancePending, gpuportal.InstanceRunning, gpuportal.InstanceInterrupting:
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d is %s; stop it first.", i.ID, i.Status)
		}
		if i.Disk == nil || !i.Disk.Kept {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d has no kept disk.", i.ID)
		}
		if saving, err := savingImageOf(ctx, tx, i.ID); err != nil {
			return err
		} else if saving {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d is being saved as an image; release its disk once that is done.", i.ID)
		}
		_, err = tx.ExecContext(ctx, `UPDATE instances SET disk_kept = 0, disk_released_at = ?, disk_billed_until = NULL WHERE id = ?`, unix(db.now()), i.ID)
		return err
	})
}

// ReleasedDisks are the instances of node's region whose kept disks were
// released lately: the node removes their files from the image root.
func (db *DB) ReleasedDisks(ctx context.Context, node string) ([]int64, error) {
	return scanAll(ctx, db.read, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT i.id FROM instances i JOIN nodes n ON n.region_id = i.region_id WHERE n.id = ? AND i.disk_released_at IS NOT NULL AND i.disk_released_at >= ? ORDER BY i.id`,
		node, unix(db.now().Add(-imageDeletionNotice)))
}
