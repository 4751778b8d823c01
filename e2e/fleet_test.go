package e2e

import (
	"slices"
	"testing"
	"time"

	"gpuportal"
)

// Two real agents enrol (16 GPUs); one is killed and its node goes
// offline after three missed heartbeats; restarted, it comes back with the
// same node id and the same GPUs.
func TestFleetOfflineAndBack(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	dir := t.TempDir()
	a := p.startAgent(t, dir+"/node-a", dir+"/ckpt", "mock:dgxa100", true)
	h := p.startAgent(t, dir+"/node-h", dir+"/ckpt", "mock:dgxh100", true)

	gpusOf := func(id string) []string {
		for _, n := range p.nodes() {
			if n.ID == id {
				var out []string
				for _, g := range n.GPUs {
					out = append(out, g.UUID)
				}
				return out
			}
		}
		return nil
	}
	stateOf := func(id string) string {
		for _, n := range p.nodes() {
			if n.ID == id {
				return n.State
			}
		}
		return ""
	}
	nodes := p.nodes()
	total := 0
	for _, n := range nodes {
		total += len(n.GPUs)
		if n.State != gpuportal.NodeOnline {
			t.Errorf("node %s is %s", n.ID, n.State)
		}
	}
	if len(nodes) != 2 || total != 16 {
		t.Fatalf("fleet: %d nodes, %d GPUs; want 2 and 16", len(nodes), total)
	}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if (n.ID == a.nodeID && g.Model != "a100-80g") || (n.ID == h.nodeID && g.Model != "h100-80g") || !g.Healthy || g.MemoryTotalMiB != 81920 {
				t.Errorf("GPU %+v on %s", g, n.ID)
			}
		}
	}
	if got, _ := p.db.HealthyGPUs(t.Context(), "a100-80g", "cd-1"); got != 8 {
		t.Fatalf("bookable A100s = %d", got)
	}
	before := gpusOf(a.nodeID)

	a.kill()
	eventually(t, 15*time.Second, "the killed node to go offline", func() bool { return stateOf(a.nodeID) == gpuportal.NodeOffline })
	if got, _ := p.db.HealthyGPUs(t.Context(), "a100-80g", "cd-1"); got != 0 {
		t.Fatalf("an offline node's GPUs still count: %d", got)
	}
	if stateOf(h.nodeID) != gpuportal.NodeOnline {
		t.Fatal("the other node went offline too")
	}

	again := p.startAgent(t, dir+"/node-a", dir+"/ckpt", "mock:dgxa100", false)
	if again.nodeID != a.nodeID {
		t.Fatalf("restarted agent is node %s; was %s", again.nodeID, a.nodeID)
	}
	eventually(t, 10*time.Second, "the node to come back", func() bool { return stateOf(a.nodeID) == gpuportal.NodeOnline })
	if after := gpusOf(a.nodeID); !slices.Equal(before, after) {
		t.Fatalf("GPUs changed across the restart:\n%v\n%v", before, after)
	}
	if got, _ := p.db.HealthyGPUs(t.Context(), "a100-80g", "cd-1"); got != 8 {
		t.Fatalf("bookable A100s after return = %d", got)
	}
}
