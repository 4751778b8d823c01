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

// Bad job requests are 4xx with the field at fault and create nothing; a
// good one is 201 queued; another customer can neither see nor cancel it.
func TestJobAPIInputAndPrivacy(t *testing.T) {
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	const good = `"model":"a100-80g","region":"cd-1","gpus_per_task":1,"command":"x"`
	for _, tt := range []struct{ body, field string }{
		{`{` + good + `,"tasks":0,"max_parallel":2}`, "tasks"},
		{`{` + good + `,"tasks":1000000000,"max_parallel":2}`, "tasks"},
		{`{` + good + `,"tasks":4,"max_parallel":0}`, "max_parallel"},
		{`{` + good + `,"tasks":"4","max_parallel":2}`, "tasks"},
		{`{` + good + `,"tasks":4,"max_parallel":2,"kind":"hybrid"}`, "on_demand_workers"},
		{`{"model":"v100","region":"cd-1","gpus_per_task":1,"command":"x","tasks":4,"max_parallel":2}`, "model"},
		{`{"model":"a100-80g","region":"cd-1","gpus_per_task":-1,"command":"x","tasks":4,"max_parallel":2}`, "gpus_per_task"},
		{`{` + good + `,"tasks":4,`, ""},
	} {
		status, body := e.apiCall("POST", "/api/v1/jobs", alice, tt.body)
		if status != http.StatusBadRequest || errorCode(t, body) != gpuportal.EINVALID || (tt.field != "" && !strings.Contains(body, `"field":"`+tt.field+`"`)) {
			t.Errorf("job %s = %d %s", tt.body, status, body)
		}
	}
	if _, body := e.apiCall("GET", "/api/v1/jobs", alice, ""); body != "[]\n" {
		t.Fatalf("bad requests created jobs: %s", body)
	}
	status, body := e.apiCall("POST", "/api/v1/jobs", alice, `{"name":"frames",`+good+`,"tasks":6,"max_parallel":3}`)
	if status != http.StatusCreated || !strings.Contains(body, `"status":"queued"`) || !strings.Contains(body, `"total":6`) {
		t.Fatalf("create = %d %s", status, body)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	for _, path := range []string{fmt.Sprintf("/api/v1/jobs/%d", id), fmt.Sprintf("/api/v1/jobs/%d/tasks", id)} {
		if st, _ := e.apiCall("GET", path, bob, ""); st != http.StatusNotFound {
			t.Errorf("bob GET %s = %d", path, st)
		}
	}
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/jobs/%d/cancel", id), bob, ""); st != http.StatusNotFound {
		t.Errorf("bob cancel = %d", st)
	}
	if _, body := e.apiCall("GET", "/api/v1/jobs", bob, ""); body != "[]\n" {
		t.Errorf("bob's list = %s", body)
	}
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/jobs/%d/tasks", id), alice, ""); st != 200 || strings.Count(body, `"index"`) != 6 {
		t.Errorf("tasks = %d %s", st, body)
	}
	if st, body := e.apiCall("GET", "/api/v1/jobs?limit=0", alice, ""); st != 400 || !strings.Contains(body, `"field":"limit"`) {
		t.Errorf("limit=0 = %d %s", st, body)
	}
	if st, body := e.apiCall("POST", fmt.Sprintf("/api/v1/jobs/%d/cancel", id), alice, ""); st != 200 || !strings.Contains(body, `"status":"cancelled"`) {
		t.Errorf("cancel = %d %s", st, body)
	}
}

// The form submits a job and lands on its page; a bad number is shown on
// its field, in the visitor's language.
func TestJobForm(t *testing.T) {
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	form := url.Values{"name": {"frames"}, "kind": {"spot"}, "model": {"a100-80g"}, "region": {"cd-1"}, "tasks": {"x"}, "gpus_per_task": {"1"},
		"max_parallel": {"2"}, "max_attempts": {"3"}, "command": {"render"}}
	p := b.post("/jobs", form)
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "Tasks must be a whole number.") {
		t.Fatalf("bad number = %d\n%s", p.status, p.body)
	}
	form.Set("tasks", "4")
	p = b.post("/jobs", form)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/jobs/") {
		t.Fatalf("submit = %d → %q", p.status, p.location)
	}
	p = b.get(p.location)
	if p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="task-grid"`) || strings.Count(p.body, `class="task-cell task-`) < 4 {
		t.Fatalf("after submit = %d\n%s", p.status, p.body)
	}
	if p = b.get("/jobs"); !strings.Contains(p.body, "frames") {
		t.Fatalf("the list lacks the job:\n%s", p.body)
	}
}
