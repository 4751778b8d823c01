package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuportal"
)

func nodeToken(t *testing.T, stateDir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(stateDir, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		NodeToken string `json:"node_token"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c.NodeToken
}

// (issue 12, item 9) An admin rotates a node's token: the real agent takes
// the new one, keeps it in its state dir and goes on heartbeating; the old
// token is then refused. A revoked token stops the agent.
func TestNodeTokenRotationWithARealAgent(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	dir := t.TempDir()
	state := filepath.Join(dir, "node")
	ag := p.startAgent(t, state, dir+"/ckpt", "mock:dgxa100", true)
	old := nodeToken(t, state)
	if st := p.api("POST", "/api/v1/admin/nodes/"+ag.nodeID+"/rotate-token", p.admin, "", nil); st != 200 {
		t.Fatalf("rotate = %d", st)
	}
	eventually(t, 10*time.Second, "the agent to switch tokens", func() bool { return strings.Contains(ag.output(), "node token rotated") })
	next := nodeToken(t, state)
	if next == old || !strings.HasPrefix(next, "gpn_") {
		t.Fatalf("state dir token %q (old %q)", next, old)
	}
	if fi, err := os.Stat(filepath.Join(state, "node.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node.json mode %v, %v", fi.Mode(), err)
	}
	eventually(t, 10*time.Second, "the rotation to finish", func() bool {
		for _, n := range p.nodes() {
			if n.ID == ag.nodeID {
				return n.TokenState == gpuportal.NodeTokenActive && n.TokenRotatedAt != nil && n.State == gpuportal.NodeOnline
			}
		}
		return false
	})
	if st := p.api("POST", "/api/v1/agent/heartbeat", old, `{"revision":0}`, nil); st != http.StatusUnauthorized {
		t.Fatalf("the old token after the rotation = %d", st)
	}

	if st := p.api("POST", "/api/v1/admin/nodes/"+ag.nodeID+"/revoke-token", p.admin, "", nil); st != 200 {
		t.Fatalf("revoke = %d", st)
	}
	exited, err := ag.waitExit(15 * time.Second)
	if !exited {
		t.Fatalf("the agent kept running with a revoked token:\n%s", ag.output())
	}
	if err == nil || !strings.Contains(ag.output(), "no longer accepts this node's token") {
		t.Fatalf("agent exit %v:\n%s", err, ag.output())
	}
}
