package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

func TestLaunchInputAndPrivacy(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	for _, tt := range []struct{ body, code, field string }{
		{`{"kind":"spot","model":"a100-80g","region":"cd-1","count":0,"command":"x"}`, gpuportal.EINVALID, "count"},
		{`{"kind":"spot","model":"a100-80g","region":"cd-1","count":9,"command":"x"}`, gpuportal.EINVALID, "count"},
		{`{"kind":"spot","model":"a100-80g","region":"cd-1","count":-1,"command":"x"}`, gpuportal.EINVALID, "count"},
		{`{"kind":"spot","model":"a100-80g","region":"cd-1","count":1,"command":"` + strings.Repeat("x", 8200) + `"}`, gpuportal.EINVALID, "command"},
		{`{"kind":"rented","model":"a100-80g","region":"cd-1","count":1,"command":"x"}`, gpuportal.EINVALID, "kind"},
		{`{"kind":"spot","model":"v100","region":"cd-1","count":1,"command":"x"}`, gpuportal.EINVALID, "model"},
		{`{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"x","auto_restart":true}`, gpuportal.EINVALID, "auto_restart"},
		{`{"kind":"reserved","model":"a100-80g","region":"cd-1","count":1,"command":"x"}`, gpuportal.EINVALID, "reservation_id"},
		{`{"kind":"spot","model":"a100-80g","region":"cd-1","count":"1","command":"x"}`, gpuportal.EINVALID, "count"},
		{`{"kind":"spot",`, gpuportal.EINVALID, ""},
	} {
		status, body := e.apiCall("POST", "/api/v1/instances", alice, tt.body)
		if status != http.StatusBadRequest || errorCode(t, body) != tt.code || (tt.field != "" && !strings.Contains(body, `"field":"`+tt.field+`"`)) {
			t.Errorf("launch %s = %d %s", tt.body, status, body)
		}
	}
	// No idle GPUs would survive: 409 with the reason.
	status, body := e.apiCall("POST", "/api/v1/instances", alice, `{"kind":"spot","model":"h100-80g","region":"cd-1","count":1,"command":"x"}`)
	if status != http.StatusConflict || errorCode(t, body) != gpuportal.ECAPACITY {
		t.Errorf("spot on an empty pool = %d %s", status, body)
	}
	status, body = e.apiCall("POST", "/api/v1/instances", alice, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":2,"command":"python train.py","auto_restart":true}`)
	if status != http.StatusCreated || !strings.Contains(body, `"status":"pending"`) || !strings.Contains(body, `"price_per_gpu_hour_fen":240`) {
		t.Fatalf("launch = %d %s", status, body)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	// Bob can neither see nor stop it, nor launch into Alice's reservation.
	for _, path := range []string{fmt.Sprintf("/api/v1/instances/%d", id)} {
		if st, body := e.apiCall("GET", path, bob, ""); st != http.StatusNotFound {
			t.Errorf("bob GET = %d %s", st, body)
		}
	}
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/instances/%d/stop", id), bob, ""); st != http.StatusNotFound {
		t.Errorf("bob stop = %d", st)
	}
	if _, body := e.apiCall("GET", "/api/v1/instances", bob, ""); body != "[]\n" {
		t.Errorf("bob's list = %s", body)
	}
	_, body = e.apiCall("POST", "/api/v1/reservations", alice, bookBody("a100-80g", 2, at(1, 10), at(1, 14)))
	r := decodeReservation(t, body)
	st, body := e.apiCall("POST", "/api/v1/instances", bob, fmt.Sprintf(`{"kind":"reserved","count":1,"command":"x","reservation_id":%d}`, r.ID))
	if st != http.StatusBadRequest || !strings.Contains(body, `"field":"reservation_id"`) {
		t.Errorf("bob launching into alice's reservation = %d %s", st, body)
	}
	// Alice stops her pending instance: stopped at once, nothing billed.
	st, body = e.apiCall("POST", fmt.Sprintf("/api/v1/instances/%d/stop", id), alice, "")
	if st != 200 || !strings.Contains(body, `"status":"stopped"`) || !strings.Contains(body, `"cost_fen":0`) {
		t.Errorf("stop = %d %s", st, body)
	}
	// Customers get 403 from the admin routes of this issue.
	for _, rt := range [][2]string{{"GET", "/api/v1/admin/nodes"}, {"POST", "/api/v1/admin/nodes/a-1/drain"}, {"POST", "/api/v1/admin/enrollment-tokens"},
		{"POST", fmt.Sprintf("/api/v1/admin/instances/%d/interrupt", id)}, {"POST", "/api/v1/admin/clock"}} {
		if st, _ := e.apiCall(rt[0], rt[1], alice, `{}`); st != http.StatusForbidden {
			t.Errorf("customer %s %s = %d", rt[0], rt[1], st)
		}
	}
}

func TestClockRouteOnlyWithTestClock(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	if st, body := e.apiCall("POST", "/api/v1/admin/clock", admin, `{"advance":"1h"}`); st != http.StatusNotFound {
		t.Fatalf("clock without --test-clock = %d %s", st, body)
	}
}

func TestAgentAPIAuth(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	// Registration needs a valid, unused token.
	reg := `{"enroll_token":"%s","hostname":"h1","region":"cd-1","heartbeat_seconds":10,"gpus":[{"uuid":"GPU-1","index":0,"name":"NVIDIA H100 80GB HBM3","memory_total_mib":81920}]}`
	if st, _ := e.apiCall("POST", "/api/v1/agent/register", "", fmt.Sprintf(reg, "gpe_bogus")); st != http.StatusUnauthorized {
		t.Fatalf("bogus enrollment = %d", st)
	}
	_, body := e.apiCall("POST", "/api/v1/admin/enrollment-tokens", admin, `{"region":"cd-1"}`)
	tok := decodeObject(t, body)["token"].(string)
	st, body := e.apiCall("POST", "/api/v1/agent/register", "", fmt.Sprintf(reg, tok))
	if st != http.StatusCreated {
		t.Fatalf("register = %d %s", st, body)
	}
	nodeTok := decodeObject(t, body)["node_token"].(string)
	if st, _ := e.apiCall("POST", "/api/v1/agent/register", "", fmt.Sprintf(reg, tok)); st != http.StatusUnauthorized {
		t.Fatalf("a used enrollment token = %d", st)
	}
	if st, _ := e.apiCall("POST", "/api/v1/agent/heartbeat", "gpn_bogus", `{"revision":0}`); st != http.StatusUnauthorized {
		t.Fatalf("heartbeat with a bogus node token = %d", st)
	}
	// A user's API token is not a node token.
	if st, _ := e.apiCall("POST", "/api/v1/agent/heartbeat", admin, `{"revision":0}`); st != http.StatusUnauthorized {
		t.Fatalf("heartbeat with a user token = %d", st)
	}
	st, body = e.apiCall("POST", "/api/v1/agent/heartbeat", nodeTok, `{"revision":0,"heartbeat_seconds":10,"gpus":[{"uuid":"GPU-1","healthy":true,"utilization_percent":42}],"workloads":[]}`)
	if st != 200 || !strings.Contains(body, `"workloads":[]`) {
		t.Fatalf("heartbeat = %d %s", st, body)
	}
	// A node reporting another node's workload changes nothing.
	if st, _ := e.apiCall("POST", "/api/v1/agent/events", nodeTok, `{"workloads":[{"instance_id":999,"attempt":1,"state":"exited"}]}`); st != 200 {
		t.Fatalf("events = %d", st)
	}
	if st, body := e.apiCall("POST", "/api/v1/agent/heartbeat", nodeTok, `{"revision":"x"}`); st != http.StatusBadRequest {
		t.Fatalf("malformed heartbeat = %d %s", st, body)
	}
}

func TestInstanceAndFleetPages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if p := b.get("/instances"); p.status != 200 || !strings.Contains(p.body, `data-testid="launch-form"`) || !strings.Contains(p.body, "¥2.40") ||
		!strings.Contains(p.body, "No booking in the next 90 days") {
		t.Fatalf("instances page = %d", p.status)
	}
	p := b.post("/instances", url.Values{"kind": {"spot"}, "model": {"a100-80g"}, "region": {"cd-1"}, "count": {"2"}, "command": {"python train.py"}, "auto_restart": {"true"}})
	if p.status != http.StatusSeeOther || p.location != "/instances/1" {
		t.Fatalf("launch form = %d to %q %s; want the instance's page", p.status, p.location, p.body)
	}
	list := b.get("/instances/list")
	if !strings.Contains(list.body, `data-testid="instance-1"`) || strings.Contains(list.body, "<html") {
		t.Fatalf("list fragment = %s", list.body)
	}
	if p := b.post("/instances", url.Values{"kind": {"spot"}, "model": {"a100-80g"}, "region": {"cd-1"}, "count": {"20"}, "command": {"x"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `data-testid="error-count"`) {
		t.Fatalf("bad count = %d", p.status)
	}
	if p := b.post("/instances/1/stop", nil); p.status != http.StatusSeeOther {
		t.Fatalf("stop = %d", p.status)
	}
	if p := b.get("/admin/nodes"); p.status != http.StatusForbidden {
		t.Fatalf("customer fleet page = %d", p.status)
	}
	a := e.browser()
	a.login("admin@example.com", storetest.Password)
	if p := a.get("/admin/nodes"); p.status != 200 || !strings.Contains(p.body, `data-testid="node-a-1"`) || !strings.Contains(p.body, `href="/admin/nodes/a-1"`) {
		t.Fatalf("fleet page = %d", p.status)
	}
	if p := a.get("/admin/nodes/a-1"); p.status != 200 || strings.Count(p.body, "<progress") != 8 || !strings.Contains(p.body, `data-testid="drain"`) {
		t.Fatalf("the node's page = %d", p.status)
	}
	if p := a.get("/admin/nodes/no-such"); p.status != http.StatusNotFound {
		t.Errorf("an unknown node's page = %d", p.status)
	}
	if p := a.post("/admin/nodes/a-1/drain", url.Values{"drain": {"true"}}); p.status != http.StatusSeeOther {
		t.Fatalf("drain = %d", p.status)
	}
	if n, _ := e.db.HealthyGPUs(t.Context(), "a100-80g", "cd-1"); n != 0 {
		t.Fatalf("a drained node still offers %d GPUs", n)
	}
	if p := a.get("/admin/nodes/a-1"); !strings.Contains(p.body, `data-testid="undrain"`) {
		t.Fatal("no undrain button on a draining node")
	}
	if p := a.get("/admin/nodes/table"); !strings.Contains(p.body, `data-testid="node-state">Draining`) {
		t.Fatal("the fleet's live part does not say the node drains")
	}
	a.post("/admin/nodes/a-1/drain", url.Values{"drain": {"false"}})
	if n, _ := e.db.HealthyGPUs(t.Context(), "a100-80g", "cd-1"); n != 8 {
		t.Fatalf("undrained node offers %d GPUs", n)
	}
}

// (issue 28) Customers see no node ids (the fleet is the operator's);
// admins do.
func TestNodeIDsOnlyForAdmins(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "node", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	if _, err := e.db.Launch(t.Context(), u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for who, want := range map[string]bool{"alice@example.com": false, "admin@example.com": true} {
		b := e.browser()
		b.login(who, storetest.Password)
		p := b.get("/instances/list?tab=active")
		if p.status != 200 {
			p = b.get("/instances")
		}
		if got := strings.Contains(p.body, "node-1"); got != want {
			t.Errorf("%s sees the node id: %v, want %v", who, got, want)
		}
	}
}
