package agent

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gpuportal"
)

// Workloads must not fill the node's disk: each log is capped (the
// earliest output dropped, its end kept), and the logs and checkpoint
// directories of instances that ended are removed after a retention
// period. Container root filesystems are read-only with a sized /tmp
// (see ContainerRuntime.CreateArgs).

// DefaultLogCap is the most a workload's log keeps.
const DefaultLogCap int64 = 64 << 20

// logTruncatedLine starts a log whose earlier output was dropped.
const logTruncatedLine = "[gpuportal: earlier output dropped — an instance's log keeps its last %s]\n"

// capLog trims the log at path to at most limit bytes when it is longer,
// keeping its last half (so trimming is rare) after a line saying so.
// Workloads write with O_APPEND, so their next write lands at the new end.
func capLog(path string, limit int64) (bool, error) {
	st, err := os.Stat(path)
	if err != nil || st.Size() <= limit || !st.Mode().IsRegular() {
		return false, nil // gone, within the cap, or a link to the engine's file
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	keep := limit / 2
	tail := make([]byte, keep)
	n, err := f.ReadAt(tail, st.Size()-keep)
	if err != nil && err != io.EOF {
		return false, err
	}
	tail = tail[:n]
	if i := strings.IndexByte(string(tail), '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:] // start at a whole line
	}
	// What it drops, counted from the log's beginning (past an earlier
	// trim's line), for offsets into the log (logSlice).
	dropped := readDropped(path) + (st.Size() - int64(len(tail))) - markerLength(f)
	if err := os.WriteFile(droppedPath(path), []byte(strconv.FormatInt(dropped, 10)), 0o600); err != nil {
		return false, err
	}
	if err := f.Truncate(0); err != nil {
		return false, err
	}
	if _, err := f.WriteAt(append([]byte(fmt.Sprintf(logTruncatedLine, formatBytes(limit))), tail...), 0); err != nil {
		return false, err
	}
	return true, nil
}

// sweepLogs removes the logs under dir that no live workload writes and
// that nothing wrote for keep: those of instances that ended.
func sweepLogs(dir string, keep time.Duration, now time.Time, live map[string]bool) (removed []string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		// A log's count of dropped bytes lives as long as the log.
		if live[strings.TrimSuffix(e.Name(), ".dropped")] || newest(path).Add(keep).After(now) {
			continue
		}
		if os.RemoveAll(path) == nil {
			removed = append(removed, e.Name())
		}
	}
	return removed
}

// endedMarkers is where, under the checkpoint root, an agent notes the
// checkpoint directories of instances that ended on its node (outside
// the directories themselves, which are the customer's).
const endedMarkers = ".ended"

// markEnded notes that the instance using the checkpoint directory name
// ended here; markRunning takes the note back when it runs again (on any
// node sharing the root).
func markEnded(root, name string) {
	dir := filepath.Join(root, endedMarkers)
	if os.MkdirAll(dir, 0o700) == nil {
		_ = os.WriteFile(filepath.Join(dir, name), nil, 0o600)
	}
}

func markRunning(root, name string) { _ = os.Remove(filepath.Join(root, endedMarkers, name)) }

// sweepCheckpoints removes the checkpoint directories noted as ended
// longer than keep ago that nothing wrote since and no live workload here
// uses; an instance running anywhere took its note back when it started.
func sweepCheckpoints(root string, keep time.Duration, now time.Time, live map[string]bool) (removed []string) {
	notes, err := os.ReadDir(filepath.Join(root, endedMarkers))
	if err != nil {
		return nil
	}
	for _, n := range notes {
		note := filepath.Join(root, endedMarkers, n.Name())
		info, err := os.Lstat(note)
		if err != nil || live[n.Name()] || info.ModTime().Add(keep).After(now) {
			continue
		}
		dir := filepath.Join(root, n.Name())
		if newest(dir).Add(keep).After(now) {
			continue // written since: in use somewhere
		}
		if os.RemoveAll(dir) == nil && os.Remove(note) == nil {
			removed = append(removed, n.Name())
		}
	}
	return removed
}

// newest is the latest modification time of path and, for a directory,
// of anything under it (links are not followed).
func newest(path string) time.Time {
	var latest time.Time
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil && info.ModTime().After(latest) {
			latest = info.ModTime()
		}
		return nil
	})
	return latest
}

// logName is the file name of an instance's log under the logs directory.
func logName(instanceID int64) string {
	return "instance-" + strconv.FormatInt(instanceID, 10) + ".log"
}

// DefaultRetention is how long the logs and checkpoint directories of
// instances that ended are kept on a node.
const DefaultRetention = 7 * 24 * time.Hour

// diskLoop caps the logs of exec workloads (container engines cap their
// own) every few seconds, and sweeps what ended instances left every ten
// minutes.
func (a *Agent) diskLoop(ctx context.Context) {
	_, inContainer := a.cfg.Runtime.(*ContainerRuntime)
	lastSweep := time.Time{}
	for sleepCtx(ctx, 5*time.Second) {
		a.mu.Lock()
		logs, dirs := map[string]bool{}, map[string]bool{}
		var paths []string
		for id, w := range a.workloads {
			logs[logName(id)] = true
			dirs[filepath.Base(w.rec.CheckpointDir)] = true
			if !w.exited {
				paths = append(paths, a.logPath(id))
			}
		}
		a.mu.Unlock()
		if !inContainer {
			for _, p := range paths {
				if trimmed, err := capLog(p, a.logCap()); err != nil {
					a.log.Warn("cap workload log", "path", p, "err", err)
				} else if trimmed {
					a.log.Info("workload log capped", "path", p, "cap", formatBytes(a.logCap()))
				}
			}
		}
		now := a.clock.Now()
		if now.Sub(lastSweep) < 10*time.Minute {
			continue
		}
		lastSweep = now
		keep := a.retention()
		if gone := sweepLogs(filepath.Join(a.cfg.StateDir, "logs"), keep, now, logs); len(gone) > 0 {
			a.log.Info("removed the logs of ended instances", "count", len(gone), "retention", keep)
		}
		if gone := sweepCheckpoints(a.cfg.CheckpointRoot, keep, now, dirs); len(gone) > 0 {
			a.log.Info("removed the checkpoint directories of ended instances", "dirs", gone, "retention", keep)
		}
	}
}

func (a *Agent) logCap() int64 {
	if a.cfg.LogCap > 0 {
		return a.cfg.LogCap
	}
	return DefaultLogCap
}

func (a *Agent) retention() time.Duration {
	if a.cfg.Retention > 0 {
		return a.cfg.Retention
	}
	return DefaultRetention
}

// droppedPath keeps how many bytes of a log its trims dropped since it
// began, so that offsets into it (gpu logs -f) hold across trims.
func droppedPath(log string) string { return log + ".dropped" }

func readDropped(log string) int64 {
	raw, err := os.ReadFile(droppedPath(log))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	return n
}

// markerLength is the length of the trim's line at the head of a log (0
// for a log never trimmed).
func markerLength(f *os.File) int64 {
	head := make([]byte, 256)
	n, _ := f.ReadAt(head, 0)
	prefix := logTruncatedLine[:strings.Index(logTruncatedLine, "%")]
	if !strings.HasPrefix(string(head[:n]), prefix) {
		return 0
	}
	if i := strings.IndexByte(string(head[:n]), '\n'); i >= 0 {
		return int64(i + 1)
	}
	return 0
}

// logSlice is the part of a log to send from offset (an offset of the
// log since it began): its range as offsets, and as positions in the
// file. An offset a trim dropped starts at what was kept; one past the
// end (a log begun anew) starts over. While the workload writes, only
// whole lines are sent, so the next offset falls between two lines.
func logSlice(f *os.File, path string, offset int64, writing bool) (gpuportal.LogRange, int64, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return gpuportal.LogRange{}, 0, 0, err
	}
	dropped, marker := readDropped(path), markerLength(f)
	end := dropped + st.Size() - marker
	start := offset
	if start < dropped || start > end {
		start = dropped
	}
	from, to := marker+start-dropped, st.Size()
	if writing && to > from {
		// Back to the last newline: a line still being written waits.
		buf := make([]byte, min(to-from, 64<<10))
		n, _ := f.ReadAt(buf, to-int64(len(buf)))
		if i := strings.LastIndexByte(string(buf[:n]), '\n'); i >= 0 {
			to = to - int64(len(buf)) + int64(i) + 1
		} else {
			to = from
		}
	}
	return gpuportal.LogRange{Start: start, End: start + (to - from)}, from, to, nil
}
