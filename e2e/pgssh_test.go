package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 23) With two portals on one PostgreSQL database, a customer's
// SSH session through the second portal reaches an instance whose agent
// long-polls the first: the agent connects out to the portal that holds
// the customer's end (its --agent-url), and both portals present the same
// host key.
func TestSSHThroughAnotherPortal(t *testing.T) {
	t.Parallel()
	needOpenSSH(t)
	dsn, emails := installation(t, storetest.PostgresDSN(t), 0, 1)
	a := startPortalProcArgs(t, dsn, "127.0.0.1:0")
	eventually(t, 10*time.Second, "the first portal to lead", func() bool { return a.schedulerRole() == "leader" })
	bAddr := freeAddr(t)
	b := startPortalProcArgs(t, dsn, bAddr, "--agent-url", "http://"+bAddr)

	st, body := a.call("POST", "/api/v1/admin/enrollment-tokens", a.admin, `{"region":"cd-1"}`)
	var enroll struct{ Token string }
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &enroll) != nil {
		t.Fatalf("enrollment token: %d %s", st, body)
	}
	dir := t.TempDir()
	startAgentProc(t, a.url, enroll.Token, filepath.Join(dir, "node"), filepath.Join(dir, "ckpt"), "mock:dgxa100", "30s", "")

	token := a.logIn(emails[0], storetest.Password)
	key, pub := newKey(t, t.TempDir(), "customer")
	raw, _ := json.Marshal(map[string]string{"name": "laptop", "public_key": pub})
	if st, body := a.call("POST", "/api/v1/ssh-keys", token, string(raw)); st != http.StatusCreated {
		t.Fatalf("add key: %d %s", st, body)
	}
	st, body = a.call("POST", "/api/v1/instances", token, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"sleep 600"}`)
	var inst gpuportal.Instance
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &inst) != nil {
		t.Fatalf("launch: %d %s", st, body)
	}
	eventually(t, 20*time.Second, "the instance running", func() bool {
		var i gpuportal.Instance
		_, body := a.call("GET", fmt.Sprintf("/api/v1/instances/%d", inst.ID), token, "")
		return json.Unmarshal([]byte(body), &i) == nil && i.Status == gpuportal.InstanceRunning
	})

	var hostKeys []string
	for _, p := range []*portalProc{a, b} {
		var where struct {
			Port        int    `json:"port"`
			Fingerprint string `json:"host_key_fingerprint"`
		}
		st, body := p.call("GET", "/api/v1/ssh", token, "")
		if st != http.StatusOK || json.Unmarshal([]byte(body), &where) != nil || where.Port == 0 {
			t.Fatalf("GET /ssh: %d %s", st, body)
		}
		hostKeys = append(hostKeys, where.Fingerprint)
		if p == b {
			c := &sshClient{t: t, host: "127.0.0.1", port: fmt.Sprint(where.Port), key: key}
			out, code := c.ssh("", c.target(inst.ID), "echo through-the-other-portal; exit 3")
			if code != 3 || !strings.Contains(out, "through-the-other-portal") {
				t.Fatalf("ssh through the second portal: exit %d, %q\nportal b:\n%s", code, out, b.logText())
			}
		}
	}
	if hostKeys[0] != hostKeys[1] {
		t.Fatalf("the portals present different host keys: %v", hostKeys)
	}
}
