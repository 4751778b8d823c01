package web

import (
	"fmt"
	stdhtml "html"
	"net/http"
	"net/url"
	"regexp"
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

// (issue 46) From the instance's page: Stop with "keep its disk" ticked
// (it says what that costs a day), lands on the page again, which offers
// a start with any count up to the largest node or with no GPU, and the
// nearest windows to book its resume; the list says the disk is kept and
// its price a day; Start in no-GPU mode; Release refused while it runs.
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
	// (50 GiB at 30 fen a GiB-month: ¥0.50 a day kept.)
	if !strings.Contains(page.body, "¥0.50") {
		t.Error("the stop does not say what keeping the disk costs a day")
	}
	p := b.post(fmt.Sprintf("/instances/%d/stop", inst.ID), url.Values{"keep_disk": {"true"}})
	if p.status != http.StatusSeeOther || p.location != fmt.Sprintf("/instances/%d", inst.ID) {
		t.Fatalf("stop = %d to %q, want the instance's page (its next steps)", p.status, p.location)
	}
	code := 0
	run(gpuportal.WorkloadStatus{State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true})
	page = b.get(fmt.Sprintf("/instances/%d", inst.ID))
	for _, want := range []string{`data-testid="kept-disk"`, `data-testid="start"`, `data-testid="release-disk"`, `data-testid="start-count"`, `<option value="0"`,
		`<option value="8"`, `data-testid="resume-on-book"`, fmt.Sprintf(`name="launch_resume" value="%d"`, inst.ID)} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("the stopped instance's page lacks %s: %s", want, page.body)
		}
	}
	if strings.Contains(page.body, `<option value="9"`) {
		t.Error("a start is offered more GPUs than the largest node has")
	}
	list := b.get("/instances/list?tab=ended").body + b.get("/instances/list").body
	if !strings.Contains(list, `data-testid="disk-kept"`) || !strings.Contains(list, "¥0.50") {
		t.Error("the list does not say the disk is kept, and what it costs a day")
	}
	// Book its resume from the page: the first window offered.
	form := url.Values{}
	start := strings.Index(page.body, `data-testid="resume-on"`)
	for _, name := range []string{"model", "region", "count", "start", "end", "launch", "launch_resume"} {
		form.Set(name, hiddenValue(t, page.body[start:], name))
	}
	if p := b.post("/reservations", form); p.status != http.StatusSeeOther {
		t.Fatalf("book its resume = %d %s", p.status, p.body)
	}
	if list, err := e.db.Reservations(ctx, alice, store.ReservationFilter{}); err != nil || len(list) != 1 || list[0].Launch == nil ||
		list[0].Launch.ResumeInstanceID == nil || *list[0].Launch.ResumeInstanceID != inst.ID {
		t.Fatalf("reservations = %+v %v", list, err)
	}
	if p := b.post(fmt.Sprintf("/instances/%d/start", inst.ID), url.Values{"count": {"9"}}); p.status != http.StatusSeeOther || !strings.Contains(b.get(p.location).body, "GPUs of one node") {
		t.Errorf("a start on 9 GPUs = %d", p.status)
	}
	if p := b.post(fmt.Sprintf("/instances/%d/start", inst.ID), url.Values{"count": {"0"}}); p.status != http.StatusSeeOther {
		t.Fatalf("start = %d", p.status)
	}
	if i, _ := e.db.Instance(ctx, alice, inst.ID); i.Status != gpuportal.InstancePending || i.Count != 0 || i.PricePerGPU != 10 {
		t.Fatalf("after Start with no GPU: %s on %d GPUs at %d fen", i.Status, i.Count, i.PricePerGPU)
	}
	if page := b.get(fmt.Sprintf("/instances/%d", inst.ID)); !strings.Contains(page.body, `data-testid="no-gpu"`) || !strings.Contains(page.body, "¥0.10/hour") {
		t.Error("the page does not say plainly that it runs with no GPU, and its price")
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

// hiddenValue is the value of the first hidden input named name in html.
func hiddenValue(t *testing.T, html, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<input type="hidden" name="` + regexp.QuoteMeta(name) + `" value="([^"]*)"`).FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no hidden input %q", name)
	}
	return stdhtml.UnescapeString(m[1])
}
