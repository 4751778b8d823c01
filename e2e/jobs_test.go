package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuportal"
)

// task counts to 250 in the first wave (0.1 s a step: well past the 10 s
// notice, so an interrupted one is cut off mid-task however slow the
// machine), 30 in the others, keeping its count in its own checkpoint
// directory; on SIGTERM it saves and exits; at the end it writes its
// result file (appending, so a task done twice would show two lines).
func jobTask(results string) string {
	return `dir="$GPUPORTAL_CHECKPOINT_DIR"
n=$(cat "$dir/count" 2>/dev/null || echo 0)
echo "start $n on $CUDA_VISIBLE_DEVICES" >> "$dir/runs"
trap 'echo $n > "$dir/count"; echo "term at $n" >> "$dir/runs"; exit 0' TERM
steps=30; [ "$GPUPORTAL_TASK_INDEX" -lt 16 ] && steps=250
while [ $n -lt $steps ]; do n=$((n+1)); echo $n > "$dir/count"; sleep 0.1; done
echo "task $GPUPORTAL_TASK_INDEX of $GPUPORTAL_TASK_COUNT, job $GPUPORTAL_JOB_ID" >> ` + results + `/task-$GPUPORTAL_TASK_INDEX`
}

// (issue 14) A job of 40 tasks on spot workers, on two real agents: a
// booking interrupts two workers mid-task; in the end every task
// succeeded exactly once (40 result files, each written once), the two
// interrupted tasks resumed from their checkpoints on other GPUs, and the
// job's counts, interruptions and cost match the instances' records.
func TestJobOfFortyTasksSurvivesInterruptions(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // business time 09:30 Shanghai
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "shared-ckpt")
	results := filepath.Join(dir, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		t.Fatal(err)
	}
	p.startAgent(t, dir+"/node-1", ckpt, "mock:dgxa100", true)
	p.startAgent(t, dir+"/node-2", ckpt, "mock:dgxa100", true)
	body, _ := json.Marshal(map[string]any{"name": "forty", "model": "a100-80g", "region": "cd-1", "gpus_per_task": 1, "tasks": 40,
		"command": jobTask(results), "max_parallel": 16, "kind": "spot"})
	var job gpuportal.Job
	if st := p.api("POST", "/api/v1/jobs", p.user, string(body), &job); st != 201 || job.Status != gpuportal.JobQueued {
		t.Fatalf("submit = %d %+v", st, job)
	}
	jobNow := func() gpuportal.Job {
		var j gpuportal.Job
		p.api("GET", fmt.Sprintf("/api/v1/jobs/%d", job.ID), p.user, "", &j)
		return j
	}
	tasks := func() []gpuportal.JobTask {
		var ts []gpuportal.JobTask
		p.api("GET", fmt.Sprintf("/api/v1/jobs/%d/tasks", job.ID), p.user, "", &ts)
		return ts
	}
	taskDir := func(i int) string { return filepath.Join(ckpt, fmt.Sprintf("job-%d-task-%d", job.ID, i)) }
	// On a failure, every attempt that did not simply succeed, as the
	// portal recorded it: what a flake on a busy machine is read from.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var all []gpuportal.Instance
		p.api("GET", "/api/v1/instances?limit=500", p.user, "", &all)
		for _, i := range all {
			if i.JobID != nil && *i.JobID == job.ID && i.Status != gpuportal.InstanceStopped {
				code := "none"
				if i.ExitCode != nil {
					code = strconv.Itoa(*i.ExitCode)
				}
				t.Logf("instance %d (task %d): %s on %s %v, exit %s, error %q, interruption %+v", i.ID, *i.TaskIndex, i.Status, i.Node, i.GPUs, code, i.Error, i.Interruption)
			}
		}
		for _, task := range tasks() {
			if task.Attempts != 1 {
				t.Logf("task %d: %+v; runs %q", task.Index, task, readTrim(filepath.Join(taskDir(task.Index), "runs")))
			}
		}
	})
	eventually(t, 20*time.Second, "16 tasks to run and count", func() bool {
		j := jobNow()
		if j.Tasks.Running != 16 {
			return false
		}
		for _, task := range tasks() {
			if task.Status == gpuportal.TaskRunning {
				if n, _ := strconv.Atoi(readTrim(filepath.Join(taskDir(task.Index), "count"))); n < 3 {
					return false
				}
			}
		}
		return true
	})
	// Someone books 2 GPUs from 10:00; at 09:59 two workers get notice.
	if st := p.api("POST", "/api/v1/reservations", p.admin, `{"model":"a100-80g","region":"cd-1","count":2,"start":"2026-12-01T10:00:00+08:00","end":"2026-12-01T14:00:00+08:00"}`, nil); st != 201 {
		t.Fatalf("book = %d", st)
	}
	advance(t, p, "29m")
	var interrupted []int
	for _, task := range tasks() {
		if task.InstanceID == nil {
			continue
		}
		if i := p.instance(*task.InstanceID); i.Status == gpuportal.InstanceInterrupting {
			interrupted = append(interrupted, task.Index)
		}
	}
	if len(interrupted) != 2 {
		t.Fatalf("%d workers got notice; want 2", len(interrupted))
	}
	// 10:00: once the two have left, the reservation starts on the GPUs
	// they freed (the only idle ones), so their tasks resume elsewhere.
	eventually(t, 30*time.Second, "the two interrupted workers to leave", func() bool {
		n := 0
		for _, task := range tasks() {
			if task.Interruptions == 1 {
				n++
			}
		}
		return n == 2
	})
	advance(t, p, "1m")
	eventually(t, 150*time.Second, "the job to finish", func() bool { return jobNow().Status != gpuportal.JobRunning })
	final := jobNow()
	if final.Status != gpuportal.JobSucceeded || final.Tasks.Succeeded != 40 || final.Interruptions != 2 || final.ETA != nil {
		t.Fatalf("job at the end: %+v", final)
	}
	// Every task did its work exactly once.
	for i := range 40 {
		raw, err := os.ReadFile(filepath.Join(results, fmt.Sprintf("task-%d", i)))
		if want := fmt.Sprintf("task %d of 40, job %d\n", i, job.ID); err != nil || string(raw) != want {
			t.Errorf("result of task %d: %q, %v; want %q", i, raw, err, want)
		}
	}
	// The interrupted tasks resumed from their checkpoints, on other GPUs.
	for _, i := range interrupted {
		runs := strings.Split(readTrim(filepath.Join(taskDir(i), "runs")), "\n")
		if len(runs) != 3 || !strings.HasPrefix(runs[0], "start 0 on ") || !strings.HasPrefix(runs[1], "term at ") {
			t.Errorf("task %d runs: %q", i, runs)
			continue
		}
		saved := strings.TrimPrefix(runs[1], "term at ")
		firstGPU, secondGPU := strings.TrimPrefix(runs[0], "start 0 on "), strings.TrimPrefix(runs[2], "start "+saved+" on ")
		if saved == "0" || secondGPU == runs[2] || secondGPU == firstGPU {
			t.Errorf("task %d did not resume from its checkpoint on another GPU: %q", i, runs)
		}
	}
	// The job's figures are its instances' records.
	var all []gpuportal.Instance
	p.api("GET", "/api/v1/instances", p.user, "", &all)
	var cost gpuportal.Fen
	attempts := 0
	for _, i := range all {
		if i.JobID != nil && *i.JobID == job.ID {
			attempts++
			cost += i.Cost
		}
	}
	var taskAttempts int
	for _, task := range tasks() {
		taskAttempts += task.Attempts
	}
	if attempts != 42 || taskAttempts != 42 || cost != final.Cost || final.Cost <= 0 || final.OnDemandCost <= final.Cost {
		t.Fatalf("%d attempts (tasks say %d), instances cost %d, job cost %d, on-demand %d", attempts, taskAttempts, cost, final.Cost, final.OnDemandCost)
	}
}
