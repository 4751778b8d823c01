package web

import (
	"context"
	"fmt"
	stdhtml "html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 23) A running instance's page: its cost, and its GPUs'
// utilisation and memory over its life as a chart from the samples the
// ticks take; another customer gets 404.
func TestInstancePageChartsItsGPUs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "h", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	storetest.MustCreateUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	inst, err := e.db.Launch(ctx, alice, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "train"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := e.clock.Now()
	if _, err := e.db.Tick(ctx, t0); err != nil {
		t.Fatal(err)
	}
	d, _ := e.db.DesiredFor(ctx, nodes[0].ID)
	if err := e.db.ApplyWorkloadReports(ctx, nodes[0].ID, []gpuportal.WorkloadStatus{{InstanceID: inst.ID, Attempt: d.Workloads[0].Attempt, State: gpuportal.WorkloadRunning}}); err != nil {
		t.Fatal(err)
	}
	for k, util := range []int{10, 90, 55} {
		hb := gpuportal.AgentHeartbeat{HeartbeatSeconds: 10, Workloads: []gpuportal.WorkloadStatus{{InstanceID: inst.ID, Attempt: d.Workloads[0].Attempt, State: gpuportal.WorkloadRunning}}}
		for _, g := range nodes[0].GPUs {
			hb.GPUs = append(hb.GPUs, gpuportal.GPUSample{UUID: g.UUID, Healthy: true, UtilizationPercent: util, MemoryUsedMiB: 1000 * (k + 1)})
		}
		if _, err := e.db.RecordHeartbeat(ctx, nodes[0].ID, hb, e.wall.Now()); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Duration(k+1) * 5 * time.Minute)
		e.clock.Set(at)
		if _, err := e.db.Tick(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	samples, err := e.db.InstanceSamples(ctx, alice, inst.ID)
	// The first tick placed it (its GPUs idle), then one sample every 5 min.
	if err != nil || len(samples) != 4 || samples[2].UtilizationPercent != 90 || samples[3].MemoryUsedMiB != 2*3000 {
		t.Fatalf("samples = %+v, %v", samples, err)
	}
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	page := b.get(fmt.Sprintf("/instances/%d", inst.ID))
	if page.status != http.StatusOK || !strings.Contains(page.body, `data-testid="util-line"`) || !strings.Contains(page.body, `data-testid="cost"`) {
		t.Fatalf("instance page = %d", page.status)
	}
	// (issue 50, item 3) The chart has its axes' values, and each GPU's
	// figures now are beside it (refreshed while it runs).
	for _, want := range []string{`data-testid="chart-axes"`, ">100%<", ">0%<", ">160 GiB<", `data-testid="gpus-now"`, `data-testid="gpu-now-0"`, "55%", "2.9 of 80 GiB"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the running instance's page lacks %q", want)
		}
	}
	if live := b.get(fmt.Sprintf("/instances/%d/live?part=gpus", inst.ID)); live.status != http.StatusOK || !strings.Contains(live.body, `data-testid="gpu-now-1"`) || !strings.Contains(live.body, "every 5s") {
		t.Errorf("the live GPUs = %d %s", live.status, live.body)
	}
	// (issue 45) Its disk, with a bar of how full it is.
	if !strings.Contains(page.body, `data-testid="instance-disk"`) || !strings.Contains(page.body, "of 50 GiB used") {
		t.Error("the page does not show the instance's disk")
	}
	// Connect: the terminal and "Open port"; this portal runs no SSH
	// gateway, so no ssh line (and GET /ssh says so).
	if !strings.Contains(page.body, `data-testid="open-terminal"`) || !strings.Contains(page.body, `data-testid="open-port"`) || strings.Contains(page.body, `data-testid="ssh-line"`) {
		t.Error("the owner's page lacks Connect (or shows an ssh line without a gateway)")
	}
	if st, _ := e.apiCall("GET", "/api/v1/ssh", e.tokenFor(alice), ""); st != http.StatusNotFound {
		t.Errorf("GET /ssh without a gateway = %d", st)
	}
	admin := e.browser()
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	admin.login("admin@example.com", storetest.Password)
	if p := admin.get(fmt.Sprintf("/instances/%d", inst.ID)); p.status != http.StatusOK || strings.Contains(p.body, `data-testid="connect"`) {
		t.Errorf("an admin's view of a customer's instance offers Connect (%d)", p.status)
	}
	if p := admin.get(fmt.Sprintf("/instances/%d/terminal", inst.ID)); p.status != http.StatusForbidden {
		t.Errorf("an admin opens a customer's terminal page: %d", p.status)
	}
	if list := b.get("/instances"); !strings.Contains(list.body, fmt.Sprintf(`href="/instances/%d"`, inst.ID)) {
		t.Error("the instances list does not link to the page")
	}
	_, token := e.apiToken("carol@example.com", gpuportal.RoleCustomer)
	if st, _ := e.apiCall("GET", fmt.Sprintf("/api/v1/instances/%d/samples", inst.ID), token, ""); st != http.StatusNotFound {
		t.Errorf("carol reads alice's samples: %d", st)
	}
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/instances/%d/samples", inst.ID), e.tokenFor(alice), ""); st != http.StatusOK || strings.Count(body, `"utilization_percent"`) != 4 {
		t.Errorf("alice's samples = %d %s", st, body)
	}
	bob := e.browser()
	bob.login("bob@example.com", storetest.Password)
	if p := bob.get(fmt.Sprintf("/instances/%d", inst.ID)); p.status != http.StatusNotFound {
		t.Errorf("bob sees alice's instance page: %d", p.status)
	}
}

// (issue 50, item 2) Without an SSH key the instance page says so, links
// to where keys are added and offers the web terminal; the ssh line has a
// copy button; the launch form warns before the launch. With a key, no
// warnings.
func TestNoSSHKeyIsSaidBeforeItBites(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.with(func(c *Config) { c.SSH = SSHEndpoint{Host: "127.0.0.1", Port: 2222, Fingerprint: "SHA256:test"} })
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	inst := runningInstance(t, e, alice, nodes[0].ID, gpuportal.KindOnDemand)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	page := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body
	for _, want := range []string{`data-testid="no-ssh-key"`, `href="/settings#ssh-keys"`, `data-testid="open-terminal"`, `data-testid="copy-ssh"`, `data-copy="#ssh-line"`} {
		if !strings.Contains(page, want) {
			t.Errorf("without a key the page lacks %s", want)
		}
	}
	if form := b.get("/instances").body; !strings.Contains(form, `data-testid="launch-no-key"`) {
		t.Error("the launch form does not warn that there is no key")
	}
	line, _ := keygen(t, "-t", "ed25519")
	if st, body := e.apiCall("POST", "/api/v1/ssh-keys", tok, fmt.Sprintf(`{"public_key":%q}`, line)); st != http.StatusCreated {
		t.Fatalf("add a key = %d %s", st, body)
	}
	if page := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body; strings.Contains(page, `data-testid="no-ssh-key"`) || !strings.Contains(page, `data-testid="ssh-line"`) {
		t.Error("with a key the page still warns, or has no ssh line")
	}
	if form := b.get("/instances").body; strings.Contains(form, `data-testid="launch-no-key"`) {
		t.Error("with a key the launch form still warns")
	}
}

// (issue 50, item 1) The on-demand minimum billable time is said before
// it bills: on the launch form, beside the running cost ("… minimum") on
// the page and in the list, and in the Stop confirmation — until the run
// is older than the minimum.
func TestOnDemandMinimumIsSaidBeforeTheStop(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	ctx := t.Context()
	inst := runningInstance(t, e, alice, nodes[0].ID, gpuportal.KindOnDemand)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if form := b.get("/instances?kind=on_demand").body; !strings.Contains(form, `data-testid="on-demand-minimum"`) || !strings.Contains(form, "at least 60 minutes") {
		t.Error("the launch form does not say the on-demand minimum")
	}
	page := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body
	if !strings.Contains(page, `data-testid="minimum"`) || !strings.Contains(page, "¥8.00 minimum") || !strings.Contains(page, "still bills the 60-minute minimum: ¥8.00") {
		t.Errorf("a young on-demand run's page does not say its minimum: %s", page)
	}
	if list := b.get("/instances/list").body; !strings.Contains(list, "¥8.00 minimum") || !strings.Contains(list, "still bills the 60-minute minimum") {
		t.Error("the list does not say the minimum")
	}
	st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/instances/%d", inst.ID), e.tokenFor(alice), "")
	if st != 200 || !strings.Contains(body, `"minimum_charge_fen":800`) || !strings.Contains(body, `"minimum_minutes":60`) {
		t.Errorf("the API = %d %s", st, body)
	}
	// (issue 50, item 3) The page's status and cost refresh themselves
	// while it runs.
	if !strings.Contains(page, fmt.Sprintf(`hx-get="/instances/%d/live?part=status"`, inst.ID)) || !strings.Contains(page, fmt.Sprintf(`hx-get="/instances/%d/live?part=cost"`, inst.ID)) {
		t.Error("the running instance's page does not refresh its status and cost")
	}
	e.clock.Set(e.clock.Now().Add(61 * time.Minute))
	if page := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body; strings.Contains(page, `data-testid="minimum"`) || strings.Contains(page, "still bills") {
		t.Error("past the minimum the page still says it")
	}
	if live := b.get(fmt.Sprintf("/instances/%d/live?part=cost", inst.ID)); live.status != http.StatusOK || !strings.Contains(live.body, "¥8.1") || !strings.Contains(live.body, "every 5s") {
		t.Errorf("the live cost = %d %s", live.status, live.body)
	}
	if live := b.get(fmt.Sprintf("/instances/%d/live?part=everything", inst.ID)); live.status != http.StatusBadRequest {
		t.Errorf("an unknown live part = %d", live.status)
	}
	if _, err := e.db.Stop(ctx, alice, inst.ID); err != nil {
		t.Fatal(err)
	}
	code := 0
	i, _ := e.db.Instance(ctx, alice, inst.ID)
	if err := e.db.ApplyWorkloadReports(ctx, nodes[0].ID, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true}}); err != nil {
		t.Fatal(err)
	}
	if live := b.get(fmt.Sprintf("/instances/%d/live?part=status", inst.ID)); !strings.Contains(live.body, "stopped") || strings.Contains(live.body, "every 5s") {
		t.Errorf("an ended instance's status still polls: %s", live.body)
	}
	// (issue 50, item 3) Ended: from–to, what it cost, and Launch again
	// with the same spec.
	ended := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body
	if !strings.Contains(ended, `data-testid="ended"`) || !strings.Contains(ended, "charged ¥") || !strings.Contains(ended, `data-testid="launch-again"`) {
		t.Fatalf("the ended instance's page: %s", ended)
	}
	m := regexp.MustCompile(`href="(/instances\?[^"]*)" data-testid="launch-again"`).FindStringSubmatch(ended)
	if m == nil {
		t.Fatal("no Launch again link")
	}
	again := b.get(stdhtml.UnescapeString(m[1])).body
	if !strings.Contains(again, `<option value="on_demand" selected`) || !strings.Contains(again, `value="a100-80g" selected`) {
		t.Errorf("Launch again does not fill the form as it was launched")
	}
}

// (issue 50, item 3) An interruption notice shows on the instance's page
// as a banner with its time and reason, not only as a notification.
func TestInterruptionBannerOnTheInstancePage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	admin := storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	ctx := t.Context()
	inst := runningInstance(t, e, alice, nodes[0].ID, gpuportal.KindSpot)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if page := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body; strings.Contains(page, `data-testid="interruption-banner"`) {
		t.Error("a banner before any notice")
	}
	if _, err := e.db.AdminInterrupt(ctx, admin, inst.ID); err != nil {
		t.Fatal(err)
	}
	if page := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body; !strings.Contains(page, `data-testid="interruption-banner"`) || !strings.Contains(page, "an administrator") {
		t.Errorf("no banner with its reason after the notice: %s", page)
	}
}

// runningInstance launches a 1-GPU instance of kind for owner and has its
// node say it runs.
func runningInstance(t *testing.T, e *testEnv, owner *gpuportal.User, node string, kind gpuportal.InstanceKind) *gpuportal.Instance {
	t.Helper()
	ctx := t.Context()
	inst, err := e.db.Launch(ctx, owner, gpuportal.LaunchRequest{Kind: kind, Model: "a100-80g", Region: "cd-1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Tick(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	i, _ := e.db.Instance(ctx, owner, inst.ID)
	if err := e.db.ApplyWorkloadReports(ctx, node, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadRunning}}); err != nil {
		t.Fatal(err)
	}
	return i
}

// reportExit has an instance's node say its workload exited with code.
func reportExit(t *testing.T, e *testEnv, node string, inst *gpuportal.Instance, code int) {
	t.Helper()
	i, err := e.db.Instance(t.Context(), &gpuportal.User{Role: gpuportal.RoleAdmin}, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.ApplyWorkloadReports(t.Context(), node, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadExited, ExitCode: &code, GPUsFree: true}}); err != nil {
		t.Fatal(err)
	}
}

// (issue 50, item 1) Every charge is said where it happens, in both
// languages: a run that failed says what it was charged and why; a full
// window's waitlist says what an auto-book charges and when, and how long
// a plain offer is held; Extend offers only what the balance pays for and
// says what a top-up would add.
func TestChargesAreSaidWhereTheyHappen(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	ctx := t.Context()
	inst := runningInstance(t, e, alice, nodes[0].ID, gpuportal.KindOnDemand)
	e.clock.Set(e.clock.Now().Add(3 * time.Minute))
	reportExit(t, e, nodes[0].ID, inst, 2)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	for _, c := range []struct{ lang, why, charge string }{
		{"en", "It failed: the command exited with status 2.", "no minimum applies to a run that failed"},
		{"zh-CN", "运行失败：命令以状态码 2 退出。", "失败的运行不适用最低计费"},
	} {
		b.post("/lang", url.Values{"lang": {c.lang}, "next": {"/"}})
		page := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body
		if !strings.Contains(page, `data-testid="failed-why"`) || !strings.Contains(page, c.why) || !strings.Contains(page, c.charge) || !strings.Contains(page, "¥0.40") {
			t.Errorf("%s: the failed run's page does not say why and what it cost:\n%s", c.lang, page)
		}
	}
	b.post("/lang", url.Values{"lang": {"en"}, "next": {"/"}})

	// A full window: what an auto-book charges, when, and the claim window.
	if st, body := e.apiCall("POST", "/api/v1/reservations", e.tokenFor(alice), bookBody("a100-80g", 2, at(1, 10), at(1, 14))); st != http.StatusCreated {
		t.Fatalf("book = %d %s", st, body)
	}
	full := b.post("/reservations", url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "count": {"7"}, "start": {at(1, 10)}, "end": {at(1, 14)}})
	if full.status != http.StatusConflict || !strings.Contains(full.body, `data-testid="waitlist-terms"`) || !strings.Contains(full.body, "¥224.00 at today") ||
		!strings.Contains(full.body, "have 30 minutes to claim it") {
		t.Errorf("the full window's waitlist terms = %d:\n%s", full.status, full.body)
	}

	// Extend: only what ¥20.00 pays for (2 h at ¥8.00), then a top-up.
	bob := storetest.MustCreatePoorUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	if _, err := e.db.Credit(ctx, nil, bob.ID, gpuportal.CreditRequest{Amount: 52_00, Note: "grant"}); err != nil {
		t.Fatal(err)
	}
	r, err := e.db.Book(ctx, bob, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: mustTime(t, at(2, 10)), End: mustTime(t, at(2, 14))})
	if err != nil {
		t.Fatal(err)
	}
	bb := e.browser()
	bb.login("bob@example.com", storetest.Password)
	page := bb.get(fmt.Sprintf("/reservations/%d", r.ID)).body
	if n := strings.Count(page[strings.Index(page, `data-testid="extend-hours"`):], "<option "); n != 2 {
		t.Errorf("the extend form offers %d choices, want the 2 the balance pays for", n)
	}
	if !strings.Contains(page, `data-testid="extend-topup"`) || !strings.Contains(page, "+3 h would cost ¥24.00 and you have ¥20.00 available.") {
		t.Errorf("the extend form does not say what a top-up adds:\n%s", page[strings.Index(page, `id="extend"`):])
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// (issue 50, item 1) After the stop: an on-demand run stopped within its
// first hour says, on its page and on its ledger line, that it was billed
// as the minimum; the landing page qualifies "per started minute".
func TestMinimumIsSaidAfterTheStop(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	if landing := e.browser().get("/").body; !strings.Contains(landing, "An on-demand run is billed at least 60 minutes") {
		t.Error("the landing page does not qualify per started minute")
	}
	ctx := t.Context()
	inst := runningInstance(t, e, alice, nodes[0].ID, gpuportal.KindOnDemand)
	e.clock.Set(e.clock.Now().Add(2 * time.Minute))
	if _, err := e.db.Stop(ctx, alice, inst.ID); err != nil {
		t.Fatal(err)
	}
	reportExit(t, e, nodes[0].ID, inst, 0)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if page := b.get(fmt.Sprintf("/instances/%d", inst.ID)).body; !strings.Contains(page, `data-testid="minimum-applied"`) || !strings.Contains(page, "billed as 60 minutes") || !strings.Contains(page, "¥8.00") {
		t.Errorf("the ended page does not say the minimum applied:\n%s", page)
	}
	if ledger := b.get("/ledger").body; !strings.Contains(ledger, "(billed as the 60-minute on-demand minimum)") {
		t.Error("the ledger line does not say the minimum applied")
	}
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/instances/%d", inst.ID), e.tokenFor(alice), ""); st != 200 || !strings.Contains(body, `"minimum_applied_minutes":60`) {
		t.Errorf("the API = %d %s", st, body)
	}
}
