package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"gpuportal"
)

// (issue 22, item 2) Many workloads of one node stopped in one
// transaction — a cancelled job, some of its tasks still starting, some
// not yet seen by the agent — all end, and none is billed afterwards.
// Before the fix the portal dropped a stopped instance from the node's
// desired state before its exit was reported, and the agent forgot exited
// workloads the portal no longer listed: some exits were never reported,
// and those instances stayed "running", billed every minute.
func TestStoppingManyAtOnceLeavesNoGhost(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true)
	dir := t.TempDir()
	p.startAgent(t, dir+"/node", dir+"/ckpt", "mock:dgxa100", true)
	liveOf := func(job int64) (live, total int) {
		var list []gpuportal.Instance
		p.api("GET", "/api/v1/instances", p.user, "", &list)
		for _, in := range list {
			if in.JobID == nil || *in.JobID != job {
				continue
			}
			total++
			switch in.Status {
			case gpuportal.InstancePending, gpuportal.InstanceRunning, gpuportal.InstanceInterrupting:
				live++
			}
		}
		return live, total
	}
	for round := range 6 {
		body, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("round %d", round), "model": "a100-80g", "region": "cd-1", "gpus_per_task": 1, "tasks": 12,
			"command": "i=0; while [ $i -lt 6000 ]; do i=$((i+1)); sleep 0.1; done", "max_parallel": 12, "kind": "spot"})
		var job gpuportal.Job
		if st := p.api("POST", "/api/v1/jobs", p.user, string(body), &job); st != 201 {
			t.Fatalf("round %d: submit = %d", round, st)
		}
		// Every other round cancels while tasks still start (placed, not
		// yet running on the node); the others once all eight run.
		want := 1
		if round%2 == 0 {
			want = 8
		}
		eventually(t, 30*time.Second, "tasks to run", func() bool {
			var j gpuportal.Job
			p.api("GET", fmt.Sprintf("/api/v1/jobs/%d", job.ID), p.user, "", &j)
			return j.Tasks.Running >= want
		})
		if st := p.api("POST", fmt.Sprintf("/api/v1/jobs/%d/cancel", job.ID), p.user, "", nil); st != 200 {
			t.Fatalf("round %d: cancel = %d", round, st)
		}
		eventually(t, 60*time.Second, "every instance of the cancelled job to end", func() bool {
			live, _ := liveOf(job.ID)
			return live == 0
		})
	}
	var before []gpuportal.Instance
	p.api("GET", "/api/v1/instances", p.user, "", &before)
	var bal gpuportal.Balance
	p.api("GET", "/api/v1/balance", p.user, "", &bal)
	if bal.BurnPerHour != 0 {
		t.Fatalf("something still bills: %+v", bal)
	}
	advance(t, p, "30m")
	var after []gpuportal.Instance
	p.api("GET", "/api/v1/instances", p.user, "", &after)
	cost := map[int64]gpuportal.Fen{}
	for _, in := range before {
		cost[in.ID] = in.Cost
	}
	for _, in := range after {
		if in.Cost != cost[in.ID] {
			t.Errorf("instance %d (%s) billed after its stop: %s → %s", in.ID, in.Status, cost[in.ID], in.Cost)
		}
	}
	var nodes []gpuportal.Node
	p.api("GET", "/api/v1/admin/nodes", p.admin, "", &nodes)
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if !g.Healthy {
				t.Errorf("GPU %s is still held", g.UUID)
			}
		}
	}
}
