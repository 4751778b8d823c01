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
