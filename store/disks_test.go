package store_test

import (
	"context"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 45) Every launch gets a disk: the policy's size unless it asks,
// 1 GiB to the largest (422 naming the field otherwise, also for jobs and
// a booking's launch); its node is told the size, and what the agent
// measures shows on the instance.
func TestInstanceDiskSizesAndReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	launch := func(disk *int) (*gpuportal.Instance, error) {
		return db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "true", DiskGiB: disk})
	}
	for bad, code := range map[int]string{0: gpuportal.EINVALID, -1: gpuportal.EINVALID, 501: gpuportal.EPOLICY} {
		_, err := launch(&bad)
		if e, ok := err.(*gpuportal.Error); !ok || e.Code != code || e.Field != "disk_gib" {
			t.Errorf("disk_gib %d: %v, want %s", bad, err, code)
		}
	}
	big := 501
	if _, err := db.CreateJob(ctx, u, gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 1, MaxParallel: 1, Command: "true", DiskGiB: &big}); gpuportal.ErrorCode(err) != gpuportal.EPOLICY {
		t.Errorf("a job with a 501 GiB disk: %v", err)
	}
	start := storetest.Epoch.Add(48 * time.Hour)
	zero := 0
	_, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour),
		Launch: &gpuportal.LaunchSpec{Command: "true", DiskGiB: &zero}})
	if e, ok := err.(*gpuportal.Error); !ok || e.Field != "launch.disk_gib" {
		t.Errorf("a booking's launch with a 0 GiB disk: %v", err)
	}
	if list, _ := db.Instances(ctx, u, 0); len(list) != 0 {
		t.Fatalf("refused launches left %d instances", len(list))
	}
	inst, err := launch(nil)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Disk == nil || inst.Disk.SizeGiB != 50 || inst.Disk.Enforced != nil {
		t.Fatalf("default disk = %+v", inst.Disk)
	}
	tick(t, db, clock, clock.Now())
	got := getInstance(t, db, inst.ID)
	d, err := db.DesiredFor(ctx, got.Node)
	if err != nil || len(d.Workloads) != 1 || d.Workloads[0].DiskGiB != 50 {
		t.Fatalf("the node is told %+v (%v)", d.Workloads, err)
	}
	report := gpuportal.WorkloadStatus{InstanceID: inst.ID, Attempt: got.Attempt, State: gpuportal.WorkloadRunning,
		Disk: &gpuportal.WorkloadDisk{UsedBytes: 3 << 30, Enforced: true}}
	if err := db.ApplyWorkloadReports(ctx, got.Node, []gpuportal.WorkloadStatus{report}); err != nil {
		t.Fatal(err)
	}
	got = getInstance(t, db, inst.ID)
	if got.Disk == nil || got.Disk.UsedBytes != 3<<30 || got.Disk.Enforced == nil || !*got.Disk.Enforced || got.Disk.UsedPercent() != 6 {
		t.Fatalf("after the report: %+v", got.Disk)
	}
	report.Disk = &gpuportal.WorkloadDisk{UsedBytes: 0, Note: "sized disks need the podman runtime"}
	if err := db.ApplyWorkloadReports(ctx, got.Node, []gpuportal.WorkloadStatus{report}); err != nil {
		t.Fatal(err)
	}
	if got = getInstance(t, db, inst.ID); *got.Disk.Enforced || got.Disk.Note == "" {
		t.Fatalf("a node without disks: %+v", got.Disk)
	}
}

// (issue 45) The part of a disk beyond the policy's free 50 GiB is billed
// per started hour at the volume price while the instance runs, through
// the ledger, and not an hour after it ended; a disk within the free
// part costs nothing.
func TestDiskBeyondTheFreePartIsBilledByTheStartedHour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	size := 122 // 72 GiB paid: 72 × 30 fen a month = 3 fen an hour
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "true", DiskGiB: &size})
	if err != nil {
		t.Fatal(err)
	}
	free, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	at := clock.Now()
	tick(t, db, clock, at)
	agent.runAll()
	for m := 10; m <= 150; m += 10 {
		tick(t, db, clock, at.Add(time.Duration(m)*time.Minute))
	}
	// 2 h 30 in: three hours started.
	if total, _ := chargesOf(t, db, u.ID, gpuportal.LedgerDisk); total != 9 {
		t.Errorf("2 h 30 of a 122 GiB disk cost %d fen, want 9", total)
	}
	for _, i := range []int64{inst.ID, free.ID} {
		if _, err := db.Stop(ctx, u, i); err != nil {
			t.Fatal(err)
		}
		agent.exit(getInstance(t, db, i))
	}
	for m := 160; m <= 300; m += 10 {
		tick(t, db, clock, at.Add(time.Duration(m)*time.Minute))
	}
	if total, n := chargesOf(t, db, u.ID, gpuportal.LedgerDisk); total != 9 || n < 1 {
		t.Errorf("after the stop: %d fen in %d entries, want 9", total, n)
	}
	checkLedger(t, db, u)
}

// (issue 45) An admin names a region's package mirror or proxy: every
// workload placed there gets the variables (the node is told), customers
// read them with the region, and nothing the platform sets can be
// overridden; customers cannot set them.
func TestRegionWorkloadVariables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	admin := storetest.MustCreateUser(t, db, "admin@example.com", gpuportal.RoleAdmin)
	mirror := map[string]string{"PIP_INDEX_URL": "https://mirrors.example.cn/pypi/simple", "HF_ENDPOINT": "https://hf-mirror.example.cn"}
	if _, err := db.SetRegionWorkloadEnv(ctx, u, "cd-1", mirror); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Errorf("a customer sets a region's variables: %v", err)
	}
	for _, bad := range []map[string]string{{"PATH": "/tmp"}, {"LD_PRELOAD": "/x.so"}, {"GPUPORTAL_INSTANCE_ID": "1"}, {"CUDA_VISIBLE_DEVICES": "0"},
		{"NO SPACE": "x"}, {"X": "a\nb"}} {
		if _, err := db.SetRegionWorkloadEnv(ctx, admin, "cd-1", bad); gpuportal.ErrorField(err) != "workload_env" {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if _, err := db.SetRegionWorkloadEnv(ctx, admin, "nowhere", mirror); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("an unknown region: %v", err)
	}
	r, err := db.SetRegionWorkloadEnv(ctx, admin, "cd-1", mirror)
	if err != nil || r.WorkloadEnv["PIP_INDEX_URL"] != mirror["PIP_INDEX_URL"] {
		t.Fatalf("set: %+v %v", r, err)
	}
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "pip install torch"})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	d, err := db.DesiredFor(ctx, getInstance(t, db, inst.ID).Node)
	if err != nil || len(d.Workloads) != 1 || d.Workloads[0].Env["HF_ENDPOINT"] != mirror["HF_ENDPOINT"] || len(d.Workloads[0].Env) != 2 {
		t.Fatalf("the node is told %+v (%v)", d.Workloads, err)
	}
	if entries, _ := db.Audit(ctx, store.AuditFilter{Action: "region.workload_env", Limit: 10}); len(entries) != 1 {
		t.Errorf("%d audit entries", len(entries))
	}
}

// (issue 46) Stop keeping the disk, start again: the node is told to keep
// it at the end, the stopped instance shows it kept and bills all of it
// while kept, a start puts it back to pending (a new attempt that mounts
// the same disk, anywhere in the region), and a release lets it go —
// the region's nodes told to remove the file.
func TestStopKeepingTheDiskThenStartAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	size := 60
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, DiskGiB: &size})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); gpuportal.ErrorField(err) != "keep_disk" {
		t.Errorf("keeping the disk of a pending instance: %v", err)
	}
	at := clock.Now()
	tick(t, db, clock, at)
	agent.runAll()
	running := getInstance(t, db, inst.ID)
	// Its node has not said it holds a disk: nothing to keep yet.
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); gpuportal.ErrorField(err) != "keep_disk" {
		t.Errorf("keeping a disk the node does not hold: %v", err)
	}
	reportDisk(t, db, running, 5<<30)
	if _, err := db.StartInstance(ctx, u, inst.ID, nil); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("start while running: %v", err)
	}
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	d, _ := db.DesiredFor(ctx, running.Node)
	if len(d.Workloads) != 1 || !d.Workloads[0].Stop || !d.Workloads[0].DiskKept {
		t.Fatalf("the node is told %+v", d.Workloads)
	}
	agent.exit(getInstance(t, db, inst.ID))
	stopped := getInstance(t, db, inst.ID)
	if stopped.Status != gpuportal.InstanceStopped || stopped.Disk == nil || !stopped.Disk.Kept {
		t.Fatalf("after the stop: %s %+v", stopped.Status, stopped.Disk)
	}
	// Kept a day: all 60 GiB at 30 fen a GiB-month is 60 fen a day
	// (besides the 10 GiB beyond the free part while it ran).
	before, _ := chargesOf(t, db, u.ID, gpuportal.LedgerDisk)
	for h := 1; h <= 24; h++ {
		tick(t, db, clock, at.Add(time.Duration(h)*time.Hour))
	}
	// (25 hours started: 62 fen)
	if after, _ := chargesOf(t, db, u.ID, gpuportal.LedgerDisk); after-before < 60 || after-before > 63 {
		t.Errorf("a day kept cost %d fen, want 60 to 63", after-before)
	}
	if _, err := db.StartInstance(ctx, other, inst.ID, nil); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("another's start: %v", err)
	}
	nine := 9
	if _, err := db.StartInstance(ctx, u, inst.ID, &nine); gpuportal.ErrorField(err) != "count" {
		t.Errorf("a start on 9 GPUs: %v", err)
	}
	started, err := db.StartInstance(ctx, u, inst.ID, nil)
	if err != nil || started.Status != gpuportal.InstancePending || started.Disk == nil || !started.Disk.Kept {
		t.Fatalf("start: %+v %v", started, err)
	}
	tick(t, db, clock, clock.Now())
	again := getInstance(t, db, inst.ID)
	if again.Attempt != running.Attempt+1 || again.Node == "" {
		t.Fatalf("after the start: attempt %d on %q", again.Attempt, again.Node)
	}
	if d, _ := db.DesiredFor(ctx, again.Node); len(d.Workloads) != 1 || d.Workloads[0].DiskGiB != 60 || !d.Workloads[0].DiskKept || d.Workloads[0].Stop {
		t.Fatalf("the new node is told %+v", d.Workloads)
	}
	if err := db.ReleaseDisk(ctx, u, inst.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("release while it runs: %v", err)
	}
	agent.runAll()
	reportDisk(t, db, again, 5<<30)
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	agent.exit(getInstance(t, db, inst.ID))
	if err := db.ReleaseDisk(ctx, u, inst.ID); err != nil {
		t.Fatalf("release of a kept disk: %v", err)
	}
	if got := getInstance(t, db, inst.ID); got.Disk.Kept {
		t.Error("released, yet kept")
	}
	if ids, err := db.ReleasedDisks(ctx, again.Node); err != nil || len(ids) != 1 || ids[0] != inst.ID {
		t.Errorf("the region's nodes are told to remove %v (%v)", ids, err)
	}
	if _, err := db.StartInstance(ctx, u, inst.ID, nil); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("start after the release: %v", err)
	}
	checkLedger(t, db, u)
}

// (issue 46) A spot instance that sized its disk keeps it through its
// interruptions: its auto-restart mounts the same disk (the node is told
// to keep it at each end); keep_disk_on_interrupt:false lets it go; only
// spot instances take the option.
func TestSpotKeepsItsDiskThroughInterruptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	admin := storetest.MustCreateUser(t, db, "admin@example.com", gpuportal.RoleAdmin)
	agent := fakeAgent{t, db}
	size, yes, no := 10, true, false
	if _, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, KeepDiskOnInterrupt: &yes}); gpuportal.ErrorField(err) != "keep_disk_on_interrupt" {
		t.Errorf("on-demand with keep_disk_on_interrupt: %v", err)
	}
	kept, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, AutoRestart: true, DiskGiB: &size})
	if err != nil {
		t.Fatal(err)
	}
	notKept, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, DiskGiB: &size, KeepDiskOnInterrupt: &no})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	agent.runAll()
	told := func(id int64) gpuportal.DesiredWorkload {
		i := getInstance(t, db, id)
		d, _ := db.DesiredFor(ctx, i.Node)
		for _, w := range d.Workloads {
			if w.InstanceID == id {
				return w
			}
		}
		t.Fatalf("instance %d is not on its node", id)
		return gpuportal.DesiredWorkload{}
	}
	if !told(kept.ID).DiskKept || told(notKept.ID).DiskKept {
		t.Fatal("the nodes are not told which disks to keep")
	}
	first := getInstance(t, db, kept.ID)
	if _, err := db.AdminInterrupt(ctx, admin, kept.ID); err != nil {
		t.Fatal(err)
	}
	agent.exit(getInstance(t, db, kept.ID))
	if got := getInstance(t, db, kept.ID); got.Status != gpuportal.InstancePending {
		t.Fatalf("after the interruption: %s", got.Status)
	}
	tick(t, db, clock, clock.Now())
	again := told(kept.ID)
	if again.Attempt != first.Attempt+1 || !again.DiskKept || again.DiskGiB != 10 {
		t.Fatalf("the restart is told %+v", again)
	}
}

// (issue 46) A kept disk at zero balance follows the volumes' rule: it is
// suspended (unbilled, its owner told at once), kept 15 days from then,
// told 3 days before, released at the end — and a top-up that does not
// pay what it owes lifts nothing; a start is refused while suspended.
func TestKeptDiskAtZeroBalance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	admin := &gpuportal.User{Role: gpuportal.RoleAdmin}
	topUp(t, db, u, 2000) // an hour of an on-demand A100 and a little
	agent := fakeAgent{t, db}
	size := 500
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, DiskGiB: &size})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	agent.runAll()
	running := getInstance(t, db, inst.ID)
	reportDisk(t, db, running, 1<<30)
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	agent.exit(getInstance(t, db, inst.ID))
	kinds := func() map[string]int {
		notes, _ := db.InApp(ctx, u.ID, 100)
		out := map[string]int{}
		for _, n := range notes {
			out[n.Kind]++
		}
		return out
	}
	// 500 GiB kept: about 21 fen an hour; what is left runs out in hours.
	start := clock.Now()
	var suspendedAt time.Time
	for h := 1; h <= 72 && suspendedAt.IsZero(); h++ {
		tick(t, db, clock, start.Add(time.Duration(h)*time.Hour))
		if kinds()[gpuportal.NoteDiskSuspended] == 1 {
			suspendedAt = clock.Now()
		}
	}
	if suspendedAt.IsZero() {
		t.Fatal("never suspended")
	}
	if _, err := db.StartInstance(ctx, u, inst.ID, nil); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Errorf("a start while suspended: %v", err)
	}
	charged, _ := chargesOf(t, db, u.ID, gpuportal.LedgerDisk)
	releaseAt := suspendedAt.Add(gpuportal.VolumeRetention)
	// A fen of credit pays nothing of what it owes: still suspended.
	if _, err := db.Credit(ctx, admin, u.ID, gpuportal.CreditRequest{Amount: 1, Note: "a fen"}); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, releaseAt.Add(-4*24*time.Hour))
	if k := kinds(); k[gpuportal.NoteDiskReleaseSoon] != 0 {
		t.Errorf("warned too early: %v", k)
	}
	tick(t, db, clock, releaseAt.Add(-3*24*time.Hour+time.Minute))
	tick(t, db, clock, releaseAt.Add(-2*24*time.Hour))
	if k := kinds(); k[gpuportal.NoteDiskReleaseSoon] != 1 {
		t.Errorf("warned 3 days before, once? %v", k)
	}
	if now, _ := chargesOf(t, db, u.ID, gpuportal.LedgerDisk); now != charged {
		t.Errorf("a suspended disk was billed: %d → %d fen", charged, now)
	}
	tick(t, db, clock, releaseAt.Add(-time.Minute))
	if !getInstance(t, db, inst.ID).Disk.Kept {
		t.Fatal("released before its 15 days")
	}
	tick(t, db, clock, releaseAt)
	if getInstance(t, db, inst.ID).Disk.Kept {
		t.Fatal("still kept after 15 days")
	}
	if k := kinds(); k[gpuportal.NoteDiskReleased] != 1 {
		t.Errorf("told of the release? %v", k)
	}
	if ids, _ := db.ReleasedDisks(ctx, running.Node); len(ids) != 1 {
		t.Errorf("the nodes are told to remove %v", ids)
	}
	checkLedger(t, db, u)
}

// reportDisk is i's agent saying its disk holds used bytes, within a size
// the node holds.
func reportDisk(t *testing.T, db *store.DB, i *gpuportal.Instance, used int64) {
	t.Helper()
	err := db.ApplyWorkloadReports(context.Background(), i.Node, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadRunning,
		Disk: &gpuportal.WorkloadDisk{UsedBytes: used, Enforced: true}}})
	if err != nil {
		t.Fatal(err)
	}
}

// (issue 46) Book your resume: a reservation may name the booker's
// stopped instance with a kept disk; at the start it runs on the
// reservation's GPUs with that disk (a reserved instance, a new attempt),
// and after the reservation it starts again on demand. A booking that
// names another's instance, a running one or another model is refused;
// an instance started meanwhile fails the launch alone (the owner told).
func TestBookYourResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	agent.runAll()
	reportDisk(t, db, getInstance(t, db, inst.ID), 1<<30)
	start := clock.Now().Truncate(time.Hour).Add(3 * time.Hour)
	book := func(who *gpuportal.User, id int64, count int) (*gpuportal.Reservation, error) {
		return db.Book(ctx, who, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: count, Start: start, End: start.Add(4 * time.Hour),
			Launch: &gpuportal.LaunchSpec{ResumeInstanceID: &id}})
	}
	if _, err := book(u, inst.ID, 4); gpuportal.ErrorField(err) != "launch.resume_instance_id" || gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("a booking resuming a running instance: %v", err)
	}
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	agent.exit(getInstance(t, db, inst.ID))
	if _, err := book(other, inst.ID, 4); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("another's booking resuming it: %v", err)
	}
	if _, err := book(u, inst.ID, 1); gpuportal.ErrorField(err) != "launch.resume_instance_id" {
		t.Errorf("a booking smaller than the instance: %v", err)
	}
	r, err := book(u, inst.ID, 4)
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start.Add(-time.Hour)) // the reminder names the instance
	reminded := false
	notes, _ := db.InApp(ctx, u.ID, 100)
	for _, n := range notes {
		reminded = reminded || (n.Kind == gpuportal.NoteReservationStarts && n.Params.InstanceID == inst.ID)
	}
	if !reminded {
		t.Error("the reminder before the start does not name the instance it resumes")
	}
	tick(t, db, clock, start)
	tick(t, db, clock, start.Add(time.Minute))
	got := getInstance(t, db, inst.ID)
	if got.Kind != gpuportal.KindReserved || got.ReservationID == nil || *got.ReservationID != r.ID || got.Node == "" || got.PricePerGPU != 0 {
		t.Fatalf("at the start: %s on reservation %v, node %q, price %d", got.Kind, got.ReservationID, got.Node, got.PricePerGPU)
	}
	d, _ := db.DesiredFor(ctx, got.Node)
	if len(d.Workloads) != 1 || !d.Workloads[0].DiskKept || d.Workloads[0].Lifecycle != gpuportal.LifecycleScheduled {
		t.Fatalf("the node is told %+v", d.Workloads)
	}
	// Stopped keeping the disk again, it starts on demand afterwards.
	agent.runAll()
	reportDisk(t, db, getInstance(t, db, inst.ID), 1<<30)
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	agent.exit(getInstance(t, db, inst.ID))
	again, err := db.StartInstance(ctx, u, inst.ID, nil)
	if err != nil || again.Kind != gpuportal.KindOnDemand || again.ReservationID != nil || again.PricePerGPU == 0 {
		t.Fatalf("a start after the reservation: %+v %v", again, err)
	}
	// A second booking to resume it, which is running by its start: the
	// launch fails alone and its owner is told; the reservation starts.
	start2 := start.Add(24 * time.Hour)
	tick(t, db, clock, clock.Now())
	agent.runAll()
	reportDisk(t, db, getInstance(t, db, inst.ID), 1<<30)
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	agent.exit(getInstance(t, db, inst.ID))
	r2, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 4, Start: start2, End: start2.Add(4 * time.Hour),
		Launch: &gpuportal.LaunchSpec{ResumeInstanceID: &inst.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartInstance(ctx, u, inst.ID, nil); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start2)
	if got, _ := db.Reservation(ctx, u, r2.ID); got.Status != gpuportal.ReservationActive {
		t.Fatalf("the second reservation is %s", got.Status)
	}
	notes, _ = db.InApp(ctx, u.ID, 100)
	failed := 0
	for _, n := range notes {
		if n.Kind == gpuportal.NoteReservationLaunchFailed {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d launch-failed notes, want 1", failed)
	}
}

// (issue 46) No-GPU mode: a stopped instance starts with count 0 on a
// node whose GPUs are all busy — it holds none, is told to the node with
// none, costs the policy's no-GPU price an hour (in its burn and its
// bill) and is never a victim for a booking. A count above the largest
// node, or below 0, is refused by field.
func TestNoGPUModeRunsBesideBusyGPUs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 1)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	size := 20
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, DiskGiB: &size})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	agent.runAll()
	reportDisk(t, db, getInstance(t, db, inst.ID), 1<<30)
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	agent.exit(getInstance(t, db, inst.ID))
	for range 2 {
		if _, err := db.Launch(ctx, other, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	tick(t, db, clock, clock.Now())
	agent.runAll()
	for _, n := range []int{-1, 2} {
		if _, err := db.StartInstance(ctx, u, inst.ID, &n); gpuportal.ErrorField(err) != "count" {
			t.Errorf("a start on %d GPUs: %v", n, err)
		}
	}
	zero := 0
	started, err := db.StartInstance(ctx, u, inst.ID, &zero)
	if err != nil {
		t.Fatal(err)
	}
	if started.Count != 0 || started.PricePerGPU != 10 || started.Kind != gpuportal.KindSpot {
		t.Fatalf("started with no GPU: count %d at %d fen, %s", started.Count, started.PricePerGPU, started.Kind)
	}
	at := clock.Now()
	tick(t, db, clock, at)
	placed := getInstance(t, db, inst.ID)
	if placed.Node == "" || len(placed.GPUs) != 0 {
		t.Fatalf("placed on %q with GPUs %v", placed.Node, placed.GPUs)
	}
	d, err := db.DesiredFor(ctx, placed.Node)
	if err != nil {
		t.Fatal(err)
	}
	var told *gpuportal.DesiredWorkload
	for k := range d.Workloads {
		if d.Workloads[k].InstanceID == inst.ID {
			told = &d.Workloads[k]
		}
	}
	if told == nil || len(told.GPUs) != 0 || !told.DiskKept || told.DiskGiB != size {
		t.Fatalf("the node is told %+v", told)
	}
	agent.runAll()
	if b, err := db.Balance(ctx, u); err != nil || b.BurnPerHour != 10 {
		t.Errorf("burn %d fen an hour (%v), want the no-GPU price", b.BurnPerHour, err)
	}
	// A booking of every GPU leaves it alone: it holds none.
	start := at.Truncate(time.Hour).Add(time.Hour)
	if _, err := db.Book(ctx, other, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour)}); err == nil {
		tick(t, db, clock, start.Add(-time.Minute))
		if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceRunning || got.Interruption != nil {
			t.Errorf("no-GPU instance with a booking ahead: %s %+v", got.Status, got.Interruption)
		}
	}
	tick(t, db, clock, at.Add(time.Hour))
	running := getInstance(t, db, inst.ID)
	before := started.Cost
	if _, err := db.StopWith(ctx, u, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	agent.exit(running)
	if got := getInstance(t, db, inst.ID); got.Cost-before < 10 || got.Cost-before > 11 {
		t.Errorf("an hour in no-GPU mode cost %d fen, want 10", got.Cost-before)
	}
	// Its resume booked, it takes the reservation's GPUs at the start
	// (the other customer's on-demand GPUs let go).
	theirs, err := db.InstanceList(ctx, other, store.InstanceFilter{Tab: store.TabActive})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range theirs {
		if _, err := db.Stop(ctx, other, i.ID); err != nil {
			t.Fatal(err)
		}
		agent.exit(&i)
	}
	resume := at.Truncate(time.Hour).Add(24 * time.Hour)
	r, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: resume, End: resume.Add(4 * time.Hour),
		Launch: &gpuportal.LaunchSpec{ResumeInstanceID: &inst.ID}})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, resume)
	tick(t, db, clock, resume.Add(time.Minute))
	if got := getInstance(t, db, inst.ID); got.ReservationID == nil || *got.ReservationID != r.ID || got.Count != 1 || len(got.GPUs) != 1 {
		t.Errorf("resumed from no-GPU mode on its reservation: %v, %d GPUs %v", got.ReservationID, got.Count, got.GPUs)
	}
	checkLedger(t, db, u)
}
