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

// checkpointer polls the metadata endpoint; on notice it records when it
// saw it and the deadline, writes a checkpoint, and on SIGTERM records the
// time and exits cleanly.
const checkpointer = `
dir="$GPUPORTAL_CHECKPOINT_DIR"
trap 'date +%s.%N > "$dir/term"; exit 0' TERM
i=0
while [ $i -lt 600 ]; do
  if [ ! -f "$dir/notice" ] && curl -sf "$GPUPORTAL_METADATA_URL/latest/meta-data/spot/instance-action" > "$dir/action"; then
    date +%s.%N > "$dir/notice"
    curl -sf "$GPUPORTAL_METADATA_URL/latest/meta-data/spot/termination-time" > "$dir/termination-time"
    echo "step $i" > "$dir/checkpoint"
  fi
  i=$((i+1))
  sleep 0.1
done`

// ignorer ignores SIGTERM (and so do its children): only SIGKILL stops it.
const ignorer = `trap '' TERM; i=0; while [ $i -lt 600 ]; do i=$((i+1)); sleep 0.1; done`

func launch(t *testing.T, p *portal, count int, command string, autoRestart bool) gpuportal.Instance {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"kind": "spot", "model": "a100-80g", "region": "cd-1", "count": count, "command": command, "auto_restart": autoRestart})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	return inst
}

func readUnix(t *testing.T, path string) time.Time {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
	if err != nil {
		t.Fatalf("%s: %q", path, raw)
	}
	return time.Unix(0, int64(f*1e9))
}

// A workload polls the metadata endpoint and checkpoints on notice; an
// interruption gives it the notice before the deadline, SIGTERM at the
// deadline; a workload that ignores SIGTERM is killed after the grace; the
// GPUs are then free.
func TestPreemptionOnTheNode(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	ag := p.startAgent(t, dir+"/node-a", ckpt, "mock:dgxa100", true)

	good := launch(t, p, 1, checkpointer, false)
	bad := launch(t, p, 1, ignorer, false)
	for _, id := range []int64{good.ID, bad.ID} {
		eventually(t, 10*time.Second, fmt.Sprintf("instance %d to run", id), func() bool { return p.instance(id).Status == gpuportal.InstanceRunning })
	}
	if g := p.instance(good.ID); g.Node != ag.nodeID || len(g.GPUs) != 1 {
		t.Fatalf("instance = %+v", g)
	}
	gpuOf := p.instance(bad.ID).GPUs[0]
	eventually(t, 10*time.Second, "the busy GPU's telemetry", func() bool {
		for _, n := range p.nodes() {
			for _, g := range n.GPUs {
				if g.UUID == gpuOf {
					return g.UtilizationPercent > 50
				}
			}
		}
		return false
	})

	var interrupted gpuportal.Instance
	for _, id := range []int64{good.ID, bad.ID} {
		if st := p.api("POST", fmt.Sprintf("/api/v1/admin/instances/%d/interrupt", id), p.admin, "", &interrupted); st != 200 || interrupted.Status != gpuportal.InstanceInterrupting {
			t.Fatalf("interrupt %d = %d %+v", id, st, interrupted)
		}
	}
	goodDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", good.ID))
	// The workload writes notice, then termination-time, then checkpoint:
	// wait for the last so the others are complete.
	eventually(t, 5*time.Second, "the notice to reach the workload", func() bool { _, err := os.Stat(filepath.Join(goodDir, "checkpoint")); return err == nil })
	// Orderings against the portal's own record of the notice, never
	// wall-clock windows: how long a busy machine takes to deliver is not
	// what this test is about.
	noticeSeen := readUnix(t, filepath.Join(goodDir, "notice"))
	record := p.instance(good.ID).Interruption
	if record == nil {
		t.Fatal("the interrupted instance has no interruption record")
	}
	if noticeSeen.Before(record.NoticeAt.Truncate(time.Second)) {
		t.Errorf("the workload saw the notice at %v, before the portal gave it at %v", noticeSeen, record.NoticeAt)
	}
	rawDeadline, _ := os.ReadFile(filepath.Join(goodDir, "termination-time"))
	deadline, err := time.Parse(time.RFC3339, strings.TrimSpace(string(rawDeadline)))
	if err != nil {
		t.Fatalf("termination-time %q: %v", rawDeadline, err)
	}
	if !noticeSeen.Before(deadline) {
		t.Errorf("notice seen at %v, after the deadline %v", noticeSeen, deadline)
	}
	if d := deadline.Sub(record.NoticeAt); !deadline.Equal(record.Deadline) || d < 9*time.Second || d > 11*time.Second {
		t.Errorf("the workload's deadline %v is %v after the notice at %v (the portal's deadline %v); want the 10 s notice", deadline, d, record.NoticeAt, record.Deadline)
	}
	var action map[string]string
	raw, _ := os.ReadFile(filepath.Join(goodDir, "action"))
	if json.Unmarshal(raw, &action) != nil || action["action"] != "terminate" || action["time"] != strings.TrimSpace(string(rawDeadline)) {
		t.Errorf("instance-action = %s", raw)
	}
	if ck, err := os.ReadFile(filepath.Join(goodDir, "checkpoint")); err != nil || !strings.HasPrefix(string(ck), "step ") {
		t.Errorf("checkpoint = %q, %v", ck, err)
	}

	eventually(t, 20*time.Second, "both instances to be interrupted", func() bool {
		return p.instance(good.ID).Status == gpuportal.InstanceInterrupted && p.instance(bad.ID).Status == gpuportal.InstanceInterrupted
	})
	// SIGTERM no earlier than the deadline (the file holds whole
	// seconds), and before the instance's end was recorded.
	term := readUnix(t, filepath.Join(goodDir, "term"))
	g := p.instance(good.ID)
	if term.Before(deadline.Add(-time.Second)) || g.EndedAt == nil || g.EndedAt.Before(term.Truncate(time.Second)) {
		t.Errorf("SIGTERM at %v: the deadline was %v, the end recorded at %v", term, deadline, g.EndedAt)
	}
	b := p.instance(bad.ID)
	if b.EndedAt == nil || b.Interruption == nil {
		t.Fatalf("ignorer = %+v", b)
	}
	// SIGKILL only after the 5 s grace (the portal records whole seconds).
	if d := b.EndedAt.Sub(b.Interruption.Deadline); d < 4*time.Second {
		t.Errorf("the ignoring workload ended %v after its deadline; want the 5 s grace first", d)
	}
	for _, inst := range []gpuportal.Instance{p.instance(good.ID), b} {
		if len(inst.GPUs) != 0 || inst.Interruption.Reason != gpuportal.ReasonAdmin {
			t.Errorf("instance %d still holds %v (reason %s)", inst.ID, inst.GPUs, inst.Interruption.Reason)
		}
	}
	// The agent's NVML check saw the GPUs empty; the telemetry agrees.
	eventually(t, 10*time.Second, "the GPU to be idle again", func() bool {
		for _, n := range p.nodes() {
			for _, g := range n.GPUs {
				if g.UUID == gpuOf {
					return g.UtilizationPercent == 0
				}
			}
		}
		return false
	})
	if tail := p.instance(good.ID).LogTail; tail != "" {
		t.Logf("log tail: %q", tail)
	}
	if !strings.Contains(ag.output(), "grace over: SIGKILL") || !strings.Contains(ag.output(), "gpus_free=true") {
		t.Errorf("agent log lacks the SIGKILL or the GPU check:\n%s", ag.output())
	}
}
