package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 45) An admin names the region's package mirror on /admin/regions;
// a bad line is refused next to its form with what was typed kept; a
// customer sees the variables on the launch form.
func TestRegionVariablesFromThePageToTheLaunchForm(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "n", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	admin := e.browser()
	admin.login("admin@example.com", storetest.Password)
	if p := admin.get("/admin/regions"); p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="region-cd-1"`) {
		t.Fatalf("regions page = %d", p.status)
	}
	bad := admin.post("/admin/regions/cd-1/env", url.Values{"env": {"PIP_INDEX_URL=https://mirrors.example.cn/pypi/simple\nLD_PRELOAD=/x.so"}})
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "LD_PRELOAD is the platform") || !strings.Contains(bad.body, "LD_PRELOAD=/x.so") {
		t.Fatalf("a refused line = %d", bad.status)
	}
	ok := admin.post("/admin/regions/cd-1/env", url.Values{"env": {"PIP_INDEX_URL=https://mirrors.example.cn/pypi/simple\n\nHF_ENDPOINT=https://hf-mirror.example.cn"}})
	if ok.status != http.StatusSeeOther {
		t.Fatalf("save = %d %s", ok.status, ok.body)
	}
	alice := e.browser()
	alice.login("alice@example.com", storetest.Password)
	if p := alice.get("/instances"); !strings.Contains(p.body, `data-testid="region-env"`) || !strings.Contains(p.body, "PIP_INDEX_URL=https://mirrors.example.cn/pypi/simple") {
		t.Error("the launch form does not say what the region's instances get")
	}
	if p := alice.get("/admin/regions"); p.status != http.StatusForbidden {
		t.Errorf("a customer's /admin/regions = %d", p.status)
	}
}

// (issue 45) The booking form's launch sizes the instances' disk; a size
// no policy allows is refused next to the form, and nothing is booked.
func TestBookingFormSizesTheLaunchDisk(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if p := b.get("/calendar"); !strings.Contains(p.body, `data-testid="launch-disk-gib"`) && !strings.Contains(b.get("/calendar/quote?model=a100-80g&region=cd-1&count=1&start=2026-12-01T10:00&end=2026-12-01T14:00").body, `launch_disk_gib`) {
		t.Error("the booking form offers no disk size")
	}
	form := url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "count": {"1"}, "start": {"2026-12-01T10:00"}, "end": {"2026-12-01T14:00"},
		"launch": {"machine"}, "launch_disk_gib": {"5000"}}
	if p := b.post("/reservations", form); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "A disk is 1 to 500 GiB") {
		t.Fatalf("a 5000 GiB disk = %d", p.status)
	}
	form.Set("launch_disk_gib", "120")
	if p := b.post("/reservations", form); p.status != http.StatusSeeOther {
		t.Fatalf("book = %d %s", p.status, p.body)
	}
	list, err := e.db.Reservations(t.Context(), alice, store.ReservationFilter{})
	if err != nil || len(list) != 1 || list[0].Launch == nil || list[0].Launch.DiskGiB == nil || *list[0].Launch.DiskGiB != 120 {
		t.Fatalf("reservations = %+v %v", list, err)
	}
}

// (issue 46) From the instance's page: Stop with "keep its disk" ticked,
// then Start and Release for the stopped instance.
func TestInstancePageKeepsStartsAndReleasesTheDisk(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	ctx := t.Context()
	inst, err := e.db.Launch(ctx, alice, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Tick(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	run := func(st gpuportal.WorkloadStatus) {
		t.Helper()
		i, _ := e.db.Instance(ctx, alice, inst.ID)
		st.InstanceID, st.Attempt = i.ID, i.Attempt
		if err := e.db.ApplyWorkloadReports(ctx, nodes[0].ID, []gpuportal.WorkloadStatus{st}); err != nil {
			t.Fatal(err)
		}
	}
	run(gpuportal.WorkloadStatus{State: gpuportal.WorkloadRunning, Disk: &gpuportal.WorkloadDisk{UsedBytes: 1 << 30, Enforced: true}})
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	page := b.get(fmt.Sprintf("/instances/%d", inst.ID))
	if !strings.Contains(page.body, `data-testid="keep-disk"`) || !strings.Contains(page.body, `data-testid="stop"`) {
		t.Fatal("the running instance's page offers no stop that keeps the disk")
	}
	if p := b.post(fmt.Sprintf("/instances/%d/stop", inst.ID), url.Values{"keep_disk": {"true"}}); p.status != http.StatusSeeOther {
		t.Fatalf("stop = %d", p.status)
	}
	code := 0
	run(gpuportal.WorkloadStatus{State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true})
	page = b.get(fmt.Sprintf("/instances/%d", inst.ID))
	if !strings.Contains(page.body, `data-testid="kept-disk"`) || !strings.Contains(page.body, `data-testid="start"`) || !strings.Contains(page.body, `data-testid="release-disk"`) {
		t.Fatalf("the stopped instance's page: %s", page.body)
	}
	if list := b.get("/instances/list?tab=ended"); !strings.Contains(list.body, `data-testid="disk-kept"`) && !strings.Contains(b.get("/instances/list").body, `data-testid="disk-kept"`) {
		t.Error("the list does not say the disk is kept")
	}
	if p := b.post(fmt.Sprintf("/instances/%d/start", inst.ID), nil); p.status != http.StatusSeeOther {
		t.Fatalf("start = %d", p.status)
	}
	if i, _ := e.db.Instance(ctx, alice, inst.ID); i.Status != gpuportal.InstancePending {
		t.Fatalf("after Start: %s", i.Status)
	}
	if p := b.post(fmt.Sprintf("/instances/%d/release", inst.ID), nil); p.status != http.StatusSeeOther || !strings.Contains(b.get(p.location).body, "stop it first") {
		t.Errorf("release while pending = %d", p.status)
	}
}

// (issue 46) The booking form offers to resume a stopped instance with its
// kept disk at the start, and books it so.
func TestBookingFormResumesAStoppedInstance(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	ctx := t.Context()
	inst, err := e.db.Launch(ctx, alice, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Tick(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	report := func(st gpuportal.WorkloadStatus) {
		t.Helper()
		i, _ := e.db.Instance(ctx, alice, inst.ID)
		st.InstanceID, st.Attempt = i.ID, i.Attempt
		if err := e.db.ApplyWorkloadReports(ctx, nodes[0].ID, []gpuportal.WorkloadStatus{st}); err != nil {
			t.Fatal(err)
		}
	}
	report(gpuportal.WorkloadStatus{State: gpuportal.WorkloadRunning, Disk: &gpuportal.WorkloadDisk{UsedBytes: 1 << 30, Enforced: true}})
	if _, err := e.db.StopWith(ctx, alice, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	code := 0
	report(gpuportal.WorkloadStatus{State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true})
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	q := b.get("/calendar/quote?model=a100-80g&region=cd-1&count=1&start=2026-12-02T10:00&end=2026-12-02T14:00")
	if !strings.Contains(q.body, `data-testid="launch-resume"`) || !strings.Contains(q.body, fmt.Sprintf(`value="%d"`, inst.ID)) {
		t.Fatalf("the quote panel offers no resume: %s", q.body)
	}
	form := url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "count": {"1"}, "start": {"2026-12-02T10:00"}, "end": {"2026-12-02T14:00"},
		"launch": {"resume"}, "launch_resume": {fmt.Sprint(inst.ID)}}
	if p := b.post("/reservations", form); p.status != http.StatusSeeOther {
		t.Fatalf("book = %d %s", p.status, p.body)
	}
	list, err := e.db.Reservations(ctx, alice, store.ReservationFilter{})
	if err != nil || len(list) != 1 || list[0].Launch == nil || list[0].Launch.ResumeInstanceID == nil || *list[0].Launch.ResumeInstanceID != inst.ID {
		t.Fatalf("reservations = %+v %v", list, err)
	}
}

// (issue 46) A start whose GPUs are not free is 409 capacity_unavailable
// with what could be booked for it instead (the nearest windows, and the
// most GPUs free), as a full booking's is.
func TestStartWithoutRoomOffersBookings(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	bob := storetest.MustCreateUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	ctx := t.Context()
	inst, err := e.db.Launch(ctx, alice, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Tick(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	i, _ := e.db.Instance(ctx, alice, inst.ID)
	if err := e.db.ApplyWorkloadReports(ctx, nodes[0].ID, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadRunning,
		Disk: &gpuportal.WorkloadDisk{UsedBytes: 1 << 30, Enforced: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.StopWith(ctx, alice, inst.ID, gpuportal.StopOptions{KeepDisk: true}); err != nil {
		t.Fatal(err)
	}
	code := 0
	if err := e.db.ApplyWorkloadReports(ctx, nodes[0].ID, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Launch(ctx, bob, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 8}); err != nil {
		t.Fatal(err)
	}
	status, body := e.apiCall("POST", fmt.Sprintf("/api/v1/instances/%d/start", inst.ID), e.tokenFor(alice), "")
	// (Bob's on-demand GPUs hold the only node from now on: no window
	// opens, and the answer says so with most_free.)
	if status != http.StatusConflict || errorCode(t, body) != gpuportal.ECAPACITY || !strings.Contains(body, `"most_free":`) {
		t.Fatalf("start on a full fleet = %d %s", status, body)
	}
}
