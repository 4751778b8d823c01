package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 23) A booking that carries a launch spec starts it by itself at
// its start on all its GPUs, one instance per node, and tells the owner;
// "Launch on this reservation" does the same by hand and refuses when
// every GPU already runs something.
func TestReservationStartsItsOwnWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Add(2 * time.Hour)
	req := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 12, Start: start, End: start.Add(4 * time.Hour)}
	bad := req
	bad.Launch = &gpuportal.LaunchSpec{Command: "  "}
	if _, err := db.Book(ctx, u, bad); gpuportal.ErrorField(err) != "launch.command" {
		t.Fatalf("a launch without a command: %v", err)
	}
	bad.Launch = &gpuportal.LaunchSpec{Image: "no-such-image", Command: "train"}
	if _, err := db.Book(ctx, u, bad); gpuportal.ErrorField(err) != "launch.image" {
		t.Fatalf("a launch in an unknown image: %v", err)
	}
	req.Launch = &gpuportal.LaunchSpec{Command: gpuportal.MachineCommand}
	r, err := db.Book(ctx, u, req)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Reservation(ctx, u, r.ID); got.Launch == nil || got.Launch.Command != gpuportal.MachineCommand {
		t.Fatalf("launch spec kept = %+v", got.Launch)
	}
	res := tick(t, db, clock, start)
	if res.Launched != 2 {
		t.Fatalf("launched %d instances at the start; want one per node (2)", res.Launched)
	}
	tick(t, db, clock, start.Add(time.Minute))
	list, _ := db.Instances(ctx, u, 0)
	counts, nodes := 0, map[string]int{}
	for _, i := range list {
		if i.Kind != gpuportal.KindReserved || i.ReservationID == nil || *i.ReservationID != r.ID || i.Command != gpuportal.MachineCommand {
			t.Fatalf("instance %+v", i)
		}
		counts += i.Count
		nodes[i.Node] += i.Count
	}
	if counts != 12 || len(nodes) != 2 {
		t.Fatalf("instances hold %d GPUs on %v; want all 12 of the reservation, one instance per node", counts, nodes)
	}
	notes, _ := db.InApp(ctx, u.ID, 20)
	told := false
	for _, n := range notes {
		told = told || (n.Kind == gpuportal.NoteReservationLaunched && n.Params.ReservationID == r.ID)
	}
	if !told {
		t.Error("the owner was not told")
	}
	// Every GPU runs something: a launch by hand is refused.
	if _, err := db.LaunchOnReservation(ctx, u, r.ID, gpuportal.LaunchSpec{Command: "train"}); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("launch on a full reservation: %v", err)
	}
	// Stop one: its GPUs can take a launch by hand, on that node only.
	stopped := list[0]
	if _, err := db.Stop(ctx, u, stopped.ID); err != nil {
		t.Fatal(err)
	}
	fakeAgent{t, db}.exit(getInstance(t, db, stopped.ID))
	got, err := db.LaunchOnReservation(ctx, u, r.ID, gpuportal.LaunchSpec{Command: "python train.py"})
	if err != nil || len(got) != 1 || got[0].Count != stopped.Count {
		t.Fatalf("launch by hand after a stop = %+v, %v; want one instance of %d GPUs", got, err, stopped.Count)
	}
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	if _, err := db.LaunchOnReservation(ctx, other, r.ID, gpuportal.LaunchSpec{Command: "x"}); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("another customer launches on it: %v", err)
	}
	// A booking without a spec keeps today's behaviour: nothing starts.
	plain := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 4, Start: start.Add(4 * time.Hour), End: start.Add(8 * time.Hour)}
	if _, err := db.Book(ctx, u, plain); err != nil {
		t.Fatal(err)
	}
	if res := tick(t, db, clock, start.Add(4*time.Hour)); res.Activated == 0 || res.Launched != 0 {
		t.Fatalf("at the plain booking's start: %+v; want it activated and nothing launched", res)
	}
}

// (issue 23) Idle stop: an instance launched with idle_stop_minutes whose
// GPUs read 0 % is stopped that many minutes later, and its owner told
// why; utilisation in between starts the count again.
func TestIdleStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	nodes := storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 4)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	minutes := 30
	for _, bad := range []gpuportal.LaunchRequest{
		{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x", IdleStopMinutes: func() *int { n := 0; return &n }()},
		{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x", IdleStopMinutes: func() *int { n := gpuportal.MaxIdleStopMinutes + 1; return &n }()},
	} {
		if _, err := db.Launch(ctx, u, bad); gpuportal.ErrorField(err) != "idle_stop_minutes" {
			t.Errorf("idle stop %d: %v", *bad.IdleStopMinutes, err)
		}
	}
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "x", IdleStopMinutes: &minutes})
	if err != nil {
		t.Fatal(err)
	}
	t0 := clock.Now()
	tick(t, db, clock, t0)
	fakeAgent{t, db}.runAll()
	util := func(percent int) {
		t.Helper()
		hb := gpuportal.AgentHeartbeat{HeartbeatSeconds: 10}
		for _, g := range nodes[0].GPUs {
			hb.GPUs = append(hb.GPUs, gpuportal.GPUSample{UUID: g.UUID, Healthy: true, UtilizationPercent: percent})
		}
		i := getInstance(t, db, inst.ID)
		hb.Workloads = []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadRunning}}
		if _, err := db.RecordHeartbeat(ctx, nodes[0].ID, hb, db.Wall.Now()); err != nil {
			t.Fatal(err)
		}
	}
	util(0)
	tick(t, db, clock, t0.Add(time.Minute))
	if i := getInstance(t, db, inst.ID); i.IdleSince == nil || !i.IdleSince.Equal(t0.Add(time.Minute)) {
		t.Fatalf("idle since %v; want the first tick that saw it idle", i.IdleSince)
	}
	util(85) // busy again at 20 minutes: the count starts over
	tick(t, db, clock, t0.Add(20*time.Minute))
	if i := getInstance(t, db, inst.ID); i.IdleSince != nil {
		t.Fatalf("busy, still idle since %v", i.IdleSince)
	}
	// An open session (someone is logged in) is use too, with the GPUs
	// at 0 %; once it closes, the instance is idle again.
	util(0)
	s, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionShell, Group: "laptop"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimSession(ctx, getInstance(t, db, inst.ID).Node, s.ID); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, t0.Add(20*time.Minute+30*time.Second))
	if i := getInstance(t, db, inst.ID); i.IdleSince != nil {
		t.Fatalf("idle since %v with a session open", i.IdleSince)
	}
	if err := db.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	util(0)
	tick(t, db, clock, t0.Add(21*time.Minute))
	tick(t, db, clock, t0.Add(50*time.Minute))
	if d, _ := db.DesiredFor(ctx, nodes[0].ID); len(notStopping(d)) != 1 {
		t.Fatal("stopped before 30 idle minutes")
	}
	tick(t, db, clock, t0.Add(51*time.Minute))
	if d, _ := db.DesiredFor(ctx, nodes[0].ID); len(notStopping(d)) != 0 {
		t.Fatal("not stopped after 30 idle minutes")
	}
	notes, _ := db.InApp(ctx, u.ID, 10)
	if len(notes) == 0 || notes[0].Kind != gpuportal.NoteIdleStopped || notes[0].Params.Missing != 30 {
		t.Fatalf("the owner was told %+v", notes)
	}
	fakeAgent{t, db}.exit(getInstance(t, db, inst.ID))
	if i := getInstance(t, db, inst.ID); i.Status != gpuportal.InstanceStopped || !strings.Contains(i.StopReason, "idle") {
		t.Errorf("after the stop: %s %q", i.Status, i.StopReason)
	}
}
