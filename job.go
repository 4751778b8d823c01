package gpuportal

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// JobKind is how a job's tasks run: all spot, or spot with a few
// on-demand workers for a deadline.
type JobKind string

// Job kinds.
const (
	JobSpot   JobKind = "spot"
	JobHybrid JobKind = "hybrid"
)

// JobStatus is where a job is.
type JobStatus string

// Job statuses.
const (
	JobQueued    JobStatus = "queued" // no task has started yet
	JobRunning   JobStatus = "running"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
	JobCancelled JobStatus = "cancelled"
)

// TaskStatus is where one task of a job is.
type TaskStatus string

// Task statuses.
const (
	TaskQueued    TaskStatus = "queued"
	TaskRunning   TaskStatus = "running"
	TaskSucceeded TaskStatus = "succeeded"
	TaskFailed    TaskStatus = "failed"
	TaskCancelled TaskStatus = "cancelled"
)

// Limits of one job.
const (
	MaxJobTasks        = 10000
	MaxJobParallel     = 1000
	MaxJobAttempts     = 10
	DefaultJobAttempts = 3
)

// JobRequest is a batch of independent tasks to run on spot (or hybrid)
// instances: task i runs command with GPUPORTAL_TASK_INDEX=i.
type JobRequest struct {
	Name            string  `json:"name"`
	Model           string  `json:"model"`
	Region          string  `json:"region"`
	GPUsPerTask     int     `json:"gpus_per_task"`
	Tasks           int     `json:"tasks"`
	Command         string  `json:"command"`
	Image           string  `json:"image,omitempty"` // a catalog image id; empty: the first
	MaxParallel     int     `json:"max_parallel"`
	Kind            JobKind `json:"kind"`                        // spot or hybrid
	OnDemandWorkers int     `json:"on_demand_workers,omitempty"` // hybrid: tasks at a time on on-demand instances
	MaxAttempts     int     `json:"max_attempts,omitempty"`      // failed attempts before a task fails (default 3)
	// Volumes every task mounts.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// DiskGiB sizes each task's disk (nil: the policy's).
	DiskGiB *int `json:"disk_gib,omitempty"`
	// Labels tag the job and each of its tasks' instances.
	Labels Labels `json:"labels,omitempty"`
}

// Validate checks the shape of a job request and fills its defaults.
func (r *JobRequest) Validate() error {
	if err := ValidateLabels(r.Labels); err != nil {
		return err
	}
	r.Name = strings.TrimSpace(r.Name)
	if utf8.RuneCountInString(r.Name) > 100 || !utf8.ValidString(r.Name) {
		return FieldErrorf(EINVALID, "name", "The name must be at most 100 characters.")
	}
	switch r.Kind {
	case "":
		r.Kind = JobSpot
	case JobSpot, JobHybrid:
	default:
		return FieldErrorf(EINVALID, "kind", "The kind must be spot or hybrid.")
	}
	if r.GPUsPerTask < 1 || r.GPUsPerTask > MaxGPUsPerInstance {
		return FieldErrorf(EINVALID, "gpus_per_task", "A task runs on 1 to %d GPUs of one node.", MaxGPUsPerInstance)
	}
	if r.Tasks < 1 || r.Tasks > MaxJobTasks {
		return FieldErrorf(EINVALID, "tasks", "A job has 1 to %d tasks.", MaxJobTasks)
	}
	if r.MaxParallel < 1 || r.MaxParallel > MaxJobParallel {
		return FieldErrorf(EINVALID, "max_parallel", "At most 1 to %d tasks run at once.", MaxJobParallel)
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultJobAttempts
	}
	if r.MaxAttempts < 1 || r.MaxAttempts > MaxJobAttempts {
		return FieldErrorf(EINVALID, "max_attempts", "A task may be tried 1 to %d times.", MaxJobAttempts)
	}
	switch {
	case r.Kind == JobSpot && r.OnDemandWorkers != 0:
		return FieldErrorf(EINVALID, "on_demand_workers", "On-demand workers are for hybrid jobs.")
	case r.Kind == JobHybrid && (r.OnDemandWorkers < 1 || r.OnDemandWorkers > r.MaxParallel):
		return FieldErrorf(EINVALID, "on_demand_workers", "A hybrid job runs 1 to max_parallel of its tasks on-demand.")
	}
	return ValidateCommand(&r.Command)
}

// TaskCounts is how a job's tasks stand.
type TaskCounts struct {
	Total     int `json:"total"`
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// Done is the share of tasks that finished (succeeded, failed or
// cancelled), in percent.
func (c TaskCounts) Done() int {
	if c.Total == 0 {
		return 0
	}
	return (c.Succeeded + c.Failed + c.Cancelled) * 100 / c.Total
}

// Job is a submitted batch and how far it is.
type Job struct {
	ID     int64 `json:"id"`
	UserID int64 `json:"user_id"`
	// TeamID: the team it belongs to (nil: personal); CreatedBy: the
	// member who submitted it.
	TeamID          *int64  `json:"team_id"`
	CreatedBy       *int64  `json:"created_by"`
	Name            string  `json:"name"`
	Model           string  `json:"model"`
	Region          string  `json:"region"`
	GPUsPerTask     int     `json:"gpus_per_task"`
	Command         string  `json:"command"`
	Image           string  `json:"image,omitempty"`
	Kind            JobKind `json:"kind"`
	MaxParallel     int     `json:"max_parallel"`
	OnDemandWorkers int     `json:"on_demand_workers"`
	MaxAttempts     int     `json:"max_attempts"`
	// Volumes every task mounts (mount paths resolved).
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// DiskGiB is each task's disk.
	DiskGiB       int        `json:"disk_gib"`
	Labels        Labels     `json:"labels,omitempty"`
	Status        JobStatus  `json:"status"`
	Tasks         TaskCounts `json:"tasks"`
	Interruptions int        `json:"interruptions"`
	Cost          Fen        `json:"cost_fen"`
	OnDemandCost  Fen        `json:"on_demand_cost_fen"` // the same GPU-minutes at the on-demand list price
	ETA           *time.Time `json:"eta"`                // when the last task should end, from the finished ones
	CreatedAt     time.Time  `json:"created_at"`
	EndedAt       *time.Time `json:"ended_at,omitempty"`
}

// Title is the job's name, or its number when it has none.
func (j *Job) Title() string {
	if j.Name != "" {
		return j.Name
	}
	return fmt.Sprintf("#%d", j.ID)
}

// Saved is what the job's work costs less than on-demand, in fen and in
// percent of the on-demand cost.
func (j *Job) Saved() (Fen, int) {
	if j.OnDemandCost <= 0 {
		return 0, 0
	}
	saved := j.OnDemandCost - j.Cost
	return saved, int(int64(saved) * 100 / int64(j.OnDemandCost))
}

// Finished reports whether the job has ended.
func (j *Job) Finished() bool {
	return j.Status == JobSucceeded || j.Status == JobFailed || j.Status == JobCancelled
}

// JobTask is one task of a job: its state and its attempts so far.
type JobTask struct {
	Index         int        `json:"index"`
	Status        TaskStatus `json:"status"`
	Attempts      int        `json:"attempts"`      // instances started for it
	Failures      int        `json:"failures"`      // attempts that failed (an interruption is not one)
	Interruptions int        `json:"interruptions"` // attempts cut off by an interruption (queued again)
	InstanceID    *int64     `json:"instance_id"`   // the latest attempt
	ExitCode      *int       `json:"exit_code"`
	StartedAt     *time.Time `json:"started_at"`  // the latest attempt's start
	FinishedAt    *time.Time `json:"finished_at"` // when the task succeeded, failed or was cancelled
}

// JobTaskOutcome is what a task becomes when an attempt of it ends.
// interrupted: cut off by an interruption (or a node failure), not the
// task's fault; stopped: the job was cancelled; exit: the command's exit
// (nil if unknown, as after a lost node).
func JobTaskOutcome(interrupted, stopped bool, failed bool, failures, maxAttempts int) (status TaskStatus, failuresAfter int) {
	switch {
	case stopped:
		return TaskCancelled, failures
	case interrupted:
		return TaskQueued, failures
	case !failed:
		return TaskSucceeded, failures
	case failures+1 >= maxAttempts:
		return TaskFailed, failures + 1
	default:
		return TaskQueued, failures + 1
	}
}

// JobStatusOf is a job's status from its tasks' counts.
func JobStatusOf(c TaskCounts, cancelled, started bool) JobStatus {
	switch {
	case cancelled:
		return JobCancelled
	case c.Queued+c.Running > 0 && started:
		return JobRunning
	case c.Queued+c.Running > 0:
		return JobQueued
	case c.Failed > 0:
		return JobFailed
	default:
		return JobSucceeded
	}
}

// JobETA estimates when a job's last task ends: the tasks left, run
// parallel at a time, each taking mean (the finished tasks' mean
// duration). Nil until a task has finished, and once none is left.
func JobETA(now time.Time, mean time.Duration, finished, left, parallel int) *time.Time {
	if finished == 0 || left <= 0 || parallel <= 0 {
		return nil
	}
	waves := (left + parallel - 1) / parallel
	eta := now.Add(mean * time.Duration(waves)).Truncate(time.Second)
	return &eta
}
