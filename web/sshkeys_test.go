package web

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// keygen makes a key pair with the real OpenSSH ssh-keygen and returns the
// public key line and the fingerprint ssh-keygen -l prints for it.
func keygen(t *testing.T, args ...string) (line, fingerprint string) {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no ssh-keygen (apt-get install openssh-client)")
		}
		t.Skip("skipping: no ssh-keygen (apt-get install openssh-client)")
	}
	key := filepath.Join(t.TempDir(), "id")
	if out, err := exec.Command("ssh-keygen", append(args, "-q", "-N", "", "-C", "alice@laptop", "-f", key)...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %v: %v %s", args, err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ssh-keygen", "-l", "-f", key+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(pub)), strings.Fields(string(out))[1]
}

// (issue 23) SSH keys through the API: ed25519, ECDSA and RSA ≥ 2048 are
// kept with the fingerprint ssh-keygen -l prints; bad keys are 400 naming
// public_key; nobody else sees or deletes them.
func TestSSHKeysAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	var ids []int64
	for _, args := range [][]string{{"-t", "ed25519"}, {"-t", "ecdsa", "-b", "256"}, {"-t", "rsa", "-b", "2048"}} {
		line, fp := keygen(t, args...)
		st, body := e.apiCall("POST", "/api/v1/ssh-keys", alice, fmt.Sprintf(`{"public_key":%q}`, line))
		k := decodeObject(t, body)
		if st != http.StatusCreated || k["fingerprint"] != fp || k["name"] != "alice@laptop" {
			t.Fatalf("add %v = %d %s; want fingerprint %s", args, st, body, fp)
		}
		ids = append(ids, int64(k["id"].(float64)))
		if st, _ := e.apiCall("POST", "/api/v1/ssh-keys", alice, fmt.Sprintf(`{"public_key":%q}`, line)); st != http.StatusConflict {
			t.Errorf("the same key twice = %d", st)
		}
	}
	weak, _ := keygen(t, "-t", "rsa", "-b", "1024")
	for _, bad := range []string{"", "ssh-ed25519 notbase64", "-----BEGIN OPENSSH PRIVATE KEY-----", weak, `command="rm -rf /" ` + weak} {
		st, body := e.apiCall("POST", "/api/v1/ssh-keys", alice, fmt.Sprintf(`{"public_key":%q}`, bad))
		if st != http.StatusBadRequest || !strings.Contains(body, `"field":"public_key"`) {
			t.Errorf("bad key %.30q = %d %s", bad, st, body)
		}
	}
	_, body := e.apiCall("GET", "/api/v1/ssh-keys", alice, "")
	if n := strings.Count(body, `"fingerprint"`); n != 3 {
		t.Fatalf("alice lists %d keys: %s", n, body)
	}
	if _, body := e.apiCall("GET", "/api/v1/ssh-keys", bob, ""); body != "[]\n" && body != "[]" {
		t.Errorf("bob sees %s", body)
	}
	if st, _ := e.apiCall("DELETE", fmt.Sprintf("/api/v1/ssh-keys/%d", ids[0]), bob, ""); st != http.StatusNotFound {
		t.Errorf("bob deletes alice's key = %d", st)
	}
	if st, _ := e.apiCall("DELETE", fmt.Sprintf("/api/v1/ssh-keys/%d", ids[0]), alice, ""); st != http.StatusNoContent {
		t.Errorf("alice deletes her key = %d", st)
	}
	_, body = e.apiCall("GET", "/api/v1/ssh-keys", alice, "")
	if n := strings.Count(body, `"fingerprint"`); n != 2 {
		t.Errorf("after the delete %d keys", n)
	}
}

// The settings page adds, lists and deletes keys; a bad one shows its
// error next to the field and keeps what was typed.
func TestSSHKeysOnTheSettingsPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	line, fp := keygen(t, "-t", "ed25519")
	b.get("/settings")
	if p := b.post("/settings/ssh-keys", url.Values{"name": {"laptop"}, "public_key": {line}}); p.status != http.StatusSeeOther {
		t.Fatalf("add = %d %s", p.status, p.body)
	}
	page := b.get("/settings")
	if !strings.Contains(page.body, fp) || !strings.Contains(page.body, "laptop") {
		t.Fatalf("the settings page does not list the key %s", fp)
	}
	p := b.post("/settings/ssh-keys", url.Values{"name": {"typo"}, "public_key": {"ssh-rsa nope"}})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "ssh-rsa nope") || !strings.Contains(p.body, "OpenSSH public key") {
		t.Fatalf("bad key = %d", p.status)
	}
}
