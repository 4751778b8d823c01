package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuportal/migrations"

	_ "modernc.org/sqlite"
)

// syncBuffer is a bytes.Buffer safe for a server goroutine and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func env(vars map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		if k == "PORTAL_SSH_ADDR" {
			return "127.0.0.1:0" // tests run side by side: not the default 2222
		}
		return ""
	}
}

var listening = regexp.MustCompile(`portal listening on (http://\S+)`)

// startPortal runs `portal serve` in-process and returns its URL; the
// portal stops (gracefully) when the test ends.
func startPortal(t *testing.T, args []string, vars map[string]string) (string, *syncBuffer) {
	t.Helper()
	url, out, stop := runPortal(t, args, vars)
	t.Cleanup(stop)
	return url, out
}

// runPortal runs `portal serve` in-process and returns its URL and a func
// that stops it gracefully.
func runPortal(t *testing.T, args []string, vars map[string]string) (string, *syncBuffer, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), env(vars), out, io.Discard)
	}()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("portal stopped with %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			return m[1], out, stop
		}
		select {
		case err := <-done:
			t.Fatalf("portal exited: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("portal did not start:\n%s", out.String())
	return "", nil, nil
}

func TestServeDemoPrintsLoginsAndServes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "data", "portal.db")
	url, out := startPortal(t, []string{"--db", db, "--demo", "--demo-agent", ""}, nil)
	for _, want := range []string{"admin@gpuportal.demo", "alice@gpuportal.demo", "demo-alice-pass"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	// The printed demo login works.
	body := strings.NewReader(`{"email":"alice@gpuportal.demo","password":"demo-alice-pass","name":"t"}`)
	resp, err = http.Post(url+"/api/v1/auth/tokens", "application/json", body)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("demo login: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}

func TestAdminBootstrapFromEnvironment(t *testing.T) {
	db := filepath.Join(t.TempDir(), "portal.db")
	url, _ := startPortal(t, []string{"--db", db}, map[string]string{"PORTAL_ADMIN_EMAIL": "ops@example.com", "PORTAL_ADMIN_PASSWORD": "ops-password-1"})
	resp, err := http.Post(url+"/api/v1/auth/tokens", "application/json", strings.NewReader(`{"email":"ops@example.com","password":"ops-password-1","name":"t"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("admin login: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}

func TestMigrateAndAdminCreateCommands(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "portal.db")
	var out bytes.Buffer
	if err := run(ctx, []string{"migrate", "--db", db}, env(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	all, _ := migrations.For("sqlite")
	if !strings.Contains(out.String(), fmt.Sprintf("applied %d migration", len(all))) {
		t.Fatalf("migrate printed %q", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"migrate", "--db", db}, env(nil), &out, io.Discard); err != nil || !strings.Contains(out.String(), "applied 0 migration") {
		t.Fatalf("second migrate: %v %q", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"admin", "create", "--db", db, "--email", "root@example.com", "--password", "root-password-1"}, env(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "admin root@example.com") {
		t.Fatalf("admin create printed %q", out.String())
	}
	if err := run(ctx, []string{"admin", "create", "--db", db, "--email", "bad", "--password", "root-password-1"}, env(nil), &out, io.Discard); err == nil {
		t.Fatal("admin create accepted a bad email")
	}
}

// An existing database on an older schema is refused unless --migrate.
func TestServeRefusesOldSchema(t *testing.T) {
	db := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	err = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, env(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "portal migrate") {
		t.Fatalf("serve on old schema: %v", err)
	}
	startPortal(t, []string{"--db", db, "--migrate"}, nil)
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--timezone", "Mars/Olympus"},
		{"serve", "--now", "2026-12-01T00:00:00Z"},
		{"serve", "--test-clock", "--now", "yesterday"},
		{"frobnicate"},
	} {
		args = append(args, "--db", filepath.Join(t.TempDir(), "x.db"))
		if err := run(context.Background(), args, env(nil), io.Discard, io.Discard); err == nil {
			t.Errorf("run %v succeeded", args)
		}
	}
}

// (issue 12, item 6) An admin email that a stranger registered first is
// not promoted silently: it needs --promote, and the promotion ends the
// account's sessions and revokes its API tokens.
func TestAdminCreateNeedsPromoteForACustomerAccount(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "portal.db")
	url, _, stop := runPortal(t, []string{"--db", db}, nil)
	resp, err := http.Post(url+"/api/v1/auth/signup", "application/json", strings.NewReader(`{"email":"ops@example.com","password":"stranger-password","name":"Stranger"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("sign-up: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post(url+"/api/v1/auth/tokens", "application/json", strings.NewReader(`{"email":"ops@example.com","password":"stranger-password","name":"t"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("token: %v %v", resp, err)
	}
	var tok struct{ Token string }
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	stop()

	var out bytes.Buffer
	err = run(ctx, []string{"admin", "create", "--db", db, "--email", "ops@example.com", "--password", "ops-password-1"}, env(nil), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--promote") {
		t.Fatalf("admin create over a customer account = %v", err)
	}
	err = run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, env(map[string]string{"PORTAL_ADMIN_EMAIL": "ops@example.com", "PORTAL_ADMIN_PASSWORD": "ops-password-1"}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "PORTAL_ADMIN_PROMOTE") {
		t.Fatalf("serve with PORTAL_ADMIN_EMAIL of a customer = %v", err)
	}
	if err := run(ctx, []string{"admin", "create", "--db", db, "--email", "ops@example.com", "--password", "ops-password-1", "--promote"}, env(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	url, _ = startPortal(t, []string{"--db", db}, nil)
	req, _ := http.NewRequest(http.MethodGet, url+"/api/v1/admin/nodes", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the stranger's token after the promotion: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}

// (item 10) Secrets stay out of errors and logs; a short PORTAL_SECRET is
// refused with a clear message.
func TestSecretsStayOutOfMessages(t *testing.T) {
	db := filepath.Join(t.TempDir(), "portal.db")
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, env(map[string]string{"PORTAL_SECRET": "too-short"}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "PORTAL_SECRET") || !strings.Contains(err.Error(), "32") {
		t.Fatalf("short secret = %v", err)
	}
	err = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", db},
		env(map[string]string{"PORTAL_SMTP_URL": "smtp://mailer:hunter2-secret@smtp.example:notaport?from=a@example.com"}), io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad SMTP URL error = %v", err)
	}
	url, out := startPortal(t, []string{"--db", db}, map[string]string{"PORTAL_SECRET": strings.Repeat("s", 32)})
	if url == "" || strings.Contains(out.String(), "hunter2") {
		t.Fatal("secret in the output")
	}
}
