package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// (issue 22, item 7) A log is capped: past the cap its earliest output is
// dropped (a line says so) and its end kept, so 200 MB of output cannot
// become a 329 MB file; the workload's next write lands at the new end.
func TestLogIsCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "instance-1.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := bytes.Repeat([]byte("x"), 99)
	for k := 0; k < 30_000; k++ { // 3 MB
		f.Write(line)
		f.Write([]byte("\n"))
	}
	f.Write([]byte("the last line\n"))
	trimmed, err := capLog(path, 1<<20)
	if err != nil || !trimmed {
		t.Fatalf("capLog = %v, %v", trimmed, err)
	}
	f.Write([]byte("written after the trim\n"))
	raw, _ := os.ReadFile(path)
	if len(raw) > 1<<20 {
		t.Fatalf("the log is %d bytes, over its 1 MiB cap", len(raw))
	}
	text := string(raw)
	if !strings.HasPrefix(text, "[gpuportal: earlier output dropped") || !strings.Contains(text, "the last line\nwritten after the trim\n") {
		t.Fatalf("trimmed log starts %q and ends %q", text[:60], text[len(text)-60:])
	}
	if trimmed, _ := capLog(path, 1<<20); trimmed {
		t.Fatal("a log within its cap was trimmed")
	}
}

// (issue 22, item 7) Ended instances' logs and checkpoint directories go
// after the retention — not those of live workloads, not one written
// since (an instance running elsewhere on the shared root), not one whose
// instance started again (its note taken back).
func TestRetentionSweepsWhatEnded(t *testing.T) {
	root, logs := t.TempDir(), t.TempDir()
	old := time.Now().Add(-10 * 24 * time.Hour)
	for _, name := range []string{"instance-1", "instance-2", "instance-3", "instance-4"} {
		dir := filepath.Join(root, name)
		os.MkdirAll(dir, 0o700)
		os.WriteFile(filepath.Join(dir, "ckpt"), []byte("state"), 0o600)
		os.Chtimes(filepath.Join(dir, "ckpt"), old, old)
		os.Chtimes(dir, old, old)
		markEnded(root, name)
		os.Chtimes(filepath.Join(root, endedMarkers, name), old, old)
		os.WriteFile(filepath.Join(logs, name+".log"), []byte("out"), 0o600)
		os.Chtimes(filepath.Join(logs, name+".log"), old, old)
	}
	os.WriteFile(filepath.Join(root, "instance-2", "ckpt"), []byte("newer"), 0o600) // written since
	markRunning(root, "instance-3")                                                 // running again
	live := map[string]bool{"instance-4": true, "instance-4.log": true}
	gone := sweepCheckpoints(root, 7*24*time.Hour, time.Now(), live)
	if len(gone) != 1 || gone[0] != "instance-1" {
		t.Fatalf("swept checkpoints %v, want only instance-1", gone)
	}
	for _, name := range []string{"instance-2", "instance-3", "instance-4"} {
		if _, err := os.Stat(filepath.Join(root, name, "ckpt")); err != nil {
			t.Errorf("%s was removed: %v", name, err)
		}
	}
	gone = sweepLogs(logs, 7*24*time.Hour, time.Now(), live)
	if len(gone) != 3 {
		t.Fatalf("swept logs %v, want the three ended ones", gone)
	}
}
