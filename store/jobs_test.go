package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// finish reports an instance's workload as exited with code.
func (f fakeAgent) finish(i *gpuportal.Instance, code int) {
	f.t.Helper()
	err := f.db.ApplyWorkloadReports(context.Background(), i.Node, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true}})
	if err != nil {
		f.t.Fatal(err)
	}
}

// runningTasks lists the job's live attempts (placed instances).
func runningTasks(t *testing.T, db *store.DB, u *gpuportal.User, jobID int64) []*gpuportal.Instance {
	t.Helper()
	tasks, _, err := db.JobTasks(context.Background(), u, jobID, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*gpuportal.Instance
	for _, task := range tasks {
		if task.Status == gpuportal.TaskRunning {
			out = append(out, getInstance(t, db, *task.InstanceID))
		}
	}
	return out
}

func mustJob(t *testing.T, db *store.DB, u *gpuportal.User, req gpuportal.JobRequest) *gpuportal.Job {
	t.Helper()
	j, err := db.CreateJob(context.Background(), u, req)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func jobNow(t *testing.T, db *store.DB, u *gpuportal.User, id int64) *gpuportal.Job {
	t.Helper()
	j, err := db.Job(context.Background(), u, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// Tasks start up to max_parallel with their own index and checkpoint
// key; exit 0 marks a task succeeded once; a non-zero exit is retried and
// fails the task after max_attempts; the job then ends failed (the others
// still run to the end) and its owner is told which tasks failed.
func TestJobRetriesThenFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	j := mustJob(t, db, u, gpuportal.JobRequest{Name: "render", Model: "a100-80g", Region: "cd-1", GPUsPerTask: 2, Tasks: 5, Command: "render.sh", MaxParallel: 3, MaxAttempts: 2})
	if j.Status != gpuportal.JobQueued || j.Tasks.Total != 5 || j.Tasks.Queued != 5 {
		t.Fatalf("new job: %+v", j)
	}
	at := storetest.Epoch
	tick(t, db, clock, at)
	run := runningTasks(t, db, u, j.ID)
	if len(run) != 3 {
		t.Fatalf("%d tasks running; want max_parallel 3", len(run))
	}
	d, _ := db.DesiredFor(ctx, run[0].Node)
	if w := d.Workloads[0]; w.Task == nil || w.Task.JobID != j.ID || w.Task.Count != 5 || w.CheckpointKey != fmt.Sprintf("job-%d-task-%d", j.ID, w.Task.Index) {
		t.Fatalf("desired workload: %+v", w)
	}
	agent.runAll()
	if got := jobNow(t, db, u, j.ID); got.Status != gpuportal.JobRunning || got.Tasks.Running != 3 || got.Tasks.Queued != 2 {
		t.Fatalf("running job: %+v", got.Tasks)
	}
	// Task 0 fails twice (out of attempts), the others succeed.
	for round := 0; round < 6; round++ {
		at = at.Add(10 * time.Minute)
		clock.Set(at)
		for _, i := range runningTasks(t, db, u, j.ID) {
			if *i.TaskIndex == 0 {
				agent.finish(i, 1)
			} else {
				agent.finish(i, 0)
			}
		}
		tick(t, db, clock, at)
		agent.runAll()
	}
	got := jobNow(t, db, u, j.ID)
	if got.Status != gpuportal.JobFailed || got.Tasks.Succeeded != 4 || got.Tasks.Failed != 1 || got.EndedAt == nil {
		t.Fatalf("job at the end: %s %+v", got.Status, got.Tasks)
	}
	tasks, _, _ := db.JobTasks(ctx, u, j.ID, 1000, 0)
	if tasks[0].Status != gpuportal.TaskFailed || tasks[0].Attempts != 2 || tasks[0].Failures != 2 || *tasks[0].ExitCode != 1 {
		t.Errorf("task 0: %+v", tasks[0])
	}
	for _, task := range tasks[1:] {
		if task.Status != gpuportal.TaskSucceeded || task.Attempts != 1 {
			t.Errorf("task %d: %+v", task.Index, task)
		}
	}
	attempts, _ := db.TaskAttempts(ctx, u, j.ID, 0)
	if len(attempts) != 2 || attempts[0].CheckpointKey != attempts[1].CheckpointKey || attempts[1].Status != gpuportal.InstanceFailed {
		t.Errorf("task 0's attempts: %+v", attempts)
	}
	if got.Cost <= 0 || got.OnDemandCost <= got.Cost {
		t.Errorf("cost %d, on-demand %d", got.Cost, got.OnDemandCost)
	}
	notes, _ := db.InApp(ctx, u.ID, 10)
	found := false
	for _, n := range notes {
		if n.Kind == gpuportal.NoteJobFailed && n.Params.JobID == j.ID && len(n.Params.Tasks) == 1 && n.Params.Tasks[0] == 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no job-failed notification naming task 0: %+v", notes)
	}
	// Nothing more starts for a finished job.
	if res := tick(t, db, clock, at.Add(time.Minute)); res.TasksStarted != 0 {
		t.Errorf("a finished job started %d tasks", res.TasksStarted)
	}
}

// An interrupted task goes back to the queue without counting as a failed
// attempt, and starts again (same checkpoint key) when GPUs free up.
func TestInterruptedTaskIsQueuedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	j := mustJob(t, db, u, gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 8, Tasks: 1, Command: "x", MaxParallel: 1, MaxAttempts: 1})
	at := storetest.Epoch
	tick(t, db, clock, at)
	agent.runAll()
	first := runningTasks(t, db, u, j.ID)[0]
	if _, err := db.AdminInterrupt(ctx, admin, first.ID); err != nil {
		t.Fatal(err)
	}
	agent.exit(getInstance(t, db, first.ID))
	tasks, _, _ := db.JobTasks(ctx, u, j.ID, 1000, 0)
	if tasks[0].Status != gpuportal.TaskQueued || tasks[0].Failures != 0 || tasks[0].Interruptions != 1 {
		t.Fatalf("after the interruption: %+v", tasks[0])
	}
	tick(t, db, clock, at.Add(time.Minute))
	agent.runAll()
	second := runningTasks(t, db, u, j.ID)
	if len(second) != 1 || second[0].ID == first.ID || second[0].CheckpointKey != first.CheckpointKey {
		t.Fatalf("restart: %+v", second)
	}
	agent.finish(second[0], 0)
	got := jobNow(t, db, u, j.ID)
	if got.Status != gpuportal.JobSucceeded || got.Interruptions != 1 {
		t.Fatalf("job: %s, %d interruptions", got.Status, got.Interruptions)
	}
}

// Cancelling stops what runs (the normal stop) and queues nothing more.
func TestCancelJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	j := mustJob(t, db, u, gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 10, Command: "x", MaxParallel: 4})
	tick(t, db, clock, storetest.Epoch)
	agent.runAll()
	if _, err := db.CancelJob(ctx, other, j.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("another customer cancels: %v", err)
	}
	if _, err := db.Job(ctx, other, j.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("another customer reads: %v", err)
	}
	got, err := db.CancelJob(ctx, u, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != gpuportal.JobCancelled || got.Tasks.Cancelled != 6 || got.Tasks.Running != 4 {
		t.Fatalf("just cancelled: %s %+v", got.Status, got.Tasks)
	}
	for _, n := range []string{"n-1"} {
		d, _ := db.DesiredFor(ctx, n)
		if len(notStopping(d)) != 0 {
			t.Fatalf("the node still runs %d of its tasks", len(notStopping(d)))
		}
	}
	for _, i := range runningTasks(t, db, u, j.ID) {
		agent.exit(i)
	}
	if res := tick(t, db, clock, storetest.Epoch.Add(time.Minute)); res.TasksStarted != 0 {
		t.Fatalf("a cancelled job started %d tasks", res.TasksStarted)
	}
	got = jobNow(t, db, u, j.ID)
	if got.Tasks.Cancelled != 10 || got.EndedAt == nil {
		t.Fatalf("after the stop: %+v", got.Tasks)
	}
}

// A hybrid job's on-demand workers are never interrupted: a reservation
// takes its spot workers' GPUs and leaves the on-demand ones running.
func TestHybridJobKeepsItsOnDemandWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t) // 08:00
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	j := mustJob(t, db, u, gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 2, Tasks: 8, Command: "x", MaxParallel: 4, Kind: gpuportal.JobHybrid, OnDemandWorkers: 1})
	at := storetest.Epoch
	tick(t, db, clock, at)
	agent.runAll()
	run := runningTasks(t, db, u, j.ID)
	kinds := map[gpuportal.InstanceKind]int{}
	for _, i := range run {
		kinds[i.Kind]++
	}
	if kinds[gpuportal.KindOnDemand] != 1 || kinds[gpuportal.KindSpot] != 3 {
		t.Fatalf("workers by kind: %v", kinds)
	}
	// Someone books 6 GPUs from 10:00: the on-demand worker keeps its 2.
	start := at.Truncate(time.Hour).Add(2 * time.Hour)
	if _, err := db.Book(ctx, storetest.MustCreateUser(t, db, "b@example.com", gpuportal.RoleCustomer), gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 6, Start: start, End: start.Add(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start.Add(-time.Minute))
	for _, i := range run {
		got := getInstance(t, db, i.ID)
		if i.Kind == gpuportal.KindOnDemand && got.Status != gpuportal.InstanceRunning {
			t.Errorf("on-demand worker %s", got.Status)
		}
		if i.Kind == gpuportal.KindSpot && got.Status != gpuportal.InstanceInterrupting {
			t.Errorf("spot worker %s", got.Status)
		}
		if got.Status == gpuportal.InstanceInterrupting {
			agent.exit(got)
		}
	}
	tick(t, db, clock, start)
	agent.runAll()
	got := jobNow(t, db, u, j.ID)
	if got.Interruptions != 3 || got.Tasks.Running != 1 {
		t.Fatalf("during the reservation: %d interruptions, %+v", got.Interruptions, got.Tasks)
	}
}

// Two customers' jobs and a plain spot launch all get GPUs: the second
// job's tasks go first as GPUs free up (its owner has fewer), and the
// plain launch takes its GPUs from job tasks, which queue again.
func TestJobsShareTheFleet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	a := storetest.MustCreateUser(t, db, "a@example.com", gpuportal.RoleCustomer)
	b := storetest.MustCreateUser(t, db, "b@example.com", gpuportal.RoleCustomer)
	c := storetest.MustCreateUser(t, db, "c@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	ja := mustJob(t, db, a, gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 100, Command: "x", MaxParallel: 100})
	at := storetest.Epoch
	tick(t, db, clock, at)
	agent.runAll()
	if n := len(runningTasks(t, db, a, ja.ID)); n != 8 {
		t.Fatalf("job A runs %d tasks on 8 GPUs", n)
	}
	jb := mustJob(t, db, b, gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 100, Command: "x", MaxParallel: 100})
	// Two of A's tasks end: both GPUs go to B, whose owner has none.
	for _, i := range runningTasks(t, db, a, ja.ID)[:2] {
		agent.finish(i, 0)
	}
	at = at.Add(time.Minute)
	tick(t, db, clock, at)
	agent.runAll()
	if nb := len(runningTasks(t, db, b, jb.ID)); nb != 2 {
		t.Fatalf("job B runs %d tasks; want the 2 freed GPUs", nb)
	}
	// A plain spot launch of 2 GPUs: accepted, the youngest job tasks get
	// notice, and it runs once they have left.
	inst, err := db.Launch(ctx, c, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "y"})
	if err != nil {
		t.Fatalf("plain spot launch next to jobs: %v", err)
	}
	at = at.Add(time.Minute)
	tick(t, db, clock, at)
	var noticed int
	for _, j := range []struct {
		u  *gpuportal.User
		id int64
	}{{a, ja.ID}, {b, jb.ID}} {
		tasks, _, _ := db.JobTasks(ctx, j.u, j.id, 1000, 0)
		for _, task := range tasks {
			if task.InstanceID == nil || task.Status != gpuportal.TaskRunning {
				continue
			}
			if i := getInstance(t, db, *task.InstanceID); i.Status == gpuportal.InstanceInterrupting {
				if i.Interruption.Reason != gpuportal.ReasonFairShare {
					t.Errorf("reason %q", i.Interruption.Reason)
				}
				noticed++
				agent.exit(i)
			}
		}
	}
	if noticed != 2 {
		t.Fatalf("%d job tasks got notice; want 2", noticed)
	}
	at = at.Add(time.Minute)
	tick(t, db, clock, at)
	if got := getInstance(t, db, inst.ID); got.Node == "" {
		t.Fatalf("the plain spot instance did not get the freed GPUs: %+v", got)
	}
	// The job tasks did not take them back.
	agent.runAll()
	if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceRunning {
		t.Fatalf("plain spot instance %s", got.Status)
	}
}

// Bad job requests are refused with the field at fault and create nothing.
func TestBadJobRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	ok := gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 4, Command: "x", MaxParallel: 2}
	for name, tc := range map[string]struct {
		mut   func(*gpuportal.JobRequest)
		field string
	}{
		"no tasks":          {func(r *gpuportal.JobRequest) { r.Tasks = 0 }, "tasks"},
		"a billion tasks":   {func(r *gpuportal.JobRequest) { r.Tasks = 1e9 }, "tasks"},
		"max_parallel 0":    {func(r *gpuportal.JobRequest) { r.MaxParallel = 0 }, "max_parallel"},
		"9 GPUs a task":     {func(r *gpuportal.JobRequest) { r.GPUsPerTask = 9 }, "gpus_per_task"},
		"no command":        {func(r *gpuportal.JobRequest) { r.Command = " " }, "command"},
		"unknown kind":      {func(r *gpuportal.JobRequest) { r.Kind = "reserved" }, "kind"},
		"spot with workers": {func(r *gpuportal.JobRequest) { r.OnDemandWorkers = 1 }, "on_demand_workers"},
		"hybrid without":    {func(r *gpuportal.JobRequest) { r.Kind = gpuportal.JobHybrid }, "on_demand_workers"},
		"11 attempts":       {func(r *gpuportal.JobRequest) { r.MaxAttempts = 11 }, "max_attempts"},
		"unknown model":     {func(r *gpuportal.JobRequest) { r.Model = "v100" }, "model"},
		"unknown image":     {func(r *gpuportal.JobRequest) { r.Image = "nope" }, "image"},
	} {
		req := ok
		tc.mut(&req)
		_, err := db.CreateJob(ctx, u, req)
		var e *gpuportal.Error
		if err == nil || !errors.As(err, &e) || e.Field != tc.field {
			t.Errorf("%s: %v; want an error on %s", name, err, tc.field)
		}
	}
	if jobs, _ := db.Jobs(ctx, u, 10, 0); len(jobs) != 0 {
		t.Fatalf("bad requests created %d jobs", len(jobs))
	}
}

// Concurrent submissions and ticks keep every task's state consistent.
func TestJobsUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := db.CreateJob(ctx, u, gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 20, Command: "x", MaxParallel: 20}); err != nil {
				t.Error(err)
			}
			if _, err := db.Tick(ctx, clock.Now()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	jobs, _ := db.Jobs(ctx, u, 100, 0)
	running := 0
	for _, j := range jobs {
		running += j.Tasks.Running
		if j.Tasks.Total != 20 || j.Tasks.Queued+j.Tasks.Running != 20 {
			t.Errorf("job %d: %+v", j.ID, j.Tasks)
		}
	}
	if running != 16 {
		t.Fatalf("%d tasks running on 16 GPUs", running)
	}
}
