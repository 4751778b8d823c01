package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
	"gpuportal/plan"
)

// applier carries out a plan (plan.Decisions) inside the tick's
// transaction, in the order of the plan's fields, collecting the nodes
// whose agents must hear of it at once.
type applier struct {
	db    *DB
	tx    *sql.Tx
	now   time.Time
	nodes []string
	// applied is what of the plan was written: all of it, less the starts
	// the transaction's own check turned down (they wait for a later
	// tick). The tick's counts are read from it.
	applied plan.Decisions
	// Done beside the plan's decisions, and counted with them: instances
	// given the stop for a balance run out, and those reservations
	// launched by themselves.
	balanceStops, launched int
	// failed counts the decisions that failed, were rolled back to their
	// savepoints and recorded (decisions.go).
	failed int
}

// result counts what the applier did.
func (a *applier) result() plan.TickResult {
	r := a.applied.Result()
	r.Interrupted += a.balanceStops
	r.Launched = a.launched
	r.Failed = a.failed
	return r
}

func (db *DB) applyPlan(ctx context.Context, tx *sql.Tx, now time.Time, decisions plan.Decisions) (plan.TickResult, []string, error) {
	a := &applier{db: db, tx: tx, now: now, applied: decisions}
	steps := []struct {
		name string
		run  func(context.Context, plan.Decisions) error
	}{
		{"complete reservations", a.complete},
		{"activate reservations", a.activate},
		{"end work on failed nodes", a.lostWork},
		{"replace failed reservation GPUs", a.replace},
		{"balances", a.balances},
		{"interrupt", a.interrupt},
		{"rebalance recommendations", a.rebalance},
		{"place", a.place},
		{"start job tasks", a.tasks},
		{"waitlist", a.waitlist},
		{"reminders", a.reminders},
		{"volumes", a.bookKeeping(gpuportal.StepVolumes, a.db.billVolumes)},
		{"disks", a.bookKeeping(gpuportal.StepDisks, a.db.billDisks)},
		{"images", a.bookKeeping(gpuportal.StepImages, a.db.billImages)},
		// The books after the plan, each a decision of its own too; the
		// plan's idle stops and budget notices among them, where they were
		// applied before the planner made them.
		{"expire top-ups", a.bookKeeping(gpuportal.StepTopUps, a.db.expireTopUps)},
		{"idle stop", a.idle},
		{"sample instances", a.bookKeeping(gpuportal.StepSamples, a.db.sampleInstances)},
		{"roll up rates", a.bookKeeping(gpuportal.StepRollup, a.db.rollup)},
		{"budget notices", a.budgets},
	}
	for _, step := range steps {
		if err := step.run(ctx, decisions); err != nil {
			return a.result(), nil, fmt.Errorf("%s: %w", step.name, err)
		}
	}
	return a.result(), a.nodes, nil
}

// bookKeeping makes a step over everyone's books (billing volumes, the
// rates' roll-up) one decision: when it fails, it is recorded and the
// rest of the tick still applies.
func (a *applier) bookKeeping(step string, run func(context.Context, *sql.Tx, time.Time) error) func(context.Context, plan.Decisions) error {
	return func(ctx context.Context, _ plan.Decisions) error {
		_, err := a.each(ctx, decision{step: step, subject: step}, func() error { return run(ctx, a.tx, a.now) })
		return err
	}
}

func (a *applier) complete(ctx context.Context, decisions plan.Decisions) error {
	var done []int64
	for _, id := range decisions.Complete {
		ok, err := a.each(ctx, a.aboutReservation(gpuportal.StepComplete, id), func() error { return a.completeOne(ctx, id) })
		if err != nil {
			return err
		}
		if ok {
			done = append(done, id)
		}
	}
	a.applied.Complete = done
	return nil
}

func (a *applier) completeOne(ctx context.Context, id int64) error {
	if _, err := a.tx.ExecContext(ctx, `UPDATE reservations SET status = 'completed' WHERE id = ?`, id); err != nil {
		return err
	}
	if err := a.db.emitReservation(ctx, a.tx, id, gpuportal.EventReservationEnded); err != nil {
		return err
	}
	var userID int64
	var gpuHours int
	if err := a.tx.QueryRowContext(ctx, `SELECT user_id, count * (end_at - start_at) / 3600 FROM reservations WHERE id = ?`, id).Scan(&userID, &gpuHours); err != nil {
		return err
	}
	if err := a.db.bookedHours(ctx, a.tx, userID, -gpuHours); err != nil {
		return err
	}
	return a.db.releaseReservationGPUs(ctx, a.tx, id, a.now, &a.nodes)
}

// activate starts each reservation due; its own launch spec, if any, is
// a decision of its own: a launch that cannot run (a suspended volume, an
// image gone) leaves the reservation started and its owner told.
func (a *applier) activate(ctx context.Context, decisions plan.Decisions) error {
	var done []plan.Assignment
	for _, as := range decisions.Activate {
		about := a.aboutReservation(gpuportal.StepActivate, as.ReservationID)
		ok, err := a.each(ctx, about, func() error {
			if _, err := a.tx.ExecContext(ctx, `UPDATE reservations SET status = 'active' WHERE id = ?`, as.ReservationID); err != nil {
				return err
			}
			if err := a.assign(ctx, as); err != nil {
				return err
			}
			return a.db.emitReservation(ctx, a.tx, as.ReservationID, gpuportal.EventReservationStarted)
		})
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		done = append(done, as)
		about.step = gpuportal.StepLaunch
		if _, err := a.each(ctx, about, func() error { return a.startLaunch(ctx, as.ReservationID) }); err != nil {
			return err
		}
	}
	a.applied.Activate = done
	return nil
}

// assign records a reservation's GPUs; what could not be found is refunded.
func (a *applier) assign(ctx context.Context, as plan.Assignment) error {
	for _, g := range as.GPUs {
		if _, err := a.tx.ExecContext(ctx, `INSERT INTO reservation_gpus (gpu_uuid, reservation_id) VALUES (?, ?)`, g, as.ReservationID); err != nil {
			return err
		}
	}
	if as.Missing == 0 {
		return nil
	}
	r, err := reservationFor(ctx, a.tx, nil, as.ReservationID)
	if err != nil {
		return err
	}
	return a.db.shortReservation(ctx, a.tx, r, as.Missing, as.Cause, a.now)
}

func (a *applier) lostWork(ctx context.Context, decisions plan.Decisions) error {
	var done []plan.Outcome
	for _, o := range decisions.LostWork {
		ok, err := a.each(ctx, a.aboutInstance(gpuportal.StepLostWork, o.InstanceID), func() error { return a.lostWorkOne(ctx, o) })
		if err != nil {
			return err
		}
		if ok {
			done = append(done, o)
		}
	}
	a.applied.LostWork = done
	return nil
}

func (a *applier) lostWorkOne(ctx context.Context, o plan.Outcome) error {
	i, err := instanceFor(ctx, a.tx, nil, o.InstanceID)
	if err != nil {
		return err
	}
	errText := "node failure: the node stopped responding"
	if o.Status == gpuportal.InstanceInterrupted {
		errText = "node failure"
	}
	if o.Notice {
		if err := a.db.interrupt(ctx, a.tx, i, gpuportal.ReasonNodeFailure, a.now, a.now, 0); err != nil {
			return err
		}
	}
	if err := a.db.finishAttempt(ctx, a.tx, i, o.Status, nil, errText, false, endNodeLost, a.now); err != nil {
		return err
	}
	// Restarted, it waits for its old node to confirm the old attempt
	// gone: during a partition that attempt may still run (and write
	// its checkpoint directory).
	_, err = a.tx.ExecContext(ctx, `UPDATE instances SET unconfirmed_node = ?, unconfirmed_since = ? WHERE id = ? AND status = 'pending'`,
		i.Node, a.db.Wall.Now().Unix(), i.ID)
	return err
}

func (a *applier) replace(ctx context.Context, decisions plan.Decisions) error {
	var done []plan.Assignment
	for _, as := range decisions.Replace {
		ok, err := a.each(ctx, a.aboutReservation(gpuportal.StepReplace, as.ReservationID), func() error {
			if _, err := a.tx.ExecContext(ctx, `DELETE FROM reservation_gpus WHERE reservation_id = ? AND gpu_uuid IN
				(SELECT g.uuid FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE `+gpuOut+`)`, as.ReservationID); err != nil {
				return err
			}
			return a.assign(ctx, as)
		})
		if err != nil {
			return err
		}
		if ok {
			done = append(done, as)
		}
	}
	a.applied.Replace = done
	return nil
}

func (a *applier) balances(ctx context.Context, decisions plan.Decisions) error {
	var policies gpuportal.Policies
	for _, b := range decisions.Balance {
		about := decision{step: gpuportal.StepBalance, subject: fmt.Sprintf("account %d (%s)", b.UserID, b.Action), userID: b.UserID}
		if _, err := a.each(ctx, about, func() error { return a.balance(ctx, b, &policies) }); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) balance(ctx context.Context, b plan.BalanceAction, policies *gpuportal.Policies) error {
	switch b.Action {
	case plan.BalanceCallOff:
		return a.db.callOffBalanceStops(ctx, a.tx, b.UserID, &a.nodes)
	case plan.BalanceStop:
		if policies.Global.SpotNoticeSeconds == 0 {
			p, err := a.db.policies(ctx, a.tx)
			if err != nil {
				return err
			}
			*policies = p
		}
		stopped, err := a.db.stopInstancesOf(ctx, a.tx, b.UserID, gpuportal.ReasonBalance, a.now, *policies, &a.nodes)
		if err != nil || stopped == 0 {
			return err
		}
		a.balanceStops += stopped
		bal, err := a.db.balanceIn(ctx, a.tx, b.UserID, a.now)
		if err != nil {
			return err
		}
		return a.db.notify(ctx, a.tx, b.UserID, gpuportal.NoteBalanceStop, gpuportal.NoteParams{Count: stopped, Available: bal.Available})
	case plan.BalanceWarn:
		bal, err := a.db.balanceIn(ctx, a.tx, b.UserID, a.now)
		if err != nil {
			return err
		}
		if bal.RunsOutAt == nil {
			return nil
		}
		if _, err := a.tx.ExecContext(ctx, `UPDATE users SET low_balance_noted_at = ? WHERE id = ?`, unix(a.now), b.UserID); err != nil {
			return err
		}
		if err := a.db.emit(ctx, a.tx, b.UserID, gpuportal.EventBalanceLow, func() (any, error) { return bal, nil }); err != nil {
			return err
		}
		return a.db.notify(ctx, a.tx, b.UserID, gpuportal.NoteBalanceLow, gpuportal.NoteParams{Available: bal.Available, RunsOutAt: *bal.RunsOutAt})
	case plan.BalanceClear:
		_, err := a.tx.ExecContext(ctx, `UPDATE users SET low_balance_noted_at = NULL WHERE id = ?`, b.UserID)
		return err
	}
	return fmt.Errorf("unknown balance action %q", b.Action)
}

func (a *applier) interrupt(ctx context.Context, decisions plan.Decisions) error {
	var done []plan.Interruption
	for _, in := range decisions.Interrupt {
		ok, err := a.each(ctx, a.aboutInstance(gpuportal.StepInterrupt, in.InstanceID), func() error {
			i, err := instanceFor(ctx, a.tx, nil, in.InstanceID)
			if err != nil {
				return err
			}
			if err := a.db.interrupt(ctx, a.tx, i, in.Reason, a.now, in.Deadline, in.Grace); err != nil {
				return err
			}
			a.nodes = append(a.nodes, in.Node)
			return nil
		})
		if err != nil {
			return err
		}
		if ok {
			done = append(done, in)
		}
	}
	a.applied.Interrupt = done
	return nil
}

func (a *applier) place(ctx context.Context, decisions plan.Decisions) error {
	var placed []plan.Placement
	for _, pl := range decisions.Place {
		var fits bool
		ok, err := a.each(ctx, a.aboutInstance(gpuportal.StepPlace, pl.InstanceID), func() error {
			var err error
			fits, err = a.placeOne(ctx, pl)
			return err
		})
		if err != nil {
			return err
		}
		if ok && fits {
			placed = append(placed, pl)
		}
	}
	a.applied.Place = placed
	return nil
}

// onDemandStillFits checks an on-demand start again in the tick's
// transaction (gpuportal.OnDemandFits over the whole book): the planner
// decided on the same rule, but a start that would short a booking must
// never be written. A start that no longer fits is skipped (it waits).
func (a *applier) onDemandStillFits(ctx context.Context, model, region string, count int) (bool, error) {
	policies, err := a.db.policies(ctx, a.tx)
	if err != nil {
		return false, err
	}
	err = a.db.checkOnDemandFits(ctx, a.tx, model, region, count, policies.For(model), a.now)
	if gpuportal.ErrorCode(err) == gpuportal.ECAPACITY {
		return false, nil
	}
	return err == nil, err
}

// placeOne writes a placement, unless an on-demand start no longer fits
// (false: it waits).
func (a *applier) placeOne(ctx context.Context, pl plan.Placement) (bool, error) {
	var kind gpuportal.InstanceKind
	var model, region string
	if err := a.tx.QueryRowContext(ctx, `SELECT kind, model_id, region_id FROM instances WHERE id = ?`, pl.InstanceID).Scan(&kind, &model, &region); err != nil {
		return false, err
	}
	if kind == gpuportal.KindOnDemand {
		// Counted among the on-demand GPUs since its launch: 0 more.
		ok, err := a.onDemandStillFits(ctx, model, region, 0)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, nil
		}
	}
	for _, g := range pl.GPUs {
		if _, err := a.tx.ExecContext(ctx, `INSERT INTO instance_gpus (gpu_uuid, instance_id) VALUES (?, ?)`, g, pl.InstanceID); err != nil {
			return false, err
		}
	}
	// A new attempt: no notice, and no rebalance recommendation yet.
	if _, err := a.tx.ExecContext(ctx, `UPDATE instances SET node_id = ?, attempt = attempt + 1, notice_at = NULL, notice_wall_at = NULL, deadline_at = NULL,
		interrupt_reason = NULL, rebalance_at = NULL WHERE id = ?`, pl.Node, pl.InstanceID); err != nil {
		return false, err
	}
	// Its old node never confirmed the last attempt gone (the wait ran
	// out): this attempt gets a fresh checkpoint directory of its own.
	if _, err := a.tx.ExecContext(ctx, `UPDATE instances SET checkpoint_key = checkpoint_key || '-attempt-' || CAST(attempt AS TEXT), unconfirmed_node = NULL, unconfirmed_since = NULL
		WHERE id = ? AND unconfirmed_node IS NOT NULL`, pl.InstanceID); err != nil {
		return false, err
	}
	if pl.Restarted {
		i, err := instanceFor(ctx, a.tx, nil, pl.InstanceID)
		if err != nil {
			return false, err
		}
		if err := a.db.notify(ctx, a.tx, i.UserID, gpuportal.NoteInstanceRestarted, gpuportal.NoteParams{InstanceID: i.ID, Model: i.Model, Region: i.Region, Count: i.Count}); err != nil {
			return false, err
		}
	}
	if err := bumpNode(ctx, a.tx, pl.Node); err != nil {
		return false, err
	}
	a.nodes = append(a.nodes, pl.Node)
	return true, nil
}

func (a *applier) tasks(ctx context.Context, decisions plan.Decisions) error {
	var started []plan.TaskStart
	for _, t := range decisions.Tasks {
		var fits bool
		about := a.aboutJob(gpuportal.StepTask, t.JobID)
		about.subject = fmt.Sprintf("task %d of job %d", t.TaskIndex, t.JobID)
		ok, err := a.each(ctx, about, func() error {
			var err error
			fits, err = a.startTask(ctx, t)
			return err
		})
		if err != nil {
			return err
		}
		if ok && fits {
			started = append(started, t)
		}
	}
	a.applied.Tasks = started
	for _, id := range decisions.UnpaidJobs {
		_, err := a.each(ctx, a.aboutJob(gpuportal.StepJobUnpaid, id), func() error {
			j, err := jobFor(ctx, a.tx, nil, id)
			if err != nil {
				return err
			}
			return a.db.noteJobUnpaid(ctx, a.tx, j, a.now)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// startTask creates the instance attempt of a job's task on its GPUs,
// unless an on-demand task no longer fits (false: it stays queued).
func (a *applier) startTask(ctx context.Context, t plan.TaskStart) (bool, error) {
	j, err := jobFor(ctx, a.tx, nil, t.JobID)
	if err != nil {
		return false, err
	}
	if t.Kind == gpuportal.KindOnDemand {
		ok, err := a.onDemandStillFits(ctx, j.Model, j.Region, j.GPUsPerTask)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, nil
		}
	}
	var id int64
	if err := a.tx.QueryRowContext(ctx, `INSERT INTO instances (user_id, kind, model_id, region_id, count, command, auto_restart, status, node_id, attempt,
		checkpoint_key, price_fen, created_at, image, job_id, task_index, disk_gib, created_by) VALUES (?, ?, ?, ?, ?, ?, 0, 'pending', ?, 1, ?, ?, ?, ?, ?, ?, ?, (SELECT created_by FROM jobs WHERE id = ?)) RETURNING id`,
		j.UserID, t.Kind, j.Model, j.Region, j.GPUsPerTask, j.Command, t.Node, fmt.Sprintf("job-%d-task-%d", j.ID, t.TaskIndex), t.Price, unix(a.now), j.Image, j.ID, t.TaskIndex, j.DiskGiB, j.ID).Scan(&id); err != nil {
		return false, err
	}
	if err := copyLabels(ctx, a.tx, labelJob, j.ID, labelInstance, id); err != nil {
		return false, err
	}
	for _, g := range t.GPUs {
		if _, err := a.tx.ExecContext(ctx, `INSERT INTO instance_gpus (gpu_uuid, instance_id) VALUES (?, ?)`, g, id); err != nil {
			return false, err
		}
	}
	// The job's volumes, as checked at its submission (a volume a job
	// names cannot be deleted while the job runs).
	for _, m := range j.Volumes {
		if _, err := a.tx.ExecContext(ctx, `INSERT INTO instance_volumes (instance_id, volume_id, mount_path) VALUES (?, ?, ?)`, id, m.ID, m.MountPath); err != nil {
			return false, fmt.Errorf("mount volume %d: %w", m.ID, err)
		}
	}
	if _, err := a.tx.ExecContext(ctx, `UPDATE job_tasks SET status = 'running', attempts = attempts + 1, instance_id = ?, exit_code = NULL WHERE job_id = ? AND task_index = ?`,
		id, j.ID, t.TaskIndex); err != nil {
		return false, err
	}
	if _, err := a.tx.ExecContext(ctx, `UPDATE jobs SET status = 'running', unpaid_noted_at = NULL WHERE id = ?`, j.ID); err != nil {
		return false, err
	}
	if err := bumpNode(ctx, a.tx, t.Node); err != nil {
		return false, err
	}
	a.nodes = append(a.nodes, t.Node)
	return true, nil
}

func (a *applier) reminders(ctx context.Context, decisions plan.Decisions) error {
	for _, rm := range decisions.Reminders {
		if _, err := a.each(ctx, a.aboutReservation(gpuportal.StepReminder, rm.ReservationID), func() error { return a.remind(ctx, rm) }); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) remind(ctx context.Context, rm plan.Reminder) error {
	flag := "reminded_start"
	if rm.Kind == gpuportal.NoteReservationEnds {
		flag = "reminded_end"
	}
	r, err := reservationFor(ctx, a.tx, nil, rm.ReservationID)
	if err != nil {
		return err
	}
	if _, err := a.tx.ExecContext(ctx, `UPDATE reservations SET `+flag+` = 1 WHERE id = ?`, r.ID); err != nil {
		return err
	}
	params := gpuportal.NoteParams{ReservationID: r.ID, Model: r.Model, Region: r.Region, Count: r.Count, Start: r.Start, End: r.End}
	if rm.Kind == gpuportal.NoteReservationEnds {
		params.ExtendHours = a.db.extendableHours(ctx, a.tx, r)
	}
	if rm.Kind == gpuportal.NoteReservationStarts && r.Launch != nil && r.Launch.ResumeInstanceID != nil {
		params.InstanceID = *r.Launch.ResumeInstanceID // the reminder names what it resumes
	}
	if rm.Kind == gpuportal.NoteReservationEnds {
		if err := a.db.emitReservation(ctx, a.tx, r.ID, gpuportal.EventReservationEnding); err != nil {
			return err
		}
	}
	return a.db.notify(ctx, a.tx, r.UserID, rm.Kind, params)
}

// rebalance posts each recommendation once: the instance's metadata
// answers events/recommendations/rebalance from now on, and its owner is
// told in the portal (its notice still comes as before if the workload
// does nothing).
func (a *applier) rebalance(ctx context.Context, decisions plan.Decisions) error {
	for _, r := range decisions.Rebalance {
		if _, err := a.each(ctx, a.aboutInstance(gpuportal.StepRebalance, r.InstanceID), func() error { return a.recommendRebalance(ctx, r) }); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) recommendRebalance(ctx context.Context, r plan.Recommendation) error {
	res, err := a.tx.ExecContext(ctx, `UPDATE instances SET rebalance_at = ? WHERE id = ? AND rebalance_at IS NULL AND status IN ('pending', 'running')`, unix(a.now), r.InstanceID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	i, err := instanceFor(ctx, a.tx, nil, r.InstanceID)
	if err != nil {
		return err
	}
	if err := a.db.emitInstance(ctx, a.tx, i.ID, gpuportal.EventInstanceRebalance); err != nil {
		return err
	}
	if i.JobID == nil {
		params := gpuportal.NoteParams{InstanceID: i.ID, Model: i.Model, Region: i.Region, Count: i.Count, Kind: string(i.Kind)}
		if i.ReclaimExpected != nil {
			params.Deadline = *i.ReclaimExpected
		}
		if err := a.db.notifyInApp(ctx, a.tx, i.UserID, gpuportal.NoteSpotRebalance, params); err != nil {
			return err
		}
	}
	if err := bumpNode(ctx, a.tx, r.Node); err != nil {
		return err
	}
	a.nodes = append(a.nodes, r.Node)
	return nil
}
