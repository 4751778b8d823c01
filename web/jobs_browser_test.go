package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// playAgents stands in for the fleet's agents until ctx ends: every tick
// it runs what the scheduler placed, and ends each workload with exit 0
// a few minutes of business time after it started.
func playAgents(ctx context.Context, t *testing.T, e *testEnv) {
	started := map[int64]time.Time{}
	for ctx.Err() == nil {
		now := e.clock.Now().Add(time.Minute)
		e.clock.Set(now)
		if _, err := e.db.Tick(context.Background(), now); err != nil {
			t.Error(err)
			return
		}
		nodes, _ := e.db.Nodes(context.Background())
		for _, n := range nodes {
			d, _ := e.db.DesiredFor(context.Background(), n.ID)
			var reports []gpuportal.WorkloadStatus
			for _, w := range d.Workloads {
				st := gpuportal.WorkloadStatus{InstanceID: w.InstanceID, Attempt: w.Attempt, State: gpuportal.WorkloadRunning, LogTail: "frame done\n"}
				if s, ok := started[w.InstanceID]; !ok {
					started[w.InstanceID] = now
				} else if now.Sub(s) >= 3*time.Minute {
					code, end := 0, now
					st.State, st.ExitCode, st.EndedAt, st.GPUsFree = gpuportal.WorkloadExited, &code, &end, true
				}
				reports = append(reports, st)
			}
			if err := e.db.ApplyWorkloadReports(context.Background(), n.ID, reports); err != nil {
				t.Error(err)
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// (issue 14) A person submits a small job from the form and watches its
// page: the progress bar reaches 100 % without a reload, and the savings
// against on-demand appear.
func TestBrowserJobRunsToTheEnd(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "alice@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), storetest.Password),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="nav-jobs"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-form"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="job-name"]`), "frames"),
		chromedp.SetValue(chromedp.CSS(`[data-testid="job-tasks"]`), "6"),
		chromedp.SetValue(chromedp.CSS(`[data-testid="job-parallel"]`), "3"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="job-command"]`), "render --frame $GPUPORTAL_TASK_INDEX"),
		chromedp.Click(chromedp.CSS(`[data-testid="job-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="task-grid"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="job-status"]`); got != "Queued" {
		t.Fatalf("a new job is %q", got)
	}
	agents, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); playAgents(agents, t, e) }()
	defer func() { stop(); <-done }()
	waitJS(t, ctx, `document.querySelector('[data-testid="job-progress"]').value === 100`)
	waitJS(t, ctx, `!!document.querySelector('[data-testid="job-saved"]')`)
	if got := textOf(t, ctx, `[data-testid="job-status"]`); got != "Succeeded" {
		t.Fatalf("the job ended %q", got)
	}
	if saved := textOf(t, ctx, `[data-testid="job-saved"]`); !strings.HasPrefix(saved, "saved ¥") || !strings.HasSuffix(saved, "%") {
		t.Fatalf("savings line %q", saved)
	}
	if cells, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.task-cell.task-succeeded[data-status]').length`)); err != nil || cells != 6 {
		t.Fatalf("%d succeeded cells, %v", cells, err)
	}
	// A cell leads to its attempts and output.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="task-2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="attempt-1"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if log := textOf(t, ctx, `[data-testid="attempt-log"]`); log != "frame done" {
		t.Fatalf("attempt output %q", log)
	}
	// (issue 28) An attempt that did its work says so, not "stopped".
	if got := textOf(t, ctx, `[data-testid="attempt-status"]`); got != "Succeeded" {
		t.Fatalf("a successful attempt reads %q", got)
	}
}

// (issue 28) The estimate under the job form follows the fields as they
// are typed, and the cursor stays where it was.
func TestBrowserJobEstimateFollowsTheForm(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	if err := chromedp.Do(ctx, logInAs(e.srv.URL, "alice@example.com")...); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-estimate-time"]`))); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="job-estimate-time"]`); !strings.Contains(got, "3 rounds of 4 tasks") {
		t.Fatalf("first estimate %q", got)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`[data-testid="job-task-hours"]`), ""),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="job-task-hours"]`), "2"),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector('[data-testid="job-estimate-time"]').textContent.includes("About 6 h")`)
	if id, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`)); id != "job-task-hours" {
		t.Errorf("focus moved to %q while the estimate changed", id)
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`[data-testid="job-tasks"]`), ""), chromedp.SendKeys(chromedp.CSS(`[data-testid="job-tasks"]`), "x")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `!!document.querySelector('[data-testid="job-estimate-problem"]')`)
}
