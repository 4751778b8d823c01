package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// Bad job requests are 4xx with the field at fault and create nothing; a
// good one is 201 queued; another customer can neither see nor cancel it.
func TestJobAPIInputAndPrivacy(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// (issue 22, item 5) Jobs cannot flood the scheduler: the tasks a user has
// waiting or running are bounded by a quota (422 field quota), a job from
// ¥0 is 402, submitting is rate-limited (429), and a job's tasks come a
// page at a time with the total in X-Total-Count.
func TestJobsAreBounded(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	u, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	poor := storetest.MustCreatePoorUser(t, e.db, "poor@example.com", gpuportal.RoleCustomer)
	job := func(tasks int) string {
		return fmt.Sprintf(`{"name":"flood","model":"a100-80g","region":"cd-1","gpus_per_task":1,"tasks":%d,"command":"x","max_parallel":1,"kind":"spot"}`, tasks)
	}
	if st, body := e.apiCall("POST", "/api/v1/jobs", e.tokenFor(poor), job(10)); st != http.StatusPaymentRequired {
		t.Fatalf("a job from ¥0 = %d %s", st, body)
	}
	admin := &gpuportal.User{ID: 0, Role: gpuportal.RoleAdmin}
	q := storetest.TestQuotas
	q.MaxQueuedTasks = 100
	if _, err := e.db.UpdateAccount(context.Background(), admin, u.ID, store.AccountUpdate{Quotas: &q}); err != nil {
		t.Fatal(err)
	}
	st, body := e.apiCall("POST", "/api/v1/jobs", tok, job(60))
	if st != http.StatusCreated {
		t.Fatalf("a job of 60 = %d %s", st, body)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	if st, body := e.apiCall("POST", "/api/v1/jobs", tok, job(41)); st != 422 || !strings.Contains(body, `"field":"quota"`) {
		t.Fatalf("60 + 41 tasks over a quota of 100 = %d %s", st, body)
	}
	// Pages of tasks.
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/jobs/%d/tasks?limit=25&offset=50", e.srv.URL, id), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []gpuportal.JobTask
	_ = json.NewDecoder(resp.Body).Decode(&tasks)
	resp.Body.Close()
	if len(tasks) != 10 || tasks[0].Index != 50 || resp.Header.Get("X-Total-Count") != "60" {
		t.Fatalf("page of tasks: %d from %v, total %q", len(tasks), tasks, resp.Header.Get("X-Total-Count"))
	}
	if st, _ := e.apiCall("GET", fmt.Sprintf("/api/v1/jobs/%d/tasks?limit=0", id), tok, ""); st != 400 {
		t.Fatalf("limit=0 = %d", st)
	}
	// Rate: jobsPerHour an hour (quota aside).
	q.MaxQueuedTasks = 10_000
	if _, err := e.db.UpdateAccount(context.Background(), admin, u.ID, store.AccountUpdate{Quotas: &q}); err != nil {
		t.Fatal(err)
	}
	created := 2 // the job of 60 and the one over the quota count
	for ; created < jobsPerHour; created++ {
		if st, body := e.apiCall("POST", "/api/v1/jobs", tok, job(1)); st != http.StatusCreated {
			t.Fatalf("job %d = %d %s", created+1, st, body)
		}
	}
	if st, body := e.apiCall("POST", "/api/v1/jobs", tok, job(1)); st != http.StatusTooManyRequests {
		t.Fatalf("job %d in an hour = %d %s", jobsPerHour+1, st, body)
	}
	e.wall.Set(e.wall.Now().Add(time.Hour + time.Minute))
	if st, body := e.apiCall("POST", "/api/v1/jobs", tok, job(1)); st != http.StatusCreated {
		t.Fatalf("a job an hour later = %d %s", st, body)
	}
}

// (issue 28) The job form shows what the job would cost and take before
// it is submitted, and says what is missing when it cannot tell.
func TestJobEstimateBeforeSubmit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	m, err := e.db.Model(t.Context(), "a100-80g")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := e.db.Policies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	spot := pol.SpotPriceOf(*m)

	// The form's defaults: 10 one-GPU tasks, 4 at once, 1 h each.
	if p := b.get("/jobs"); !strings.Contains(p.body, "Estimated cost "+(spot*10).String()) || !strings.Contains(p.body, "About 3 h: 3 rounds of 4 tasks at once.") {
		t.Fatalf("the job form's first estimate:\n%s", p.body)
	}
	q := url.Values{"kind": {"spot"}, "model": {"a100-80g"}, "region": {"cd-1"}, "tasks": {"20"}, "gpus_per_task": {"1"},
		"max_parallel": {"4"}, "max_attempts": {"3"}, "task_hours": {"1.5"}}
	p := b.get("/jobs/estimate?" + q.Encode())
	if p.status != http.StatusOK || !strings.Contains(p.body, "Estimated cost "+(spot*30).String()) || !strings.Contains(p.body, "About 7.5 h: 5 rounds of 4 tasks at once.") ||
		!strings.Contains(p.body, "you save "+(m.ListPrice*30-spot*30).String()) || strings.Contains(p.body, "<html") {
		t.Fatalf("estimate of 20 tasks × 1.5 h = %d\n%s", p.status, p.body)
	}
	// 4 GPUs a task on a node of 8: at most 2 at once, whatever was asked.
	q.Set("gpus_per_task", "4")
	if p := b.get("/jobs/estimate?" + q.Encode()); !strings.Contains(p.body, "rounds of 2 tasks at once") {
		t.Fatalf("the region's GPUs do not bound the estimate:\n%s", p.body)
	}
	q.Set("gpus_per_task", "1")
	for field, bad := range map[string]string{"tasks": "x", "task_hours": "0", "max_parallel": "0"} {
		was := q.Get(field)
		q.Set(field, bad)
		if p := b.get("/jobs/estimate?" + q.Encode()); p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="job-estimate-problem"`) || strings.Contains(p.body, "Estimated cost") {
			t.Errorf("%s=%s: %d\n%s", field, bad, p.status, p.body)
		}
		q.Set(field, was)
	}
	q.Set("task_hours", "0")
	if p := b.get("/jobs/estimate?" + q.Encode()); !strings.Contains(p.body, "Hours per task must be more than 0") {
		t.Errorf("what is missing is not said:\n%s", p.body)
	}
	q.Set("task_hours", "0.5")
	if p := b.post("/lang", url.Values{"lang": {"zh-CN"}, "next": {"/jobs"}}); p.status != http.StatusSeeOther {
		t.Fatalf("lang = %d", p.status)
	}
	if p := b.get("/jobs/estimate?" + q.Encode()); !strings.Contains(p.body, "预估费用 "+(spot*10).String()) || !strings.Contains(p.body, "约 2.5 小时：分 5 轮") {
		t.Fatalf("the estimate in Chinese:\n%s", p.body)
	}
	// A guess never stops a submit.
	form := url.Values{"name": {"frames"}, "kind": {"spot"}, "model": {"a100-80g"}, "region": {"cd-1"}, "tasks": {"4"}, "gpus_per_task": {"1"},
		"max_parallel": {"2"}, "max_attempts": {"3"}, "command": {"render"}, "task_hours": {"lots"}}
	if p := b.post("/jobs", form); p.status != http.StatusSeeOther {
		t.Fatalf("submit with a bad guess = %d\n%s", p.status, p.body)
	}
}
