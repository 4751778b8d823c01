package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

func volumeCharges(t *testing.T, db *store.DB, userID int64) (total gpuportal.Fen, n int) {
	t.Helper()
	return chargesOf(t, db, userID, gpuportal.LedgerVolume)
}

// chargesOf sums a user's ledger entries of one kind (and counts them).
func chargesOf(t *testing.T, db *store.DB, userID int64, kind string) (total gpuportal.Fen, n int) {
	t.Helper()
	entries, _, err := db.Ledger(context.Background(), userID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Kind == kind {
			total += e.Amount
			n++
		}
	}
	return total, n
}

// (issue 24) A day of a 100 GiB volume costs what the policy says (30 fen
// per GiB-month: exactly ¥1.00 a day), charged per started hour through
// the ledger — also when the ticks come late.
func TestVolumeBillingPerStartedHour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	v, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "data", Region: "cd-1", SizeGiB: 100})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gpuportal.VolumeAvailable || v.CostPerHour != 5 || len(v.MountedBy) != 0 {
		t.Errorf("new volume = %+v", v)
	}
	if total, n := volumeCharges(t, db, u.ID); n != 1 || total != 4 {
		t.Errorf("the first hour: %d entries, %d fen; want 1 of 4 fen", n, total)
	}
	start := clock.Now()
	// A tick every 10 minutes for the rest of the day, and one late tick
	// that catches up several hours at once.
	for at := start.Add(10 * time.Minute); at.Before(start.Add(20 * time.Hour)); at = at.Add(10 * time.Minute) {
		clock.Set(at)
		if _, err := db.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	clock.Set(start.Add(24*time.Hour - time.Minute))
	if _, err := db.Tick(ctx, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if total, _ := volumeCharges(t, db, u.ID); total != 100 {
		t.Errorf("a day of 100 GiB cost %d fen, want 100", total)
	}
	// The admins' revenue counts it as volumes (never the credit that paid it).
	if o, err := db.Overview(ctx); err != nil || o.Revenue["volumes"] != 100 || len(o.Revenue) != 1 {
		t.Errorf("revenue = %v %v, want volumes ¥1.00 alone", o.Revenue, err)
	}
	// Growing it prices the hours from then on; shrinking is refused.
	if _, err := db.ResizeVolume(ctx, u, v.ID, 50); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Errorf("shrink: %v", err)
	}
	if _, err := db.ResizeVolume(ctx, u, v.ID, 3000); gpuportal.ErrorCode(err) != gpuportal.EPOLICY {
		t.Errorf("past the quota: %v", err)
	}
	if _, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "data", Region: "cd-1", SizeGiB: 1}); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("a second volume of the same name: %v", err)
	}
	poor := storetest.MustCreatePoorUser(t, db, "poor@example.com", gpuportal.RoleCustomer)
	if _, err := db.CreateVolume(ctx, poor, gpuportal.VolumeRequest{Name: "x", Region: "cd-1", SizeGiB: 10}); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Errorf("a volume with no balance: %v", err)
	}
	if list, _ := db.Volumes(ctx, poor); len(list) != 0 {
		t.Errorf("the refused volume was kept: %+v", list)
	}
}

// (issue 24) At zero balance a volume is suspended, not deleted: kept 15
// days (its owner told at once, then 3 days before), deleted then and
// never sooner; a top-up in time lifts it.
func TestVolumeRetentionAtZeroBalance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	admin := &gpuportal.User{Role: gpuportal.RoleAdmin}
	if _, err := db.Credit(ctx, admin, u.ID, gpuportal.CreditRequest{Amount: 100, Note: "a little"}); err != nil {
		t.Fatal(err)
	}
	v, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "data", Region: "cd-1", SizeGiB: 1000})
	if err != nil {
		t.Fatal(err)
	}
	tick := func(at time.Time) {
		t.Helper()
		clock.Set(at)
		if _, err := db.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	start := clock.Now()
	tick(start.Add(2 * time.Hour)) // about 42 fen an hour: the balance is gone
	got, err := db.Volume(ctx, u, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != gpuportal.VolumeSuspended || got.DeleteAfter == nil {
		t.Fatalf("after the balance ran out: %+v", got)
	}
	deleteAt := *got.DeleteAfter
	if d := deleteAt.Sub(start.Add(2 * time.Hour)); d != gpuportal.VolumeRetention {
		t.Errorf("kept %v, want 15 days", d)
	}
	kinds := func() map[string]int {
		notes, err := db.InApp(ctx, u.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, n := range notes {
			out[n.Kind]++
		}
		return out
	}
	if k := kinds(); k[gpuportal.NoteVolumesSuspended] != 1 {
		t.Errorf("told at once? %v", k)
	}
	charged, _ := volumeCharges(t, db, u.ID)
	tick(deleteAt.Add(-4 * 24 * time.Hour))
	if k := kinds(); k[gpuportal.NoteVolumeDeleteSoon] != 0 {
		t.Errorf("warned too early: %v", k)
	}
	tick(deleteAt.Add(-3*24*time.Hour + time.Minute))
	tick(deleteAt.Add(-2 * 24 * time.Hour))
	if k := kinds(); k[gpuportal.NoteVolumeDeleteSoon] != 1 {
		t.Errorf("warned 3 days before, once? %v", k)
	}
	tick(deleteAt.Add(-time.Minute))
	if _, err := db.Volume(ctx, u, v.ID); err != nil {
		t.Fatalf("deleted before its 15 days: %v", err)
	}
	if now, _ := volumeCharges(t, db, u.ID); now != charged {
		t.Errorf("a suspended volume was billed: %d → %d fen", charged, now)
	}
	tick(deleteAt)
	if _, err := db.Volume(ctx, u, v.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("not deleted after 15 days: %v", err)
	}
	if k := kinds(); k[gpuportal.NoteVolumeDeleted] != 1 {
		t.Errorf("told of the deletion? %v", k)
	}

	// A top-up before the end lifts the suspension; billing resumes.
	w, err := db.CreateVolume(ctx, storetest.MustCreateUser(t, db, "rich@example.com", gpuportal.RoleCustomer), gpuportal.VolumeRequest{Name: "keep", Region: "cd-1", SizeGiB: 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = w
	if _, err := db.Credit(ctx, admin, u.ID, gpuportal.CreditRequest{Amount: 100, Note: "back"}); err != nil {
		t.Fatal(err)
	}
	x, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "again", Region: "cd-1", SizeGiB: 1000})
	if err != nil {
		t.Fatal(err)
	}
	tick(clock.Now().Add(3 * time.Hour))
	if got, _ := db.Volume(ctx, u, x.ID); got.Status != gpuportal.VolumeSuspended {
		t.Fatalf("second volume: %+v", got)
	}
	if _, err := db.Credit(ctx, admin, u.ID, gpuportal.CreditRequest{Amount: 10_000, Note: "top-up"}); err != nil {
		t.Fatal(err)
	}
	tick(clock.Now().Add(time.Hour))
	if got, _ := db.Volume(ctx, u, x.ID); got.Status != gpuportal.VolumeAvailable || got.DeleteAfter != nil {
		t.Errorf("after the top-up: %+v", got)
	}
}

// (issue 24) Launches mount only the owner's volumes of their region, at
// clean paths; a mounted volume is in use and cannot be deleted.
func TestVolumeMountsOnLaunches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	v, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "data", Region: "cd-1", SizeGiB: 10})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := db.CreateVolume(ctx, other, gpuportal.VolumeRequest{Name: "theirs", Region: "cd-1", SizeGiB: 10})
	if err != nil {
		t.Fatal(err)
	}
	launch := func(mounts ...gpuportal.VolumeMount) (*gpuportal.Instance, error) {
		return db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "true", Volumes: mounts})
	}
	for _, bad := range [][]gpuportal.VolumeMount{
		{{ID: theirs.ID}},
		{{ID: v.ID, MountPath: "/checkpoint"}},
		{{ID: v.ID, MountPath: "relative"}},
		{{ID: v.ID, MountPath: "/data/../etc"}},
		{{ID: v.ID}, {ID: v.ID, MountPath: "/data/two"}},
	} {
		if _, err := launch(bad...); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
			t.Errorf("launch with %+v: %v", bad, err)
		}
	}
	inst, err := launch(gpuportal.VolumeMount{ID: v.ID})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Instance(ctx, u, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Volumes) != 1 || got.Volumes[0].MountPath != "/data/data" || got.Volumes[0].Name != "data" {
		t.Errorf("instance volumes = %+v", got.Volumes)
	}
	if vol, _ := db.Volume(ctx, u, v.ID); vol.Status != gpuportal.VolumeInUse || len(vol.MountedBy) != 1 {
		t.Errorf("mounted volume = %+v", vol)
	}
	if err := db.DeleteVolume(ctx, u, v.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("delete while mounted: %v", err)
	}
	if err := db.DeleteVolume(ctx, u, theirs.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("delete another's: %v", err)
	}
	if _, err := db.Stop(ctx, u, inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteVolume(ctx, u, v.ID); err != nil {
		t.Errorf("delete after the stop: %v", err)
	}
}

// (issue 29) A deleted volume's files are removed at the nodes' next
// heartbeat, not at their next measurement: for a while every answer to
// the region's nodes names it, report or no report; after that only a
// report still holding it does.
func TestDeletedVolumesAreNamedForRemovalAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	kept, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "kept", Region: "cd-1", SizeGiB: 1})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "gone", Region: "cd-1", SizeGiB: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := db.VolumesToRemove(ctx, "n-1", nil); err != nil || len(ids) != 0 {
		t.Fatalf("before any deletion: %v %v", ids, err)
	}
	if err := db.DeleteVolume(ctx, u, gone.ID); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"n-1", "n-2"} {
		if ids, err := db.VolumesToRemove(ctx, node, nil); err != nil || !slices.Equal(ids, []int64{gone.ID}) {
			t.Errorf("%s right after the deletion, no report: %v %v, want [%d]", node, ids, err, gone.ID)
		}
	}
	both := &gpuportal.VolumeReport{Usage: []gpuportal.VolumeUsage{{ID: kept.ID, UsedBytes: 4096}, {ID: gone.ID, UsedBytes: 8192}}}
	if ids, err := db.VolumesToRemove(ctx, "n-1", both); err != nil || !slices.Equal(ids, []int64{gone.ID}) {
		t.Errorf("with a report holding it: %v %v, want it once", ids, err)
	}
	if v, err := db.Volume(ctx, u, kept.ID); err != nil || v.UsedBytes != 4096 {
		t.Errorf("the kept volume's usage = %+v %v, want the report's 4096", v, err)
	}
	clock.Advance(10 * time.Minute)
	if ids, err := db.VolumesToRemove(ctx, "n-2", nil); err != nil || len(ids) != 0 {
		t.Errorf("minutes later, no report: %v %v, want none", ids, err)
	}
	if ids, err := db.VolumesToRemove(ctx, "n-2", both); err != nil || !slices.Equal(ids, []int64{gone.ID}) {
		t.Errorf("minutes later, a report still holding it: %v %v, want [%d]", ids, err, gone.ID)
	}
}

// (issue 44, item 7) Suspended volumes are not free storage: a top-up
// that does not pay what the volume owes since its balance ran out lifts
// nothing and restarts no clock (2 TiB kept 14 days for ¥2.56 before);
// one that does is charged those hours, and the volume is lifted.
func TestSuspendedVolumeOwesItsArrears(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	admin := &gpuportal.User{Role: gpuportal.RoleAdmin}
	credit := func(amount gpuportal.Fen) {
		t.Helper()
		if _, err := db.Credit(ctx, admin, u.ID, gpuportal.CreditRequest{Amount: amount, Note: "top-up"}); err != nil {
			t.Fatal(err)
		}
	}
	credit(100)
	v, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "data", Region: "cd-1", SizeGiB: 2048}) // about 85 fen an hour
	if err != nil {
		t.Fatal(err)
	}
	tick := func(at time.Time) {
		t.Helper()
		clock.Set(at)
		if _, err := db.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	start := clock.Now()
	tick(start.Add(time.Hour))
	got, _ := db.Volume(ctx, u, v.ID)
	if got.Status != gpuportal.VolumeSuspended || got.DeleteAfter == nil {
		t.Fatalf("after the balance ran out: %+v", got)
	}
	deleteAt := *got.DeleteAfter
	charged, _ := volumeCharges(t, db, u.ID)

	// Ten days on, a fen: nothing lifted, the deadline unchanged.
	tick(start.Add(10 * 24 * time.Hour))
	b, _ := db.Balance(ctx, u)
	credit(-b.Balance + 1) // the balance at one fen
	tick(start.Add(10*24*time.Hour + time.Minute))
	tick(start.Add(10*24*time.Hour + 2*time.Hour))
	got, _ = db.Volume(ctx, u, v.ID)
	if got.Status != gpuportal.VolumeSuspended || got.DeleteAfter == nil || !got.DeleteAfter.Equal(deleteAt) {
		t.Fatalf("after a 1-fen top-up: %+v; want it suspended, to be deleted at %s still", got, deleteAt)
	}
	if now, _ := volumeCharges(t, db, u.ID); now != charged {
		t.Errorf("charged %d fen while suspended", now-charged)
	}
	// Enough to pay its arrears: charged for every hour it was kept, lifted.
	credit(50_000)
	at := start.Add(10*24*time.Hour + 3*time.Hour)
	tick(at)
	got, _ = db.Volume(ctx, u, v.ID)
	if got.Status == gpuportal.VolumeSuspended || got.DeleteAfter != nil {
		t.Fatalf("after paying: %+v", got)
	}
	hours := int(at.Sub(start.Add(time.Hour))/time.Hour) + 1
	owed, _ := gpuportal.VolumeHoursCost(2048, 30, 0, hours)
	if now, _ := volumeCharges(t, db, u.ID); now-charged < owed-gpuportal.VolumeCostPerHour(2048, 30)*2 {
		t.Errorf("arrears charged %d fen; the %d hours it was kept cost about %d", now-charged, hours, owed)
	}
	if sum, err := db.LedgerSum(ctx, u.ID); err != nil {
		t.Fatal(err)
	} else if b, _ := db.Balance(ctx, u); b.Balance != sum {
		t.Errorf("balance %s, ledger %s", b.Balance, sum)
	}
}

// (issue 44, item 2) The sessions into one volume go through one node
// while any is open: their writes share that node's account of the
// volume, so uploads in parallel cannot pass its size together. Another
// volume's go where there is least to do.
func TestVolumeSessionsMeetOnOneNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	a, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "a", Region: "cd-1", SizeGiB: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.CreateVolume(ctx, u, gpuportal.VolumeRequest{Name: "b", Region: "cd-1", SizeGiB: 1})
	if err != nil {
		t.Fatal(err)
	}
	open := func(v *gpuportal.Volume, group string) string {
		t.Helper()
		s, err := db.OpenSession(ctx, u, 0, gpuportal.SessionRequest{Kind: gpuportal.SessionVolume, VolumeID: v.ID, Group: group}, "")
		if err != nil {
			t.Fatal(err)
		}
		return s.Node
	}
	first := open(a, "g1")
	if second := open(a, "g2"); second != first {
		t.Errorf("a second session of volume a went to %s, the first to %s", second, first)
	}
	if other := open(b, "g3"); other == first {
		t.Errorf("volume b's session went to the busy node %s too", other)
	}
}
