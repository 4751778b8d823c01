package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// smallDisk mounts a tmpfs of size bytes for the test (root only); it
// skips with a reason elsewhere, and fails under CI=true, where it must run.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a small tmpfs (the disk-full test needs root): %v %s", err, out)
		}
		t.Skipf("disk-full test skipped: cannot mount a tmpfs here (%v %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			return // ENOSPC: full
		}
	}
}

// (issue 22, item 22) A full disk is a clear 503 that changes nothing —
// never "500 Internal error." — and /healthz fails while writes fail;
// once space is back, /healthz recovers and writes work again.
func TestDiskFullIs503AndHealthzFails(t *testing.T) {
	t.Parallel()
	dir := smallDisk(t, "8m")
	ctx := context.Background()
	db, clock := storetest.OpenAt(t, filepath.Join(dir, "portal.db"))
	storetest.AddFleet(t, db, "a", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "alice@example.com", gpuportal.RoleCustomer)
	s, err := New(ctx, Config{DB: db, Clock: clock, WallClock: gpuportal.NewManualClock(storetest.Epoch), Location: storetest.Shanghai,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	e := &testEnv{t: t, db: db, clock: clock, web: s, srv: srv}
	tok := e.tokenFor(u)
	health := func() int {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if h := health(); h != 200 {
		t.Fatalf("healthz before = %d", h)
	}

	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	// Bookings until the database itself runs out (its pages fill the
	// last of the space); every answer is a 201 or the clear 503.
	saw503 := false
	for k := 0; k < 200 && !saw503; k++ {
		day := 1 + k%60
		st, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 1, at(day, 10), at(day, 14)))
		switch {
		case st == http.StatusServiceUnavailable && errorCode(t, body) == gpuportal.EUNAVAILABLE && strings.Contains(body, "disk is full"):
			saw503 = true
		case st == http.StatusCreated, st == http.StatusConflict:
		default:
			t.Fatalf("booking on a full disk = %d %s", st, body)
		}
	}
	if !saw503 {
		t.Fatal("the disk never filled")
	}
	if h := health(); h != http.StatusServiceUnavailable {
		t.Fatalf("healthz while writes fail = %d", h)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for health() != 200 {
		if time.Now().After(deadline) {
			t.Fatal("healthz did not recover once space was freed")
		}
	}
	if st, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 1, at(70, 10), at(70, 14))); st != http.StatusCreated {
		t.Fatalf("booking once space is back = %d %s", st, body)
	}
}
