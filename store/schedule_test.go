package store_test

import (
	"context"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// fakeAgent plays the agents' part in store-level scheduler tests: it
// reports every placed instance as running, and ends the ones it is asked to.
type fakeAgent struct {
	t  *testing.T
	db *store.DB
}

func (f fakeAgent) runAll() {
	f.t.Helper()
	nodes, _ := f.db.Nodes(context.Background())
	for _, n := range nodes {
		d, err := f.db.DesiredFor(context.Background(), n.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		var reports []gpuportal.WorkloadStatus
		for _, w := range d.Workloads {
			reports = append(reports, gpuportal.WorkloadStatus{InstanceID: w.InstanceID, Attempt: w.Attempt, State: gpuportal.WorkloadRunning})
		}
		if err := f.db.ApplyWorkloadReports(context.Background(), n.ID, reports); err != nil {
			f.t.Fatal(err)
		}
	}
}

// notStopping is what a node is asked to keep running: the workloads its
// desired state lists without Stop.
func notStopping(d gpuportal.AgentDesired) []gpuportal.DesiredWorkload {
	var out []gpuportal.DesiredWorkload
	for _, w := range d.Workloads {
		if !w.Stop {
			out = append(out, w)
		}
	}
	return out
}

// exit reports an instance's workload as ended (after SIGTERM).
func (f fakeAgent) exit(i *gpuportal.Instance) {
	f.t.Helper()
	code := 143
	err := f.db.ApplyWorkloadReports(context.Background(), i.Node, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadExited, ExitCode: &code, Signal: "SIGTERM", GPUsFree: true}})
	if err != nil {
		f.t.Fatal(err)
	}
}

var admin = &gpuportal.User{ID: 1, Role: gpuportal.RoleAdmin}

func tick(t *testing.T, db *store.DB, clock *gpuportal.ManualClock, at time.Time) store.TickResult {
	t.Helper()
	clock.Set(at)
	res, err := db.Tick(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func getInstance(t *testing.T, db *store.DB, id int64) *gpuportal.Instance {
	t.Helper()
	i, err := db.Instance(context.Background(), admin, id)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// Drives the manual clock through a day: reservations start and end on the
// hour with concrete GPUs; the spot instances in the way get their notice in
// time (the fewest of them, youngest first on ties); ticking twice changes
// nothing.
func TestSchedulerThroughADay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t) // Mon 2026-11-30 08:00 Shanghai
	// Under the fewest-instances rule (none of these workloads reports
	// checkpoints; TestCheckpointingInstanceIsTheVictim has the default).
	db.VictimRule = gpuportal.VictimsYoungest
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	t0 := storetest.Epoch

	// Spot instances: 4 GPUs (old), 2 GPUs (old), 2 GPUs (young), 1 GPU.
	var spots []int64
	for k, n := range []int{4, 2, 2, 1} {
		clock.Set(t0.Add(time.Duration(k) * time.Minute))
		inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: n, Command: "train"})
		if err != nil {
			t.Fatal(err)
		}
		tick(t, db, clock, clock.Now())
		agent.runAll()
		spots = append(spots, inst.ID)
	}
	for _, id := range spots {
		if i := getInstance(t, db, id); i.Status != gpuportal.InstanceRunning || len(i.GPUs) != i.Count {
			t.Fatalf("spot %d = %+v", id, i)
		}
	}
	// A 4-GPU spot instance runs on one node.
	if i := getInstance(t, db, spots[0]); i.Node == "" {
		t.Fatal("no node")
	}

	// Book 10 of 16 GPUs for 10:00–14:00: with 9 spot GPUs running, 3 must
	// go — fewest instances: the 4-GPU one alone.
	start := t0.Add(2 * time.Hour) // 10:00 Shanghai
	res, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 10, Start: start, End: start.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// Tick every minute until 10:00; no notice before the horizon.
	var noticed time.Time
	for at := clock.Now().Truncate(time.Minute).Add(time.Minute); !at.After(start); at = at.Add(time.Minute) {
		r := tick(t, db, clock, at)
		if again := tick(t, db, clock, at); again != (store.TickResult{}) {
			t.Fatalf("ticking twice at %s did %+v", at, again)
		}
		if r.Interrupted > 0 {
			noticed = at
			i := getInstance(t, db, spots[0])
			if i.Status != gpuportal.InstanceInterrupting || i.Interruption.Reason != gpuportal.ReasonReservation {
				t.Fatalf("the 4-GPU spot instance = %+v", i)
			}
			for _, id := range spots[1:] {
				if st := getInstance(t, db, id).Status; st != gpuportal.InstanceRunning {
					t.Fatalf("spot %d also interrupted (%s)", id, st)
				}
			}
			// The GPUs are free at the start: deadline + grace ≤ start.
			if i.Interruption.Deadline.Add(30 * time.Second).After(start) {
				t.Fatalf("deadline %s + grace is after the start %s", i.Interruption.Deadline, start)
			}
			agent.exit(i) // SIGTERM at the deadline
		}
		if at.Equal(start) {
			break
		}
	}
	if noticed.IsZero() || start.Sub(noticed) > 150*time.Second+time.Minute || start.Sub(noticed) < 150*time.Second {
		t.Fatalf("notice at %s for a %s start; want within a tick before start − notice − grace", noticed, start)
	}
	r, _ := db.Reservation(ctx, admin, res.ID)
	if r.Status != gpuportal.ReservationActive {
		t.Fatalf("at 10:00 the reservation is %s", r.Status)
	}
	got, _ := db.ReservationGPUs(ctx, res.ID)
	if len(got) != 10 {
		t.Fatalf("reservation has %d GPUs", len(got))
	}
	if i := getInstance(t, db, spots[0]); i.Status != gpuportal.InstanceInterrupted || i.Cost <= 0 {
		t.Fatalf("interrupted instance = %+v", i)
	}
	// The running spot instances' GPUs and the reservation's never overlap.
	held := map[string]bool{}
	for _, g := range got {
		held[g] = true
	}
	for _, id := range spots[1:] {
		for _, g := range getInstance(t, db, id).GPUs {
			if held[g] {
				t.Fatalf("GPU %s is both reserved and running spot %d", g, id)
			}
		}
	}
	// 14:00: completed, GPUs released.
	for at := start.Add(time.Minute); !at.After(start.Add(4 * time.Hour)); at = at.Add(time.Minute) {
		tick(t, db, clock, at)
	}
	r, _ = db.Reservation(ctx, admin, res.ID)
	if got, _ := db.ReservationGPUs(ctx, res.ID); r.Status != gpuportal.ReservationCompleted || len(got) != 0 {
		t.Fatalf("at 14:00: %s with %d GPUs", r.Status, len(got))
	}
}

// A reservation of 8 GPUs lands on one node when any node can hold it.
func TestReservationPackedOnOneNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 3, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	// A 3-GPU on-demand instance takes part of one node first.
	od, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 3, Command: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	start := storetest.Epoch.Add(2 * time.Hour)
	r8, _ := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start, End: start.Add(4 * time.Hour)})
	r3, _ := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 5, Start: start, End: start.Add(4 * time.Hour)})
	tick(t, db, clock, start)
	nodesOf := func(id int64) map[string]int {
		gpus, _ := db.ReservationGPUs(ctx, id)
		nodes, _ := db.Nodes(ctx)
		out := map[string]int{}
		for _, g := range gpus {
			for _, n := range nodes {
				for _, ng := range n.GPUs {
					if ng.UUID == g {
						out[n.ID]++
					}
				}
			}
		}
		return out
	}
	if n := nodesOf(r8.ID); len(n) != 1 {
		t.Fatalf("8 GPUs over nodes %v", n)
	}
	if n := nodesOf(r3.ID); len(n) != 1 {
		t.Fatalf("5 GPUs over nodes %v (a node with 5 free exists)", n)
	}
	if i := getInstance(t, db, od.ID); len(i.GPUs) != 3 {
		t.Fatalf("on-demand = %+v", i)
	}
}

// Reserved instances run on their reservation's GPUs, only while it is
// active, and stop with it.
func TestReservedInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "h100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Add(2 * time.Hour)
	res, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "h100-80g", Region: "cd-1", Count: 4, Start: start, End: start.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	req := gpuportal.LaunchRequest{Kind: gpuportal.KindReserved, Count: 4, Command: "train", ReservationID: &res.ID}
	if _, err := db.Launch(ctx, u, req); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("launch before the start: %v", err)
	}
	tick(t, db, clock, start)
	if _, err := db.Launch(ctx, other, req); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Fatalf("another user launching into the reservation: %v", err)
	}
	big := req
	big.Count = 5
	if _, err := db.Launch(ctx, u, big); err == nil {
		t.Fatal("5 GPUs on a 4-GPU reservation")
	}
	inst, err := db.Launch(ctx, u, req)
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start.Add(time.Minute))
	fakeAgent{t, db}.runAll()
	i := getInstance(t, db, inst.ID)
	gpus, _ := db.ReservationGPUs(ctx, res.ID)
	if i.Status != gpuportal.InstanceRunning || len(i.GPUs) != 4 || i.PricePerGPU != 0 {
		t.Fatalf("reserved instance = %+v", i)
	}
	for _, g := range i.GPUs {
		found := false
		for _, rg := range gpus {
			found = found || rg == g
		}
		if !found {
			t.Fatalf("instance GPU %s is not the reservation's", g)
		}
	}
	// (issue 22, item 18) Half an hour before the end its metadata says
	// "stop" at the end, as EC2 says for a Capacity Block; not before.
	clock.Set(start.Add(3*time.Hour + 20*time.Minute))
	if d, _ := db.DesiredFor(ctx, i.Node); d.Workloads[0].Interrupt != nil {
		t.Fatalf("stop notice 40 min before the end: %+v", d.Workloads[0].Interrupt)
	}
	clock.Set(start.Add(3*time.Hour + 30*time.Minute))
	if d, _ := db.DesiredFor(ctx, i.Node); d.Workloads[0].Interrupt == nil || d.Workloads[0].Interrupt.Action != "stop" ||
		d.Workloads[0].Interrupt.DeadlineInSeconds != 1800 || d.Workloads[0].Interrupt.Reason != gpuportal.ReasonReservationEnd {
		t.Fatalf("no stop notice 30 min before the end: %+v", d.Workloads[0].Interrupt)
	}
	// The reservation ends: the instance is asked to stop (listed with
	// Stop until its exit is reported).
	tick(t, db, clock, start.Add(4*time.Hour))
	d, _ := db.DesiredFor(ctx, i.Node)
	if len(d.Workloads) != 1 || len(notStopping(d)) != 0 {
		t.Fatalf("desired after the reservation ended: %+v", d.Workloads)
	}
}

// The simulator's kick tick after GPUs free runs only when something in
// their pools could take them: an unplaced instance, or a job's queued
// task with room under its parallel limit.
func TestWaitsForGPUsLooksAtTheFreedPools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	a100 := storetest.AddFleet(t, db, "a", "cd-1", "a100-80g", 1, 8)[0].GPUs[:1]
	h100 := storetest.AddFleet(t, db, "h", "cd-1", "h100-80g", 1, 8)[0].GPUs[:1]
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	waits := func(gpus []gpuportal.GPU) bool {
		t.Helper()
		var freed []string
		for _, g := range gpus {
			freed = append(freed, g.UUID)
		}
		got, err := db.WaitsForGPUs(ctx, freed)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if waits(nil) || waits(a100) || waits(h100) {
		t.Fatal("something waits on an idle fleet")
	}

	// A job that may run one task at a time: its queued tasks wait only
	// once the running one has ended.
	j := mustJob(t, db, u, gpuportal.JobRequest{Model: "h100-80g", Region: "cd-1", GPUsPerTask: 8, Tasks: 3, Command: "x", MaxParallel: 1})
	tick(t, db, clock, storetest.Epoch)
	agent.runAll()
	running := runningTasks(t, db, u, j.ID)
	if len(running) != 1 {
		t.Fatalf("%d tasks run", len(running))
	}
	if waits(h100) {
		t.Fatal("queued tasks of a job at its parallel limit wait")
	}
	agent.exit(running[0])
	if !waits(h100) {
		t.Fatal("the job's next task does not wait for its GPUs")
	}
	if waits(a100) {
		t.Fatal("the H100 job waits for A100 GPUs")
	}

	// Two spot instances of a whole node: the second waits, for A100s only.
	spot := gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 8, Command: "x"}
	for range 2 {
		if _, err := db.Launch(ctx, u, spot); err != nil {
			t.Fatal(err)
		}
	}
	tick(t, db, clock, storetest.Epoch.Add(time.Minute))
	agent.runAll()
	if !waits(a100) {
		t.Fatal("the unplaced spot instance does not wait")
	}
}

// Several nodes' reports in one transaction do what each node's would.
func TestApplyReportsOfNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	var launched []*gpuportal.Instance
	for range 2 {
		i, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 8, Command: "x"})
		if err != nil {
			t.Fatal(err)
		}
		launched = append(launched, i)
	}
	tick(t, db, clock, storetest.Epoch)
	before, err := db.NodeRevisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var batch []store.NodeReports
	for _, i := range launched {
		i = getInstance(t, db, i.ID)
		batch = append(batch, store.NodeReports{Node: i.Node, Reports: []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadRunning}}})
	}
	if batch[0].Node == batch[1].Node {
		t.Fatalf("both on %s", batch[0].Node)
	}
	if err := db.ApplyReportsOfNodes(ctx, batch); err != nil {
		t.Fatal(err)
	}
	after, _ := db.NodeRevisions(ctx)
	for _, i := range launched {
		if got := getInstance(t, db, i.ID); got.Status != gpuportal.InstanceRunning {
			t.Errorf("instance %d is %s", i.ID, got.Status)
		}
	}
	if before["n-1"] != after["n-1"] || before["n-2"] != after["n-2"] {
		t.Errorf("starts moved the nodes' desired states: %v → %v", before, after)
	}
	code := 0
	batch = batch[:1]
	batch[0].Reports = []gpuportal.WorkloadStatus{{InstanceID: launched[0].ID, Attempt: batch[0].Reports[0].Attempt, State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true}}
	if err := db.ApplyReportsOfNodes(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if got := getInstance(t, db, launched[0].ID); got.Status != gpuportal.InstanceStopped {
		t.Errorf("the instance that exited 0 is %s", got.Status)
	}
	if moved, _ := db.NodeRevisions(ctx); moved[batch[0].Node] == after[batch[0].Node] {
		t.Error("an end did not move its node's desired state")
	}
}
