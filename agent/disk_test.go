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

// (issue 48) gpu logs -f reads only what is new: a log sent from an
// offset of the log since it began, whole lines only while the workload
// writes, to the end once it does not; through a trim the offsets hold,
// and an offset the trim dropped starts at what was kept.
func TestLogSliceFromAnOffsetThroughATrim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "instance-1.log")
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	read := func(offset int64, writing bool) (int64, int64, string) {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rng, from, to, err := logSlice(f, path, offset, writing)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, to-from)
		f.ReadAt(buf, from)
		return rng.Start, rng.End, string(buf)
	}
	w.Write([]byte("one\ntwo\nthr"))
	start, end, text := read(0, true)
	if start != 0 || end != 8 || text != "one\ntwo\n" {
		t.Fatalf("from 0 while writing = %d–%d %q", start, end, text)
	}
	w.Write([]byte("ee\nfour\n"))
	if start, end, text = read(end, true); start != 8 || end != 19 || text != "three\nfour\n" {
		t.Fatalf("from 8 = %d–%d %q", start, end, text)
	}
	w.Write([]byte("partial"))
	if _, end2, text := read(end, false); end2 != 26 || text != "partial" {
		t.Fatalf("after the end, to the end = %d %q", end2, text)
	}
	// A trim: 3 MB more, capped to 1 MiB.
	line := bytes.Repeat([]byte("y"), 99)
	for range 30_000 {
		w.Write(line)
		w.Write([]byte("\n"))
	}
	w.Write([]byte("last\n"))
	total := int64(26 + 30_000*100 + 5)
	if trimmed, err := capLog(path, 1<<20); err != nil || !trimmed {
		t.Fatalf("capLog = %v %v", trimmed, err)
	}
	// The end of the log is where it was: nothing new to read there.
	if start, end, text := read(total, true); start != total || end != total || text != "" {
		t.Fatalf("from the end after the trim = %d–%d %q", start, end, text)
	}
	// An offset the trim dropped: from what was kept, at a line.
	start, end, text = read(19, true)
	if start <= 19 || end != total || !strings.HasPrefix(text, "yyy") || !strings.HasSuffix(text, "last\n") || int64(len(text)) != end-start {
		t.Fatalf("from a dropped offset = %d–%d (%d bytes)", start, end, len(text))
	}
	// A second trim keeps counting from the log's beginning.
	w.Write([]byte("after\n"))
	for range 30_000 {
		w.Write(line)
		w.Write([]byte("\n"))
	}
	if trimmed, _ := capLog(path, 1<<20); !trimmed {
		t.Fatal("no second trim")
	}
	total += 6 + 30_000*100
	w.Write([]byte("newest\n"))
	if start, end, text := read(total, true); start != total || end != total+7 || text != "newest\n" {
		t.Fatalf("after two trims = %d–%d %q", start, end, text)
	}
}
