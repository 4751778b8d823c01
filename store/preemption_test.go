package store_test

import (
	"context"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 26) Of two spot instances in the way of a booking, the older one
// that just reported a checkpoint is interrupted and the younger silent
// one keeps running; the old one reports ready, is stopped before its
// deadline and billed to that minute, and its interruption records the
// few GPU-seconds it lost.
func TestCheckpointingInstanceIsTheVictim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 4)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	t0 := storetest.Epoch
	var ids []int64
	for k := range 2 {
		clock.Set(t0.Add(time.Duration(k) * time.Hour))
		inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "train"})
		if err != nil {
			t.Fatal(err)
		}
		tick(t, db, clock, clock.Now())
		agent.runAll()
		ids = append(ids, inst.ID)
	}
	old, young := getInstance(t, db, ids[0]), getInstance(t, db, ids[1])
	// The old one reports a checkpoint at 09:55 Shanghai (agent clock).
	at := t0.Add(115 * time.Minute)
	clock.Set(at)
	report := func(i *gpuportal.Instance, st gpuportal.WorkloadStatus) {
		t.Helper()
		st.InstanceID, st.Attempt = i.ID, i.Attempt
		if st.State == "" {
			st.State = gpuportal.WorkloadRunning
		}
		if err := db.ApplyWorkloadReports(ctx, i.Node, []gpuportal.WorkloadStatus{st}); err != nil {
			t.Fatal(err)
		}
	}
	agentTime := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) // the agent's own clock is its own
	report(old, gpuportal.WorkloadStatus{CheckpointAt: &agentTime})
	report(old, gpuportal.WorkloadStatus{CheckpointAt: &agentTime}) // repeated by a heartbeat: applied once
	if got := getInstance(t, db, old.ID); got.LastCheckpoint == nil || !got.LastCheckpoint.Equal(at) {
		t.Fatalf("last checkpoint = %v; want the business time it arrived, %s", got.LastCheckpoint, at)
	}
	clock.Set(at.Add(time.Minute))
	report(old, gpuportal.WorkloadStatus{CheckpointAt: &agentTime})
	if got := getInstance(t, db, old.ID); !got.LastCheckpoint.Equal(at) || *got.WorkSinceCheckpoint != 2*60 {
		t.Fatalf("a repeated report moved the checkpoint: %v, work since %d", got.LastCheckpoint, *got.WorkSinceCheckpoint)
	}
	// A booking of 2 GPUs at 10:00 needs one of them back.
	start := t0.Add(2 * time.Hour)
	if _, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var noticed time.Time
	for m := clock.Now().Truncate(time.Minute).Add(time.Minute); noticed.IsZero() && m.Before(start); m = m.Add(time.Minute) {
		if tick(t, db, clock, m).Interrupted > 0 {
			noticed = m
		}
	}
	if got := getInstance(t, db, old.ID); got.Status != gpuportal.InstanceInterrupting {
		t.Fatalf("the checkpointing old instance is %s; want interrupting", got.Status)
	}
	if got := getInstance(t, db, young.ID); got.Status != gpuportal.InstanceRunning {
		t.Fatalf("the young silent instance is %s; want running", got.Status)
	}
	// Ten seconds into its notice it reports ready (saved) and the agent
	// stops it: billed to that minute, not to the deadline.
	stop := noticed.Add(10 * time.Second)
	clock.Set(stop)
	ready := agentTime.Add(time.Hour)
	code := 143
	report(old, gpuportal.WorkloadStatus{State: gpuportal.WorkloadExited, CheckpointAt: &ready, ReadyAt: &ready, ExitCode: &code, Signal: "SIGTERM", GPUsFree: true})
	got := getInstance(t, db, old.ID)
	if got.Status != gpuportal.InstanceInterrupted || got.ReadyAt == nil || got.EndedAt == nil || !got.EndedAt.Equal(stop) {
		t.Fatalf("after ready: %+v", got)
	}
	if !got.EndedAt.Before(got.Interruption.Deadline) {
		t.Errorf("stopped at %s, not before its deadline %s", got.EndedAt, got.Interruption.Deadline)
	}
	if got.Lost == nil || *got.Lost != 0 {
		t.Errorf("lost %v GPU-seconds; ready is a checkpoint, so nothing", got.Lost)
	}
	minutes := int(stop.Sub(t0) / time.Minute) // started at t0, interrupted: the minute of the stop is not billed
	if want := gpuportal.RunCost(old.PricePerGPU, 2, minutes); got.Cost != want {
		t.Errorf("cost %s; want %s (%d minutes)", got.Cost, want, minutes)
	}
	// The young one, which never reported, is interrupted by an admin and
	// ends at its deadline: it loses its whole run.
	y, err := db.AdminInterrupt(ctx, admin, young.ID)
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(y.Interruption.Deadline)
	report(young, gpuportal.WorkloadStatus{State: gpuportal.WorkloadExited, ExitCode: &code, Signal: "SIGTERM", GPUsFree: true})
	gotYoung := getInstance(t, db, young.ID)
	want := int64(2 * y.Interruption.Deadline.Sub(*young.StartedAt) / time.Second)
	if gotYoung.Lost == nil || *gotYoung.Lost != want {
		t.Fatalf("the silent instance lost %v GPU-seconds; want %d", gotYoung.Lost, want)
	}
	rates, err := db.Rates(ctx, "a100-80g", "cd-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if tr := rates.Trailing; tr.MeasuredInterrupted != 2 || tr.ShareLostUnder5Min != 0.5 || tr.LostGPUHours != float64(want)/3600 {
		t.Errorf("rates: %+v; want 2 measured, half under 5 minutes, %.3f GPU-hours lost", tr, float64(want)/3600)
	}
}

// A spot launch may ask for its own notice within the policy's bounds;
// its interruption then gives exactly that.
func TestNoticePerLaunch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 4)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	ask := func(kind gpuportal.InstanceKind, n int) error {
		_, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: kind, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x", NoticeSeconds: &n})
		return err
	}
	if err := ask(gpuportal.KindSpot, 5); gpuportal.ErrorCode(err) != gpuportal.EPOLICY || gpuportal.ErrorField(err) != "notice_seconds" {
		t.Errorf("5 s under the 10 s minimum: %v", err)
	}
	if err := ask(gpuportal.KindSpot, 601); gpuportal.ErrorCode(err) != gpuportal.EPOLICY {
		t.Errorf("601 s over the 600 s maximum: %v", err)
	}
	if err := ask(gpuportal.KindOnDemand, 60); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Errorf("on-demand with a notice: %v", err)
	}
	n := 300
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 4, Command: "x", NoticeSeconds: &n})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	fakeAgent{t, db}.runAll()
	start := storetest.Epoch.Add(2 * time.Hour)
	if _, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 4, Start: start, End: start.Add(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// With the policy's 120 s notice it would come 3.5 min before; with
	// 300 s asked for it comes 6.5 min before the start.
	tick(t, db, clock, start.Add(-6*time.Minute-30*time.Second))
	got := getInstance(t, db, inst.ID)
	if got.Status != gpuportal.InstanceInterrupting || got.Interruption.Deadline.Sub(got.Interruption.NoticeAt) != 300*time.Second {
		t.Fatalf("interruption = %s %+v; want a 300 s notice now", got.Status, got.Interruption)
	}
}

// Drills: only on the owner's running spot instance, once an hour; the
// notice goes to the agent as a drill (never signalled).
func TestDrillRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 4)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	spot, _ := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x"})
	od, _ := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x"})
	if _, err := db.Drill(ctx, u, spot.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("drill before it runs: %v", err)
	}
	tick(t, db, clock, clock.Now())
	fakeAgent{t, db}.runAll()
	if _, err := db.Drill(ctx, u, od.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("drill on on-demand: %v", err)
	}
	if _, err := db.Drill(ctx, other, spot.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("another customer's drill: %v", err)
	}
	got, err := db.Drill(ctx, u, spot.ID)
	if err != nil || got.Drill == nil || got.Drill.Result != gpuportal.DrillRunning || got.Drill.Seconds != 120 {
		t.Fatalf("drill = %+v, %v", got.Drill, err)
	}
	d, _ := db.DesiredFor(ctx, got.Node)
	var in *gpuportal.Interruption
	for _, w := range d.Workloads {
		if w.InstanceID == spot.ID {
			in = w.Interrupt
		}
	}
	if in == nil || !in.Drill || in.Reason != gpuportal.ReasonDrill || in.DrillID == 0 {
		t.Fatalf("the agent is told %+v; want a drill notice", in)
	}
	if _, err := db.Drill(ctx, u, spot.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("a second drill while one runs: %v", err)
	}
	// The agent reports ready 7 s in: the drill is over, the instance runs.
	after := 7.0
	i := getInstance(t, db, spot.ID)
	if err := db.ApplyWorkloadReports(ctx, i.Node, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadRunning,
		DrillID: in.DrillID, DrillReadyAfterSeconds: &after}}); err != nil {
		t.Fatal(err)
	}
	if i := getInstance(t, db, spot.ID); i.Status != gpuportal.InstanceRunning || i.Drill.Result != gpuportal.DrillReady || *i.Drill.ReadyAfterSeconds != 7 {
		t.Fatalf("after ready: %s %+v", i.Status, i.Drill)
	}
	if _, err := db.Drill(ctx, u, spot.ID); gpuportal.ErrorCode(err) != gpuportal.ERATELIMITED {
		t.Errorf("a drill within the hour: %v", err)
	}
	rates, _ := db.Rates(ctx, "a100-80g", "cd-1", 1)
	if rates.Trailing.Interrupted != 0 {
		t.Errorf("the drill counts in the rates: %+v", rates.Trailing)
	}
}
