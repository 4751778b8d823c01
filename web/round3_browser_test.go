package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 50, tests) The pages round 3 added, as a person clicks them, in
// English and in Chinese: Drill (a link beside Stop) and its outcome in
// the list, a checkpoint report on the instance's page, the flexible
// waitlist form under "Find a time".
func TestBrowserDrillCheckpointAndFlexibleWaitlist(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	for _, c := range []struct{ lang, email, underWay, ready, checkpoint, flexible string }{
		{gpuportal.LangEnglish, "alice@example.com", "drill under way", "last drill: ready after 4 s", "last checkpoint", "books automatically"},
		{gpuportal.LangChinese, "li@example.com", "演练中", "上次演练：", "上次检查点", "自动预订"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			owner := storetest.MustCreateUser(t, e.db, c.email, gpuportal.RoleCustomer)
			inst := runningInstance(t, e, owner, nodes[0].ID, gpuportal.KindSpot)
			ctx := chromium(t)
			steps := logInAs(e.srv.URL, c.email)
			if c.lang == gpuportal.LangChinese {
				steps = append(steps, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="dashboard"]`)))
			}
			row := fmt.Sprintf(`[data-testid="instance-%d"]`, inst.ID)
			steps = append(steps, chromedp.Navigate(e.srv.URL+"/instances"), chromedp.WaitVisible(chromedp.CSS(row+` [data-testid="drill"]`)),
				chromedp.Evaluate[chromedp.Void](`window.confirm = function () { return true; }`),
				chromedp.Click(chromedp.CSS(row+` [data-testid="drill"]`)),
				chromedp.WaitVisible(chromedp.CSS(row+` [data-testid="drill-result"]`)))
			if err := chromedp.Do(ctx, steps...); err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, ctx, row+` [data-testid="drill-result"]`); !strings.Contains(got, c.underWay) {
				t.Errorf("after Drill the list says %q", got)
			}
			// The workload reports it was ready 4 s into the drill, and a
			// checkpoint: the list and the page say so.
			i, err := e.db.Instance(t.Context(), owner, inst.ID)
			if err != nil || i.Drill == nil {
				t.Fatalf("the drill: %+v %v", i, err)
			}
			ready, at := 4.0, time.Now()
			if err := e.db.ApplyWorkloadReports(t.Context(), nodes[0].ID, []gpuportal.WorkloadStatus{{InstanceID: i.ID, Attempt: i.Attempt, State: gpuportal.WorkloadRunning,
				DrillID: i.Drill.WallAt.Unix(), DrillReadyAfterSeconds: &ready, CheckpointAt: &at}}); err != nil {
				t.Fatal(err)
			}
			waitJS(t, ctx, `(document.querySelector('`+row+` [data-testid="drill-result"]') || {textContent: ""}).textContent.includes(`+"`"+c.ready+"`"+`)`)
			if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/instances/%d", e.srv.URL, inst.ID)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="checkpoint"]`))); err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, ctx, `[data-testid="checkpoint"]`); !strings.Contains(got, c.checkpoint) {
				t.Errorf("the instance's page says %q of its checkpoint", got)
			}
			// Find a time, then wait for any window in its range.
			if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="find-form"]`)),
				chromedp.SetValue(chromedp.CSS(`[data-testid="find-count"]`), "2"),
				chromedp.Submit(chromedp.CSS(`[data-testid="find-form"]`)),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="join-flexible"]`)),
				chromedp.Click(chromedp.CSS(`[data-testid="join-flexible"]`)),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
				chromedp.Navigate(e.srv.URL+"/waitlist"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="status"]`))); err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, ctx, `main`); !strings.Contains(got, c.flexible) {
				t.Errorf("the waitlist does not show the flexible entry: %q", got)
			}
		})
	}
}
