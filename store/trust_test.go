package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 22, item 2) The portal heals by itself: a running instance that
// its node's heartbeats stop reporting (its agent lost it) is ended after
// gpuportal.LostAfterHeartbeats of them, billed up to the first heartbeat
// that missed it; its GPUs are out of service until the node shows them
// idle. One missed heartbeat (a race) changes nothing.
func TestInstanceItsNodeStopsReportingIsEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	nodes := storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "train"})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	fakeAgent{t, db}.runAll()
	inst = getInstance(t, db, inst.ID)
	if inst.Status != gpuportal.InstanceRunning {
		t.Fatalf("instance is %s", inst.Status)
	}
	wall := storetest.Epoch
	heartbeat := func(reported bool, memoryUsed int) {
		t.Helper()
		wall = wall.Add(10 * time.Second)
		hb := gpuportal.AgentHeartbeat{HeartbeatSeconds: 10}
		for _, g := range nodes[0].GPUs {
			s := gpuportal.GPUSample{UUID: g.UUID, Healthy: true}
			for _, ig := range inst.GPUs {
				if ig == g.UUID {
					s.MemoryUsedMiB = memoryUsed
				}
			}
			hb.GPUs = append(hb.GPUs, s)
		}
		if reported {
			hb.Workloads = []gpuportal.WorkloadStatus{{InstanceID: inst.ID, Attempt: inst.Attempt, State: gpuportal.WorkloadRunning}}
		}
		if _, err := db.RecordHeartbeat(ctx, nodes[0].ID, hb, wall); err != nil {
			t.Fatal(err)
		}
	}
	started := *inst.StartedAt
	clock.Set(started.Add(3 * time.Minute))
	heartbeat(true, 30000)
	heartbeat(false, 30000) // one miss, then reported again: a race, not a loss
	heartbeat(true, 30000)
	for range gpuportal.LostAfterHeartbeats - 1 {
		heartbeat(false, 30000)
	}
	if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceRunning {
		t.Fatalf("ended after %d misses: %s", gpuportal.LostAfterHeartbeats-1, got.Status)
	}
	lostAt := clock.Now() // the first miss of the run that counts
	clock.Set(lostAt.Add(20 * time.Minute))
	heartbeat(false, 30000)
	got := getInstance(t, db, inst.ID)
	if got.Status != gpuportal.InstanceFailed || got.Error != gpuportal.LostWorkloadError || len(got.GPUs) != 0 {
		t.Fatalf("lost instance = %s %q, GPUs %v", got.Status, got.Error, got.GPUs)
	}
	want := gpuportal.RunCost(inst.PricePerGPU, inst.Count, 3) // billed to the first miss, not to now
	if got.Cost != want {
		t.Fatalf("lost instance cost %s, want %s (3 minutes)", got.Cost, want)
	}
	clock.Set(clock.Now().Add(time.Hour))
	if later := getInstance(t, db, inst.ID); later.Cost != want {
		t.Fatalf("billed after it ended: %s", later.Cost)
	}
	healthy := func() int {
		ns, _ := db.Nodes(ctx)
		n := 0
		for _, g := range ns[0].GPUs {
			if g.Healthy {
				n++
			}
		}
		return n
	}
	if n := healthy(); n != 6 {
		t.Fatalf("%d GPUs in service while the lost workload's memory is still on its two", n)
	}
	heartbeat(false, 0) // NVML shows them idle
	if n := healthy(); n != 8 {
		t.Fatalf("%d GPUs in service after they showed idle", n)
	}
}

// (issue 22, item 3) A hybrid job's on-demand workers leave every booked
// hour ahead, as a direct on-demand launch does: with the node booked
// whole three days out, the workers run spot (and give way), so the
// booking gets all its GPUs; a refund for GPUs that are truly missing
// says why, not "node failure".
func TestHybridOnDemandWorkersLeaveTheWholeBook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	booker := storetest.MustCreateUser(t, db, "b@example.com", gpuportal.RoleCustomer)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	start := clock.Now().Truncate(time.Hour).Add(72 * time.Hour)
	res, err := db.Book(ctx, booker, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start, End: start.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x"}); gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		t.Fatalf("a direct on-demand launch beside the full booking: %v", err)
	}
	if _, err := db.CreateJob(ctx, u, gpuportal.JobRequest{Name: "h", Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 4, Command: "x",
		MaxParallel: 4, Kind: gpuportal.JobHybrid, OnDemandWorkers: 4}); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	list, err := db.InstanceList(ctx, u, store.InstanceFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 4 {
		t.Fatalf("%d job instances, want 4", len(list))
	}
	for _, in := range list {
		if in.Kind != gpuportal.KindSpot {
			t.Fatalf("a hybrid worker started %s beside a booking of every GPU", in.Kind)
		}
	}

	// Two GPUs fail before the start: the refund names the cause.
	ns, _ := db.Nodes(ctx)
	hb := gpuportal.AgentHeartbeat{HeartbeatSeconds: 10}
	for k, g := range ns[0].GPUs {
		hb.GPUs = append(hb.GPUs, gpuportal.GPUSample{UUID: g.UUID, Healthy: k >= 2})
	}
	if _, err := db.RecordHeartbeat(ctx, ns[0].ID, hb, storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	fakeAgent{t, db}.runAll()
	for _, in := range list {
		fakeAgent{t, db}.exit(getInstance(t, db, in.ID))
	}
	tick(t, db, clock, start)
	entries, err := db.LedgerPage(ctx, booker.ID, store.LedgerFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if e.Kind == gpuportal.LedgerRefund && e.ReservationID != nil && *e.ReservationID == res.ID {
			found = true
			if !strings.Contains(e.Description, "GPUs out of service") || strings.Contains(e.Description, "node failure") {
				t.Fatalf("refund says %q", e.Description)
			}
		}
	}
	if !found {
		t.Fatalf("no refund for the 2 missing GPUs: %+v", entries)
	}
}

// (issue 22, item 14) A launch needs an hour of its price beside an hour
// of what already runs or waits: with the money for one spot GPU-hour a
// customer starts one GPU, not twelve one after another.
func TestLaunchFundsCountWhatAlreadyRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	spot := gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x"}
	if _, err := db.Launch(ctx, u, spot); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Fatalf("a launch from ¥0: %v", err)
	}
	if _, err := db.Credit(ctx, nil, u.ID, gpuportal.CreditRequest{Amount: 300, Note: "a little"}); err != nil {
		t.Fatal(err)
	}
	first, err := db.Launch(ctx, u, spot) // the spot GPU-hour is ¥2.40: ¥3 pays one
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Launch(ctx, u, spot); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Fatalf("a second GPU while the first waits to start: %v", err)
	}
	tick(t, db, clock, clock.Now())
	fakeAgent{t, db}.runAll()
	if got := getInstance(t, db, first.ID); got.Status != gpuportal.InstanceRunning {
		t.Fatalf("first is %s", got.Status)
	}
	if _, err := db.Launch(ctx, u, spot); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Fatalf("a second GPU beside the running one: %v", err)
	}
}

// (issue 22, item 4) Disabling an account stops everything it runs or
// would start: an auto-restart spot instance is not restarted, job tasks
// are not queued again (the job is cancelled), its reserved instance
// stops, its waitlist entries are cancelled. Its confirmed reservation
// stays (paid).
func TestDisablingAnAccountStopsEveryKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	boss := storetest.MustCreateUser(t, db, "boss@example.com", gpuportal.RoleAdmin)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	start := clock.Now().Truncate(time.Hour).Add(time.Hour)
	res, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	later, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start.Add(48 * time.Hour), End: start.Add(52 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// A full window for the waitlist: the other customer books the rest.
	full := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 14, Start: start.Add(24 * time.Hour), End: start.Add(28 * time.Hour)}
	if _, err := db.Book(ctx, other, full); err != nil {
		t.Fatal(err)
	}
	full.Count = 4
	entry, err := db.JoinWaitlist(ctx, u, full, true)
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start)
	spot, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "x", AutoRestart: true})
	if err != nil {
		t.Fatal(err)
	}
	reserved, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindReserved, Count: 2, Command: "x", ReservationID: &res.ID})
	if err != nil {
		t.Fatal(err)
	}
	job, err := db.CreateJob(ctx, u, gpuportal.JobRequest{Name: "j", Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 10, Command: "x", MaxParallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start.Add(time.Minute))
	agent := fakeAgent{t, db}
	agent.runAll()
	disabled := true
	if _, err := db.UpdateAccount(ctx, boss, u.ID, store.AccountUpdate{Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	// The agents do what they are told: every workload of the account ends.
	for range 3 {
		list, _ := db.InstanceList(ctx, admin, store.InstanceFilter{Limit: 100})
		for _, in := range list {
			if in.UserID == u.ID && (in.Status == gpuportal.InstanceRunning || in.Status == gpuportal.InstanceInterrupting) {
				agent.exit(getInstance(t, db, in.ID))
			}
		}
		tick(t, db, clock, clock.Now().Add(3*time.Minute))
		agent.runAll()
	}
	list, _ := db.InstanceList(ctx, admin, store.InstanceFilter{Limit: 100})
	for _, in := range list {
		if in.UserID != u.ID {
			continue
		}
		switch in.Status {
		case gpuportal.InstancePending, gpuportal.InstanceRunning, gpuportal.InstanceInterrupting:
			t.Errorf("instance %d (%s) is %s after the account was disabled", in.ID, in.Kind, in.Status)
		}
	}
	if got := getInstance(t, db, spot.ID); got.Restarts != 0 {
		t.Errorf("the auto-restart spot instance restarted %d times", got.Restarts)
	}
	if got := getInstance(t, db, reserved.ID); got.Status != gpuportal.InstanceStopped {
		t.Errorf("reserved instance is %s", got.Status)
	}
	if j, _ := db.Job(ctx, admin, job.ID); j.Status != gpuportal.JobCancelled {
		t.Errorf("job is %s", j.Status)
	}
	if w, _ := db.Waitlist(ctx, admin); len(w) == 0 || w[0].ID != entry.ID || w[0].Status != gpuportal.WaitCancelled {
		t.Errorf("waitlist = %+v", w)
	}
	if r, _ := db.Reservation(ctx, admin, later.ID); r.Status != gpuportal.ReservationConfirmed {
		t.Errorf("the confirmed reservation is %s", r.Status)
	}
}

// (issue 22, item 22) SQLite cuts its WAL back to 64 MiB after a
// checkpoint: without the limit the file kept its largest size for ever,
// and a disk that had filled once filled again at once.
func TestWALIsCutBackAfterCheckpoints(t *testing.T) {
	t.Parallel()
	if storetest.Engine() != "sqlite" {
		t.Skip("a SQLite setting")
	}
	db, _ := storetest.Open(t)
	n, err := db.JournalSizeLimit(context.Background())
	if err != nil || n != 64<<20 {
		t.Fatalf("journal_size_limit = %d, %v", n, err)
	}
}

// (issue 22, item 21) Never two copies of one instance: an auto-restart
// spot instance whose node stopped answering waits until that node
// confirms the old attempt gone (it comes back and the attempt has
// ended), and only then starts elsewhere on the same checkpoint
// directory; if the node never answers, it starts after
// gpuportal.FenceTimeout in a fresh directory.
func TestRestartWaitsUntilTheOldAttemptIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	wall := gpuportal.NewManualClock(storetest.Epoch)
	db.Wall = wall
	nodes := storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	launch := func() *gpuportal.Instance {
		in, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 8, Command: "x", AutoRestart: true})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	heartbeat := func(node string, workloads ...gpuportal.WorkloadStatus) {
		t.Helper()
		if _, err := db.RecordHeartbeat(ctx, node, gpuportal.AgentHeartbeat{HeartbeatSeconds: 10, Workloads: workloads}, wall.Now()); err != nil {
			t.Fatal(err)
		}
		if err := db.ApplyWorkloadReports(ctx, node, workloads); err != nil {
			t.Fatal(err)
		}
	}
	first := launch()
	tick(t, db, clock, clock.Now())
	fakeAgent{t, db}.runAll()
	first = getInstance(t, db, first.ID)
	lost, other := first.Node, nodes[0].ID
	if other == lost {
		other = nodes[1].ID
	}
	running := gpuportal.WorkloadStatus{InstanceID: first.ID, Attempt: first.Attempt, State: gpuportal.WorkloadRunning}

	// The node falls silent (a partition); the other heartbeats on.
	wall.Set(wall.Now().Add(time.Minute))
	heartbeat(other)
	if _, err := db.MarkStaleNodesOffline(ctx, wall.Now(), storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		tick(t, db, clock, clock.Now().Add(time.Minute))
	}
	if got := getInstance(t, db, first.ID); got.Status != gpuportal.InstancePending || got.Node != "" {
		t.Fatalf("restarted before its old node confirmed the old attempt gone: %s on %q", got.Status, got.Node)
	}
	// The node comes back, still running the old attempt: still waiting.
	heartbeat(lost, running)
	tick(t, db, clock, clock.Now().Add(time.Minute))
	if got := getInstance(t, db, first.ID); got.Node != "" {
		t.Fatalf("restarted while the old attempt still runs, on %s", got.Node)
	}
	// Its agent stops the old attempt and says so: now it starts, on the
	// same checkpoint directory.
	code := 143
	heartbeat(lost, gpuportal.WorkloadStatus{InstanceID: first.ID, Attempt: first.Attempt, State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true})
	tick(t, db, clock, clock.Now().Add(time.Minute))
	if got := getInstance(t, db, first.ID); got.Node == "" || got.CheckpointKey != first.CheckpointKey {
		t.Fatalf("after the confirmation: node %q, checkpoint %q (was %q)", got.Node, got.CheckpointKey, first.CheckpointKey)
	}

	// A node that never answers again: after the fence timeout the
	// instance starts elsewhere in a fresh directory.
	second := launch()
	tick(t, db, clock, clock.Now().Add(time.Minute))
	fakeAgent{t, db}.runAll()
	second = getInstance(t, db, second.ID)
	dead := second.Node
	alive := nodes[0].ID
	if alive == dead {
		alive = nodes[1].ID
	}
	wall.Set(wall.Now().Add(time.Minute))
	heartbeat(alive, gpuportal.WorkloadStatus{InstanceID: first.ID, Attempt: getInstance(t, db, first.ID).Attempt, State: gpuportal.WorkloadRunning})
	if _, err := db.MarkStaleNodesOffline(ctx, wall.Now(), storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now().Add(time.Minute))
	if got := getInstance(t, db, second.ID); got.Node != "" || got.Status != gpuportal.InstancePending {
		t.Fatalf("restarted at once on %s (%s)", got.Node, got.Status)
	}
	wall.Set(wall.Now().Add(gpuportal.FenceTimeout + time.Minute))
	heartbeat(alive)
	db.Kick(ctx)
	for range 2 {
		tick(t, db, clock, clock.Now().Add(time.Minute))
	}
	got := getInstance(t, db, second.ID)
	if got.Status == gpuportal.InstancePending && got.Node == "" {
		// The first instance still holds the live node's GPUs; stop it.
		if _, err := db.Stop(ctx, u, first.ID); err != nil {
			t.Fatal(err)
		}
		fakeAgent{t, db}.exit(getInstance(t, db, first.ID))
		tick(t, db, clock, clock.Now().Add(time.Minute))
		got = getInstance(t, db, second.ID)
	}
	if got.Node == "" || got.CheckpointKey == second.CheckpointKey {
		t.Fatalf("after the fence timeout: node %q, checkpoint %q (was %q)", got.Node, got.CheckpointKey, second.CheckpointKey)
	}
}

// (issue 28, "Revenue that adds up") The admin's revenue is charges less
// refunds, by product — never top-ups or credits, which are the
// customers' own money (the overview said −¥441,684.96 with them in).
func TestRevenueIsChargesLessRefunds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	if _, err := db.Credit(ctx, nil, u.ID, gpuportal.CreditRequest{Amount: 1_000_000, Note: "bank transfer"}); err != nil {
		t.Fatal(err)
	}
	start := clock.Now().Truncate(time.Hour).Add(48 * time.Hour)
	kept, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Cancel(ctx, u, cancelled.ID); err != nil { // free: 48 h ahead
		t.Fatal(err)
	}
	o, err := db.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Revenue["reservations"]; got != kept.Price || len(o.Revenue) != 1 {
		t.Fatalf("revenue = %v, want only reservations %s", o.Revenue, kept.Price)
	}
}

// (issue 44, item 15) A request that can never succeed says so before
// capacity and money: another customer's volume or an unknown image in a
// launch, a booking's launch or a job is its own error, not "no
// capacity" or "top up".
func TestReferencesAreCheckedBeforeCapacityAndMoney(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	owner := storetest.MustCreateUser(t, db, "owner@example.com", gpuportal.RoleCustomer)
	vol, err := db.CreateVolume(ctx, owner, gpuportal.VolumeRequest{Name: "theirs", Region: "cd-1", SizeGiB: 10})
	if err != nil {
		t.Fatal(err)
	}
	// The region is full.
	if _, err := db.Launch(ctx, owner, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 8, Command: "sleep"}); err != nil {
		t.Fatal(err)
	}
	rich := storetest.MustCreateUser(t, db, "rich@example.com", gpuportal.RoleCustomer)
	poor := storetest.MustCreatePoorUser(t, db, "poor@example.com", gpuportal.RoleCustomer)
	theirs := []gpuportal.VolumeMount{{ID: vol.ID}}
	start := storetest.Epoch.Add(2 * time.Hour)
	for _, tt := range []struct {
		name string
		do   func() error
	}{
		{"on-demand launch in a full region", func() error {
			_, err := db.Launch(ctx, rich, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x", Volumes: theirs})
			return err
		}},
		{"spot launch in a full region", func() error {
			_, err := db.Launch(ctx, rich, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x", Volumes: theirs})
			return err
		}},
		{"launch with no money", func() error {
			_, err := db.Launch(ctx, poor, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x", Volumes: theirs})
			return err
		}},
		{"booking of a full hour", func() error {
			_, err := db.Book(ctx, rich, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour),
				Launch: &gpuportal.LaunchSpec{Command: "x", Volumes: theirs}})
			return err
		}},
		{"job with no money", func() error {
			_, err := db.CreateJob(ctx, poor, gpuportal.JobRequest{Name: "j", Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 1, MaxParallel: 1, Command: "x",
				Kind: gpuportal.JobSpot, Volumes: theirs})
			return err
		}},
	} {
		err := tt.do()
		if gpuportal.ErrorCode(err) != gpuportal.EINVALID || !strings.HasPrefix(gpuportal.ErrorField(err), "volumes[0]") {
			t.Errorf("%s naming another customer's volume: %v; want invalid_input on volumes[0].id", tt.name, err)
		}
	}
	if _, err := db.Launch(ctx, poor, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x", Image: "no-such-image"}); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Errorf("a launch with no money in an unknown image: %v; want invalid_input", err)
	}
}
