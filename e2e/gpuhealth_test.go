package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuportal"
)

// (issue 49) Real agents, faults raised the way a GPU raises them
// (--mock-faults through the mocks' NVML event set): XID 13 under a
// running spot instance changes nothing; XID 79 ends it with reason
// gpu_failure, credits its owner, and its auto-restart runs again on
// healthy GPUs while capacity is 15 of 16; the GPU's return is refused
// while the node still reports the fault and works once it was reset.
func TestGPUFailureUnderARunningInstance(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	dir := t.TempDir()
	faults := []string{filepath.Join(dir, "faults-a.json"), filepath.Join(dir, "faults-b.json")}
	for k, f := range faults {
		token := ""
		var out struct{ Token string }
		if st := p.api("POST", "/api/v1/admin/enrollment-tokens", p.admin, `{"region":"cd-1"}`, &out); st != 201 {
			t.Fatalf("enrollment token: %d", st)
		}
		token = out.Token
		node := filepath.Join(dir, fmt.Sprintf("node-%d", k))
		startAgentProcArgs(t, p.url, token, node, filepath.Join(dir, "ckpt"), "mock:dgxa100", "1s", "", "--mock-faults", f)
	}
	eventually(t, 20*time.Second, "two nodes online", func() bool { return len(p.nodes()) == 2 })
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":8,"command":"sleep 3600","auto_restart":true}`, &inst); st != 201 {
		t.Fatalf("launch: %d", st)
	}
	eventually(t, 30*time.Second, "the instance running", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceRunning })
	running := p.instance(inst.ID)
	gpuIndex, fault := -1, ""
	for _, n := range p.nodes() {
		for _, g := range n.GPUs {
			if g.UUID == running.GPUs[0] {
				gpuIndex, fault = g.Index, faults[0]
				if n.Hostname != "node-0" {
					fault = faults[1]
				}
			}
		}
	}
	write := func(v string) {
		if err := os.WriteFile(fault, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	healthy := func() int {
		n := 0
		for _, nd := range p.nodes() {
			for _, g := range nd.GPUs {
				if g.Healthy {
					n++
				}
			}
		}
		return n
	}

	write(fmt.Sprintf(`[{"gpu":%d,"xid":13}]`, gpuIndex))
	time.Sleep(3 * time.Second) // three heartbeats: nothing may change
	if st := p.instance(inst.ID).Status; st != gpuportal.InstanceRunning || healthy() != 16 {
		t.Fatalf("after XID 13: %s, %d healthy", st, healthy())
	}

	write(fmt.Sprintf(`[{"gpu":%d,"xid":13},{"gpu":%d,"xid":79}]`, gpuIndex, gpuIndex))
	eventually(t, 20*time.Second, "the instance restarted after its GPU failed", func() bool { return p.instance(inst.ID).Restarts == 1 })
	if healthy() != 15 {
		t.Fatalf("%d GPUs healthy after one failed", healthy())
	}
	eventually(t, 30*time.Second, "the restart running on healthy GPUs", func() bool {
		i := p.instance(inst.ID)
		return i.Status == gpuportal.InstanceRunning && len(i.GPUs) == 8 && i.GPUs[0] != running.GPUs[0] && i.Node != running.Node
	})
	var ledger []gpuportal.LedgerEntry
	p.api("GET", "/api/v1/ledger", p.user, "", &ledger)
	// What the failed run was charged (seconds of spot: perhaps nothing)
	// is credited back in full.
	var charged, credited gpuportal.Fen
	for _, e := range ledger {
		if e.Kind == gpuportal.LedgerRefund && strings.Contains(e.Description, "GPU failed") {
			credited -= e.Amount
		}
		if e.Kind == gpuportal.LedgerInstance && e.InstanceID != nil && *e.InstanceID == inst.ID {
			charged += e.Amount
		}
	}
	if credited != charged {
		t.Fatalf("charged %s for the failed run, credited %s: %+v", charged, credited, ledger)
	}

	// Still faulty: the return is refused; reset (the fault leaves the
	// file): returned, 16 again.
	path := fmt.Sprintf("/api/v1/admin/gpus/%s/return", running.GPUs[0])
	if st := p.api("POST", path, p.admin, "", nil); st != 409 {
		t.Fatalf("returning a faulty GPU = %d", st)
	}
	write(`[]`)
	eventually(t, 20*time.Second, "the GPU's return once it was reset", func() bool { return p.api("POST", path, p.admin, "", nil) == 204 })
	if healthy() != 16 {
		t.Fatalf("%d healthy after the return", healthy())
	}
}
