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

// A job's tasks run as instances: each attempt of task i is an instance
// with job_id and task_index set, whose checkpoint directory
// (job-<id>-task-<i>) is the same for every attempt. The scheduler's job
// step starts queued tasks where GPUs are free; the end of an attempt
// (finishAttempt) moves its task on: succeeded, queued again, or failed.

const jobColumns = `id, user_id, name, model_id, region_id, gpus_per_task, task_count, command, image, kind, max_parallel, on_demand_workers, max_attempts,
	list_price_fen, status, created_at, ended_at, volumes, disk_gib, created_by, (SELECT t.id FROM teams t WHERE t.account_id = jobs.user_id) AS team_id`

type jobRow struct {
	gpuportal.Job
	listPrice gpuportal.Fen
}

func scanJob(row interface{ Scan(...any) error }) (*jobRow, error) {
	var j jobRow
	var created int64
	var ended sql.NullInt64
	var volumes string
	if err := row.Scan(&j.ID, &j.UserID, &j.Name, &j.Model, &j.Region, &j.GPUsPerTask, &j.Tasks.Total, &j.Command, &j.Image, &j.Kind, &j.MaxParallel,
		&j.OnDemandWorkers, &j.MaxAttempts, &j.listPrice, &j.Status, &created, &ended, &volumes, &j.DiskGiB, &j.CreatedBy, &j.TeamID); err != nil {
		return nil, err
	}
	if volumes != "" {
		if err := json.Unmarshal([]byte(volumes), &j.Volumes); err != nil {
			return nil, fmt.Errorf("job %d volumes: %w", j.ID, err)
		}
	}
	j.CreatedAt, j.EndedAt = fromUnix(created), fromNullUnix(ended)
	return &j, nil
}

func jobFor(ctx context.Context, q queryer, user *gpuportal.User, id int64) (*jobRow, error) {
	j, err := scanJob(q.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !user.CanSee(j.UserID)) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Job %d not found.", id)
	}
	return j, err
}

// CreateJob queues a job's tasks; the scheduler starts them.
func (db *DB) CreateJob(ctx context.Context, user *gpuportal.User, req gpuportal.JobRequest) (*gpuportal.Job, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var id int64
	var created *jobRow
	err := db.inTx(ctx, "create job", func(tx *sql.Tx) error {
		model, policy, err := db.catalogEntry(ctx, tx, req.Model, req.Region)
		if err != nil {
			return named("read catalog entry", err)
		}
		// What the job names is checked before quota and money.
		image, err := imageForLaunch(ctx, tx, user.ID, req.Region, req.Image)
		if err != nil {
			return named("image for launch", err)
		}
		mounts, err := db.resolveMounts(ctx, tx, user.ID, req.Region, req.Volumes)
		if err != nil {
			return named("resolve mounts", err)
		}
		disk, err := policy.DiskFor(req.DiskGiB, "disk_gib")
		if err != nil {
			return err
		}
		if err := db.lockAccount(ctx, tx, user.ID); err != nil {
			return named("lock account", err)
		}
		if err := db.checkQueuedTaskQuota(ctx, tx, user.ID, req.Tasks); err != nil {
			return named("check queued task quota", err)
		}
		// A job needs the money for its first task-hour (at the spot
		// price), as a launch does: a ¥0 account queues nothing.
		price := policy.SpotPriceOf(*model)
		if req.Kind == gpuportal.JobHybrid && req.OnDemandWorkers > 0 {
			price = model.ListPrice // its first task runs on-demand
		}
		if err := db.requireLaunchFunds(ctx, tx, user.ID, price*gpuportal.Fen(req.GPUsPerTask), db.now()); err != nil {
			return err
		}
		if err := db.checkMemberSpend(ctx, tx, user, price*gpuportal.Fen(req.GPUsPerTask)); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `INSERT INTO jobs (user_id, name, model_id, region_id, gpus_per_task, task_count, command, image, kind, max_parallel,
			on_demand_workers, max_attempts, list_price_fen, status, created_at, volumes, disk_gib, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?) RETURNING id`,
			user.ID, req.Name, req.Model, req.Region, req.GPUsPerTask, req.Tasks, req.Command, image.Reference, req.Kind, req.MaxParallel,
			req.OnDemandWorkers, req.MaxAttempts, model.ListPrice, unix(db.now()), mountsJSON(mounts), disk, user.MemberID()).Scan(&id); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		if err := saveLabels(ctx, tx, labelJob, id, req.Labels); err != nil {
			return err
		}
		// Every task at once, in one statement.
		if _, err := tx.ExecContext(ctx, `WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < CAST(? AS BIGINT))
			INSERT INTO job_tasks (job_id, task_index, status) SELECT CAST(? AS BIGINT), i, 'queued' FROM seq`, req.Tasks, id); err != nil {
			return fmt.Errorf("insert tasks: %w", err)
		}
		// The answer is the job as created — queued, as the API promises —
		// read in its own transaction: a tick on another goroutine may
		// start its tasks the moment it commits.
		created, err = jobFor(ctx, tx, user, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	created.Tasks = gpuportal.TaskCounts{Total: req.Tasks, Queued: req.Tasks}
	db.Kick(ctx) // start its tasks now
	return &created.Job, nil
}

// Job is one job with its counts, cost and ETA.
func (db *DB) Job(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Job, error) {
	j, err := jobFor(ctx, db.read, user, id)
	if err != nil {
		return nil, err
	}
	if err := db.jobFigures(ctx, j); err != nil {
		return nil, err
	}
	return &j.Job, nil
}

// Jobs lists a user's jobs (an admin's: everybody's), newest first, a
// page at a time.
func (db *DB) Jobs(ctx context.Context, user *gpuportal.User, limit, offset int) ([]gpuportal.Job, error) {
	return db.JobPage(ctx, user, Page{Limit: limit, Offset: offset})
}

// JobPage is a page of the user's jobs (an admin's: everybody's, as
// every list), newest first.
func (db *DB) JobPage(ctx context.Context, user *gpuportal.User, p Page) ([]gpuportal.Job, error) {
	return db.JobList(ctx, user, p, nil)
}

// JobList is JobPage of the jobs with every label of labels.
func (db *DB) JobList(ctx context.Context, user *gpuportal.User, p Page, labels gpuportal.LabelFilter) ([]gpuportal.Job, error) {
	query, args, err := visibleTo(user, "jobs").labelled(labelJob, labels).page(ctx, db, p, jobColumns, "id DESC")
	if err != nil {
		return nil, err
	}
	list, err := scanEach(ctx, db.read, scanJob, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	out := []gpuportal.Job{}
	for _, j := range list {
		if err := db.jobFigures(ctx, j); err != nil {
			return nil, err
		}
		out = append(out, j.Job)
	}
	return out, nil
}

// jobFigures fills a job's task counts, interruptions, cost (live for
// running attempts), the same GPU-minutes at the on-demand list price, and
// the ETA.
func (db *DB) jobFigures(ctx context.Context, j *jobRow) error {
	if err := jobLabels(ctx, db.read, []*gpuportal.Job{&j.Job}); err != nil {
		return err
	}
	rows, err := db.read.QueryContext(ctx, `SELECT status, count(*), coalesce(sum(interruptions), 0) FROM job_tasks WHERE job_id = ? GROUP BY status`, j.ID)
	if err != nil {
		return fmt.Errorf("job %d tasks: %w", j.ID, err)
	}
	c := gpuportal.TaskCounts{Total: j.Tasks.Total}
	j.Interruptions = 0
	for rows.Next() {
		var status gpuportal.TaskStatus
		var n, interruptions int
		if err := rows.Scan(&status, &n, &interruptions); err != nil {
			rows.Close()
			return err
		}
		j.Interruptions += interruptions
		switch status {
		case gpuportal.TaskQueued:
			c.Queued = n
		case gpuportal.TaskRunning:
			c.Running = n
		case gpuportal.TaskSucceeded:
			c.Succeeded = n
		case gpuportal.TaskFailed:
			c.Failed = n
		case gpuportal.TaskCancelled:
			c.Cancelled = n
		}
	}
	rows.Close()
	j.Tasks = c
	var cost gpuportal.Fen
	var gpuMinutes int64
	if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(cost_fen), 0), coalesce(sum(billed_minutes * count), 0) FROM instances WHERE job_id = ?`, j.ID).Scan(&cost, &gpuMinutes); err != nil {
		return fmt.Errorf("job %d cost: %w", j.ID, err)
	}
	now := db.now()
	live, err := db.read.QueryContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE job_id = ? AND status IN ('running', 'interrupting') AND started_at IS NOT NULL`, j.ID)
	if err != nil {
		return err
	}
	for live.Next() {
		i, err := scanInstance(live)
		if err != nil {
			live.Close()
			return err
		}
		minutes := gpuportal.BillableMinutes(*i.StartedAt, now, i.Kind, false, false, 0)
		cost += gpuportal.RunCost(i.PricePerGPU, i.Count, minutes)
		gpuMinutes += int64(minutes * i.Count)
	}
	live.Close()
	j.Cost = cost
	j.OnDemandCost = gpuportal.RunCost(j.listPrice, 1, int(gpuMinutes))
	var mean sql.NullFloat64
	var finished int
	if err := db.read.QueryRowContext(ctx, `SELECT avg(duration_s), count(duration_s) FROM job_tasks WHERE job_id = ? AND status = 'succeeded'`, j.ID).Scan(&mean, &finished); err != nil {
		return err
	}
	if !j.Finished() {
		j.ETA = gpuportal.JobETA(now, time.Duration(mean.Float64*float64(time.Second)), finished, c.Queued+c.Running, j.MaxParallel)
	}
	return nil
}

// JobTasks lists a job's tasks in order.
func (db *DB) JobTasks(ctx context.Context, user *gpuportal.User, id int64, limit, offset int) ([]gpuportal.JobTask, int, error) {
	j, err := jobFor(ctx, db.read, user, id)
	if err != nil {
		return nil, 0, err
	}
	rows, err := db.read.QueryContext(ctx, `SELECT t.task_index, t.status, t.attempts, t.failures, t.interruptions, t.instance_id, t.exit_code, i.started_at, t.finished_at
		FROM job_tasks t LEFT JOIN instances i ON i.id = t.instance_id WHERE t.job_id = ? ORDER BY t.task_index LIMIT ? OFFSET ?`, id, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("job %d tasks: %w", id, err)
	}
	defer rows.Close()
	out := []gpuportal.JobTask{}
	for rows.Next() {
		var t gpuportal.JobTask
		var inst, exit, started, finished sql.NullInt64
		if err := rows.Scan(&t.Index, &t.Status, &t.Attempts, &t.Failures, &t.Interruptions, &inst, &exit, &started, &finished); err != nil {
			return nil, 0, err
		}
		if inst.Valid {
			t.InstanceID = &inst.Int64
		}
		if exit.Valid {
			c := int(exit.Int64)
			t.ExitCode = &c
		}
		t.StartedAt, t.FinishedAt = fromNullUnix(started), fromNullUnix(finished)
		out = append(out, t)
	}
	return out, j.Tasks.Total, rows.Err()
}

// TaskAttempts lists the instances that ran one task of a job, oldest first.
func (db *DB) TaskAttempts(ctx context.Context, user *gpuportal.User, jobID int64, index int) ([]gpuportal.Instance, error) {
	if _, err := jobFor(ctx, db.read, user, jobID); err != nil {
		return nil, err
	}
	list, err := scanEach(ctx, db.read, scanOneInstance, `SELECT `+instanceColumns+` FROM instances WHERE job_id = ? AND task_index = ? ORDER BY id`, jobID, index)
	if err != nil {
		return nil, fmt.Errorf("task attempts: %w", err)
	}
	for _, i := range list {
		db.live(i)
	}
	if err := db.instanceGPUs(ctx, db.read, list); err != nil {
		return nil, err
	}
	out := make([]gpuportal.Instance, len(list))
	for k, i := range list {
		out[k] = *i
	}
	return out, nil
}

// CancelJob cancels a job: queued tasks are cancelled, running ones get
// the normal stop. Cancelling a finished job changes nothing.
func (db *DB) CancelJob(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Job, error) {
	var nodes []string
	err := db.inTx(ctx, "cancel job", func(tx *sql.Tx) error {
		j, err := jobFor(ctx, tx, user, id)
		if err != nil {
			return named("read job", err)
		}
		if j.Finished() {
			return nil
		}
		now := db.now()
		if j.UserID != user.ID {
			if err := db.audit(ctx, tx, user.ID, "job.admin_cancel", fmt.Sprintf("job/%d", j.ID), map[string]string{"status": string(j.Status)}, map[string]string{"status": string(gpuportal.JobCancelled)}); err != nil {
				return err
			}
		}
		nodes, err = db.cancelJob(ctx, tx, j.ID, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, nodes...)
	db.Kick(ctx)
	return db.Job(ctx, user, id)
}

// cancelJob cancels a job in tx: its queued tasks are cancelled, its
// running ones asked to stop; it returns the nodes to tell.
func (db *DB) cancelJob(ctx context.Context, tx *sql.Tx, jobID int64, now time.Time) ([]string, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET status = 'cancelled' WHERE id = ?`, jobID); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE job_tasks SET status = 'cancelled', finished_at = ? WHERE job_id = ? AND status = 'queued'`, unix(now), jobID); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT coalesce(node_id, '') FROM instances WHERE job_id = ? AND status IN ('pending', 'running', 'interrupting') AND stop_requested_at IS NULL`, jobID)
	if err != nil {
		return nil, err
	}
	nodes, err := scanColumn[string](rows, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE instances SET stop_requested_at = ? WHERE job_id = ? AND status IN ('pending', 'running', 'interrupting') AND stop_requested_at IS NULL`, unix(now), jobID); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if n != "" {
			if err := bumpNode(ctx, tx, n); err != nil {
				return nil, err
			}
		}
	}
	return nodes, db.settleJob(ctx, tx, jobID, now)
}

// taskAttemptEnded moves a job's task on when an attempt of it ended:
// an interruption (or a node failure) queues it again without counting
// against it, exit 0 is success, another end is a failed attempt (queued
// again until max_attempts), a stop cancels it.
func (db *DB) taskAttemptEnded(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, outcome gpuportal.InstanceStatus, exitCode *int, errText string, userStopped bool, cause endCause, now time.Time) error {
	var maxAttempts, failures int
	var jobStatus gpuportal.JobStatus
	if err := tx.QueryRowContext(ctx, `SELECT j.max_attempts, j.status, t.failures FROM job_tasks t JOIN jobs j ON j.id = t.job_id WHERE t.job_id = ? AND t.task_index = ?`,
		*i.JobID, *i.TaskIndex).Scan(&maxAttempts, &jobStatus, &failures); err != nil {
		return fmt.Errorf("task %d of job %d: %w", *i.TaskIndex, *i.JobID, err)
	}
	interrupted := outcome == gpuportal.InstanceInterrupted || cause == endNodeLost
	failed := outcome == gpuportal.InstanceFailed
	status, failuresAfter := gpuportal.JobTaskOutcome(interrupted, userStopped || jobStatus == gpuportal.JobCancelled, failed, failures, maxAttempts)
	interruptions := 0
	if interrupted && status == gpuportal.TaskQueued {
		interruptions = 1
	}
	var finished, duration sql.NullInt64
	if status != gpuportal.TaskQueued {
		finished = sql.NullInt64{Int64: unix(now), Valid: true}
	}
	if status == gpuportal.TaskSucceeded && i.StartedAt != nil {
		duration = sql.NullInt64{Int64: int64(now.Sub(*i.StartedAt).Seconds()), Valid: true}
	}
	var code sql.NullInt64
	if exitCode != nil {
		code = sql.NullInt64{Int64: int64(*exitCode), Valid: true}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE job_tasks SET status = ?, failures = ?, interruptions = interruptions + ?, exit_code = ?, finished_at = ?, duration_s = ?
		WHERE job_id = ? AND task_index = ? AND instance_id = ?`, status, failuresAfter, interruptions, code, finished, duration, *i.JobID, *i.TaskIndex, i.ID); err != nil {
		return err
	}
	return db.settleJob(ctx, tx, *i.JobID, now)
}

// settleJob ends a job once none of its tasks is queued or running:
// succeeded when every task did, else failed (or cancelled); its owner is
// told.
func (db *DB) settleJob(ctx context.Context, tx *sql.Tx, jobID int64, now time.Time) error {
	j, err := jobFor(ctx, tx, nil, jobID)
	if err != nil {
		return err
	}
	if j.EndedAt != nil {
		return nil
	}
	var open int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM job_tasks WHERE job_id = ? AND status IN ('queued', 'running')`, jobID).Scan(&open); err != nil {
		return err
	}
	if open > 0 {
		return nil
	}
	failed, err := scanColumn[int](tx.QueryContext(ctx, `SELECT task_index FROM job_tasks WHERE job_id = ? AND status = 'failed' ORDER BY task_index`, jobID))
	if err != nil {
		return err
	}
	status := gpuportal.JobStatusOf(gpuportal.TaskCounts{Total: j.Tasks.Total, Failed: len(failed)}, j.Status == gpuportal.JobCancelled, true)
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET status = ?, ended_at = ? WHERE id = ?`, status, unix(now), jobID); err != nil {
		return err
	}
	if err := db.emit(ctx, tx, j.UserID, gpuportal.EventJobFinished, func() (any, error) {
		done, err := jobFor(ctx, tx, nil, jobID)
		if err != nil {
			return nil, err
		}
		return &done.Job, jobLabels(ctx, tx, []*gpuportal.Job{&done.Job})
	}); err != nil {
		return err
	}
	switch status {
	case gpuportal.JobSucceeded:
		return db.notify(ctx, tx, j.UserID, gpuportal.NoteJobSucceeded, gpuportal.NoteParams{JobID: j.ID, JobName: j.Title(), Count: j.Tasks.Total})
	case gpuportal.JobFailed:
		return db.notify(ctx, tx, j.UserID, gpuportal.NoteJobFailed, gpuportal.NoteParams{JobID: j.ID, JobName: j.Title(), Count: j.Tasks.Total, Tasks: failed})
	}
	return nil
}

// noteJobUnpaid tells a job's owner, once until it runs again, that its
// tasks wait because their balance cannot pay for another.
func (db *DB) noteJobUnpaid(ctx context.Context, tx *sql.Tx, j *jobRow, now time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET unpaid_noted_at = ? WHERE id = ? AND unpaid_noted_at IS NULL`, unix(now), j.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	return db.notify(ctx, tx, j.UserID, gpuportal.NoteJobUnpaid, gpuportal.NoteParams{JobID: j.ID, JobName: j.Title(), Count: j.Tasks.Total})
}
