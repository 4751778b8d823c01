package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuportal"
)

// (issue 13, exec hardened) With --exec-user the agent (as root) runs each
// workload as that user in PID and mount namespaces of its own: it is not
// root, sees only its own processes, cannot read the agent's state, and a
// stop ends every process of it — a setsid child included.
func TestExecWorkloadIsolation(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("skipping: the exec runtime isolates workloads only when the agent runs as root")
	}
	p := startPortal(t, false)
	dir := t.TempDir()
	// The workload user passes through to its checkpoint directory.
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(dir, "node")
	ckpt := filepath.Join(dir, "ckpt")
	var out struct{ Token string }
	if st := p.api("POST", "/api/v1/admin/enrollment-tokens", p.admin, `{"region":"cd-1"}`, &out); st != 201 {
		t.Fatalf("enrollment token: %d", st)
	}
	ag := startAgentProcArgs(t, p.url, out.Token, state, ckpt, "mock:dgxa100", testHeartbeat, "", "--exec-user", "65534:65534")
	if !strings.Contains(ag.output(), "not containers") {
		t.Errorf("the exec runtime did not warn:\n%s", ag.output())
	}
	marker := fmt.Sprintf("sleep %d", 7000+os.Getpid()%1000)
	probe := `d="$GPUPORTAL_CHECKPOINT_DIR"
id -u > "$d/uid"
ls /proc | grep -c '^[0-9]' > "$d/procs"
if cat ` + filepath.Join(state, "node.json") + ` > /dev/null 2>&1; then echo readable > "$d/state"; else echo refused > "$d/state"; fi
echo checkpoint > "$d/written"
setsid ` + marker + ` &
i=0; while [ $i -lt 600 ]; do i=$((i+1)); sleep 0.1; done`
	inst := launch(t, p, 1, probe, false)
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID))
	defer func() {
		if t.Failed() {
			i := p.instance(inst.ID)
			t.Logf("instance %s, error %q, log:\n%s\nagent:\n%s", i.Status, i.Error, i.LogTail, ag.output())
		}
	}()
	eventually(t, 15*time.Second, "the probe to write its findings", func() bool {
		_, err := os.Stat(filepath.Join(runDir, "written"))
		return err == nil && (hostPIDWith(marker) != 0)
	})
	read := func(name string) string {
		raw, _ := os.ReadFile(filepath.Join(runDir, name))
		return strings.TrimSpace(string(raw))
	}
	if uid := read("uid"); uid != "65534" {
		t.Errorf("the workload runs as uid %q", uid)
	}
	if n, _ := strconv.Atoi(read("procs")); n < 1 || n > 8 {
		t.Errorf("the workload sees %s processes; want only its own few", read("procs"))
	}
	if s := read("state"); s != "refused" {
		t.Errorf("the agent's state was %s to the workload", s)
	}
	var stopped gpuportal.Instance
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", &stopped)
	eventually(t, 20*time.Second, "the stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	if hostPIDWith(marker) != 0 {
		t.Fatal("the setsid child survived the stop")
	}
}
