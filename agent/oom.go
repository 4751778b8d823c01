package agent

import (
	"io"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"time"
)

// OOMWatcher learns from the kernel log which containers the OOM killer
// struck, as cAdvisor does: the engines' own OOMKilled flag misses it on
// some setups (podman with cgroup v1, for one), and a container's cgroup —
// with its counters — is gone soon after the kill ends it.
type OOMWatcher struct {
	mu   sync.Mutex
	hits map[string]bool // container id → an OOM kill happened in it
	cond *sync.Cond
}

// The kernel's summary line of a memory-cgroup OOM kill names the cgroup
// of the victim, which holds the 64-hex id of its container.
var (
	oomKillLine = regexp.MustCompile(`oom-kill:.*task_memcg=(\S+)`)
	containerID = regexp.MustCompile(`[0-9a-f]{64}`)
)

// WatchOOMKills follows /dev/kmsg from now on. It returns nil when the
// kernel log cannot be read (no root, or restricted).
func WatchOOMKills(log *slog.Logger) *OOMWatcher {
	f, err := os.Open("/dev/kmsg")
	if err == nil {
		_, err = f.Seek(0, io.SeekEnd)
	}
	if err != nil {
		log.Warn("cannot follow the kernel log; out-of-memory ends are known only where the container engine reports them", "err", err)
		return nil
	}
	w := newOOMWatcher()
	go w.follow(f)
	return w
}

func (w *OOMWatcher) follow(f *os.File) {
	defer f.Close()
	// Each read of /dev/kmsg returns one record; a reader that falls
	// behind gets EPIPE once and continues from the oldest kept record.
	buf := make([]byte, 16<<10)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if err == io.EOF {
				return
			}
			continue
		}
		w.record(string(buf[:n]))
	}
}

func (w *OOMWatcher) record(line string) {
	m := oomKillLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	id := containerID.FindString(m[1])
	if id == "" {
		return
	}
	w.mu.Lock()
	w.hits[id] = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// WaitFor reports whether an OOM kill struck container id, waiting up to
// d for the kernel's record of it. The record is forgotten.
func (w *OOMWatcher) WaitFor(id string, d time.Duration) bool {
	timer := time.AfterFunc(d, w.cond.Broadcast)
	defer timer.Stop()
	deadline := time.Now().Add(d)
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.hits[id] && time.Now().Before(deadline) {
		w.cond.Wait()
	}
	hit := w.hits[id]
	delete(w.hits, id)
	return hit
}

func newOOMWatcher() *OOMWatcher {
	w := &OOMWatcher{hits: map[string]bool{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}
