package agent

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gpuportal"
)

// workload is one attempt of one instance on this node.
type workload struct {
	rec      workloadRecord
	proc     Process
	exited   bool
	exitCode *int
	endedAt  time.Time
	signal   string
	gpusFree bool
	errText  string       // why it could not start, or ended abnormally (out of memory)
	metaSrv  *http.Server // this instance's metadata endpoint
	// acked: a heartbeat or push carrying this workload's exit was
	// answered, so the portal has it. An exit is reported until then.
	acked bool
}

// reconcile makes the node match the desired state: start what should run,
// schedule ordered interruptions, stop what should not run (or is listed
// with Stop), and forget a finished workload only once the portal has
// acknowledged its exit and no longer lists it.
func (a *Agent) reconcile(d gpuportal.AgentDesired) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revision = d.Revision
	want := map[int64]gpuportal.DesiredWorkload{}
	for _, dw := range d.Workloads {
		want[dw.InstanceID] = dw
	}
	now := a.clock.Now()
	changed := false
	for id, w := range a.workloads {
		dw, ok := want[id]
		current := ok && dw.Attempt == w.rec.Attempt
		if current && !w.exited && dw.DiskKept != w.rec.DiskKept {
			// A stop that keeps the disk says so before the workload ends.
			w.rec.DiskKept = dw.DiskKept
			if d, ok := w.proc.(diskReporter); ok {
				d.KeepDisk(dw.DiskKept)
			}
			changed = true
		}
		switch {
		case current && !dw.Stop:
			continue
		case w.exited:
			if !current && w.acked {
				a.closeMetadataLocked(w)
				delete(a.workloads, id) // reported, acknowledged and applied (or superseded)
				changed = true
			}
		case !w.rec.StopAsked:
			// Not (or no longer) wanted here: stop it now, kill it soon.
			a.log.Info("stopping workload the portal no longer wants", "instance", id)
			w.rec.StopAsked = true
			if w.rec.Deadline.IsZero() || w.rec.Deadline.After(now) {
				w.rec.Deadline, w.rec.Grace = now, 10
			}
			changed = true
		}
	}
	for _, dw := range d.Workloads {
		w := a.workloads[dw.InstanceID]
		if w == nil && dw.Stop {
			// Stopped before it ever started here: report it ended, so
			// the portal can end it (nothing ran, nothing was billed).
			a.workloads[dw.InstanceID] = &workload{rec: workloadRecord{InstanceID: dw.InstanceID, Attempt: dw.Attempt, Lifecycle: dw.Lifecycle, GPUs: dw.GPUs},
				exited: true, endedAt: now, gpusFree: true}
			a.pushNow()
			changed = true
			continue
		}
		if w == nil {
			if busy := a.gpusBusyLocked(dw.GPUs); busy != "" {
				a.log.Info("waiting for GPU to be free before starting", "instance", dw.InstanceID, "gpu", busy)
				continue
			}
			a.startLocked(dw)
			changed = true
			continue
		}
		if w.rec.Attempt != dw.Attempt || dw.Stop {
			continue // an older attempt's exit still to be acknowledged, or being stopped
		}
		if dw.Rebalance && w.rec.RebalanceAt.IsZero() && !w.exited {
			w.rec.RebalanceAt = now
			a.log.Info("rebalance recommendation", "instance", dw.InstanceID)
			changed = true
		}
		realAfterDrill := dw.Interrupt != nil && !dw.Interrupt.Drill && w.rec.Drill
		if (dw.Interrupt == nil || realAfterDrill) && !w.exited && !w.rec.NoticeAt.IsZero() && !w.rec.TermSent && !w.rec.StopAsked {
			// The portal called the notice off (a top-up arrived in time,
			// a drill ended), or a real one replaces a drill's.
			a.log.Info("interruption notice withdrawn", "instance", dw.InstanceID, "drill", w.rec.Drill)
			w.rec.withdrawNotice()
			changed = true
		}
		newDrill := dw.Interrupt != nil && dw.Interrupt.Drill && dw.Interrupt.DrillID != w.rec.DrillID
		if dw.Interrupt != nil && !w.exited && (w.rec.NoticeAt.IsZero() && (!dw.Interrupt.Drill || newDrill)) {
			w.rec.NoticeAt = now
			w.rec.Deadline = now.Add(time.Duration(dw.Interrupt.DeadlineInSeconds * float64(time.Second)))
			w.rec.Grace = float64(dw.Interrupt.GraceSeconds)
			w.rec.Reason = dw.Interrupt.Reason
			w.rec.Action = dw.Interrupt.Action
			if dw.Interrupt.Drill {
				w.rec.Drill, w.rec.DrillID, w.rec.DrillReadyAfter = true, dw.Interrupt.DrillID, nil
			}
			a.log.Info("interruption notice", "instance", dw.InstanceID, "deadline", w.rec.Deadline.UTC().Format(time.RFC3339), "reason", dw.Interrupt.Reason)
			a.announceNoticeLocked(w)
			changed = true
		}
	}
	if changed {
		a.persistLocked()
		a.wakeEnforcer()
	}
}

// gpusBusyLocked returns a GPU of uuids that a running workload still holds.
func (a *Agent) gpusBusyLocked(uuids []string) string {
	for _, w := range a.workloads {
		if w.exited {
			continue
		}
		for _, g := range w.rec.GPUs {
			if slices.Contains(uuids, g) {
				return g
			}
		}
	}
	return ""
}

// startLocked starts a workload the portal wants here. Creating a
// container takes the engine a second or so: that happens off the lock,
// while heartbeats and every other workload's metadata keep being served.
// Until it runs the workload is not reported, so the portal keeps the
// instance pending.
func (a *Agent) startLocked(dw gpuportal.DesiredWorkload) {
	w := &workload{rec: workloadRecord{
		InstanceID: dw.InstanceID, Attempt: dw.Attempt, Lifecycle: dw.Lifecycle, GPUs: dw.GPUs, Slot: a.slotOf(dw.GPUs), Command: dw.Command, DiskGiB: dw.DiskGiB, DiskKept: dw.DiskKept,
		CheckpointDir: filepath.Join(a.cfg.CheckpointRoot, safeName(dw.CheckpointKey, dw.InstanceID)),
		StartedAt:     a.clock.Now(),
	}}
	a.workloads[dw.InstanceID] = w
	fail := func(err error) {
		a.log.Error("cannot start workload", "instance", dw.InstanceID, "err", err)
		w.exited, w.endedAt, w.errText, w.gpusFree = true, a.clock.Now(), err.Error(), true
		a.pushNow()
	}
	if err := os.MkdirAll(w.rec.CheckpointDir, 0o700); err != nil {
		fail(err)
		return
	}
	markRunning(a.cfg.CheckpointRoot, filepath.Base(w.rec.CheckpointDir))
	crt, inContainer := a.cfg.Runtime.(*ContainerRuntime)
	metaURL, checkpointDir := "http://"+ContainerMetadataAddr, ContainerCheckpointDir
	home := checkpointDir
	if inContainer && crt.Disks && dw.DiskGiB > 0 {
		home = "/root" // root's own, on its disk
	}
	if !inContainer {
		// exec: the endpoint is a loopback port of its own, opened now
		// because the workload's environment names it.
		var err error
		if metaURL, err = a.serveMetadataLocked(w, net.JoinHostPort(a.metaHost, "0")); err != nil {
			fail(fmt.Errorf("metadata endpoint: %w", err))
			return
		}
		checkpointDir, home = w.rec.CheckpointDir, w.rec.CheckpointDir
	}
	env := []string{
		"PATH=" + envOr("PATH", "/usr/local/bin:/usr/bin:/bin"),
		"HOME=" + home,
		"LANG=C.UTF-8",
		"CUDA_VISIBLE_DEVICES=" + strings.Join(dw.GPUs, ","),
		"NVIDIA_VISIBLE_DEVICES=" + visibleDevices(dw.GPUs),
		"GPUPORTAL_INSTANCE_ID=" + strconv.FormatInt(dw.InstanceID, 10),
		"GPUPORTAL_CHECKPOINT_DIR=" + checkpointDir,
		"GPUPORTAL_METADATA_URL=" + metaURL,
		"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + metaURL,
	}
	if t := dw.Task; t != nil {
		env = append(env, "GPUPORTAL_JOB_ID="+strconv.FormatInt(t.JobID, 10), "GPUPORTAL_TASK_INDEX="+strconv.Itoa(t.Index), "GPUPORTAL_TASK_COUNT="+strconv.Itoa(t.Count))
	}
	var volumes []SpecVolume
	var volumeEnv []string
	for _, v := range dw.Volumes {
		dir, err := a.volumeDir(v.ID)
		if err == nil {
			err = a.limitVolume(dir, v.ID, v.SizeGiB) // where the root enforces sizes
		}
		if err != nil {
			a.closeMetadataLocked(w)
			fail(fmt.Errorf("volume %s: %w", v.Name, err))
			return
		}
		inside := v.MountPath
		if !inContainer {
			inside = dir // exec: the workload sees the node's directory
		}
		volumes = append(volumes, SpecVolume{HostDir: dir, MountPath: v.MountPath})
		volumeEnv = append(volumeEnv, v.Name+"="+inside)
	}
	if len(volumeEnv) > 0 {
		env = append(env, "GPUPORTAL_VOLUMES="+strings.Join(volumeEnv, ","))
	}
	for k, v := range dw.Env {
		if !strings.HasPrefix(k, "GPUPORTAL_") && k != "CUDA_VISIBLE_DEVICES" {
			env = append(env, k+"="+v)
		}
	}
	spec := Spec{
		Node: a.creds.NodeID, InstanceID: dw.InstanceID, Attempt: dw.Attempt, Lifecycle: dw.Lifecycle, GPUs: dw.GPUs, Slot: w.rec.Slot,
		Command: dw.Command, Image: dw.Image, ImageArchive: dw.ImageArchive, Env: env, CheckpointDir: w.rec.CheckpointDir, LogPath: a.logPath(dw.InstanceID), Volumes: volumes,
		DiskGiB: dw.DiskGiB, DiskKept: dw.DiskKept,
	}
	go func() {
		proc, err := a.cfg.Runtime.Start(spec)
		a.mu.Lock()
		defer a.mu.Unlock()
		if err != nil {
			a.closeMetadataLocked(w)
			fail(err)
			return
		}
		a.runningLocked(w, proc)
		a.persistLocked()
		a.wakeEnforcer() // a stop may have been asked meanwhile
		a.log.Info("workload started", "instance", dw.InstanceID, "attempt", dw.Attempt, "gpus", len(dw.GPUs), "process", proc.ID())
		a.pushNow()
	}()
}

// runningLocked takes a started or re-adopted workload's process into
// the agent's care: its metadata endpoint inside a container, the GPU
// simulation, and the watch for its end.
func (a *Agent) runningLocked(w *workload, proc Process) {
	w.proc = proc
	w.rec.ProcessID = proc.ID()
	w.rec.StartTicks = StartTicks(proc)
	if m, ok := proc.(interface{ MetadataListener() net.Listener }); ok && m.MetadataListener() != nil {
		a.serveMetadataOnLocked(w, m.MetadataListener())
	}
	if obs, ok := a.cfg.GPUs.(WorkloadObserver); ok {
		obs.WorkloadStarted(w.rec.GPUs, proc.PID())
	}
	if d, ok := proc.(diskReporter); ok {
		d.KeepDisk(w.rec.DiskKept)
	}
	go a.watch(w)
}

// slotOf is the node index of the first of uuids.
func (a *Agent) slotOf(uuids []string) int {
	if len(uuids) == 0 {
		// No-GPU mode: the first slot past the GPUs that no other such
		// workload here holds, so no two share a UID.
		used := map[int]bool{}
		for _, w := range a.workloads {
			if !w.exited && len(w.rec.GPUs) == 0 {
				used[w.rec.Slot] = true
			}
		}
		s := len(a.devices)
		for used[s] {
			s++
		}
		return s
	}
	for _, d := range a.devices {
		if len(uuids) > 0 && d.UUID == uuids[0] {
			return d.Index
		}
	}
	return 0
}

// visibleDevices is NVIDIA_VISIBLE_DEVICES for a workload's GPUs: "void"
// for none (no-GPU mode), which the NVIDIA container tooling reads as no
// device at all (an empty value would mean its default, all of them).
func visibleDevices(uuids []string) string {
	if len(uuids) == 0 {
		return "void"
	}
	return strings.Join(uuids, ",")
}

// safeName turns a checkpoint key into one directory name.
func safeName(key string, id int64) string {
	clean := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, key)
	if clean == "" || strings.Trim(clean, ".") == "" {
		return fmt.Sprintf("instance-%d", id)
	}
	return clean
}

// watch waits for a workload to end, clears whatever of its process group
// is left, checks through NVML that none of its processes remain on its
// GPUs, and reports.
func (a *Agent) watch(w *workload) {
	code := w.proc.Wait()
	a.graceForStragglers(w)
	_ = w.proc.Signal(syscall.SIGKILL) // stragglers in its process group
	free := a.gpusFreeOf(w)
	why := ""
	if e, ok := w.proc.(interface{ ExitError() string }); ok {
		why = e.ExitError()
	}
	// Noted before the exit is: once a workload shows as exited, nothing
	// of it writes any more (a sweep still sees it live until then).
	markEnded(a.cfg.CheckpointRoot, filepath.Base(w.rec.CheckpointDir))
	a.mu.Lock()
	w.exited, w.exitCode, w.endedAt, w.gpusFree, w.errText = true, code, a.clock.Now(), free, why
	a.endSessionsLocked(w.rec.InstanceID)
	a.persistLocked()
	a.mu.Unlock()
	a.log.Info("workload ended", "instance", w.rec.InstanceID, "exit_code", fmtCode(code), "signal", w.signal, "gpus_free", free)
	a.pushNow()
}

// graceForStragglers lets the rest of a workload that was sent SIGTERM
// finish within its grace after the first process exits: "sh -c prog"
// dies of the SIGTERM at once, while prog — which got it too — is still
// writing its checkpoint. Without a SIGTERM there is nothing to wait for.
func (a *Agent) graceForStragglers(w *workload) {
	r, ok := w.proc.(interface{ Remaining() bool })
	if !ok {
		return
	}
	a.mu.Lock()
	termed, until := w.rec.TermSent, w.rec.Deadline.Add(time.Duration(w.rec.Grace*float64(time.Second)))
	a.mu.Unlock()
	for termed && r.Remaining() && a.clock.Now().Before(until) {
		time.Sleep(50 * time.Millisecond)
	}
}

func fmtCode(c *int) string {
	if c == nil {
		return "unknown"
	}
	return strconv.Itoa(*c)
}

// gpusFreeOf asks NVML which processes are on the workload's GPUs and
// kills any that belong to it, for up to 10 s.
func (a *Agent) gpusFreeOf(w *workload) bool {
	deadline := a.clock.Now().Add(10 * time.Second)
	for {
		left := 0
		for _, g := range w.rec.GPUs {
			pids, err := a.cfg.GPUs.Processes(g)
			if err != nil {
				a.log.Warn("cannot list GPU processes", "gpu", g, "err", err)
				return false
			}
			for _, pid := range pids {
				if w.proc.Belongs(pid) || strconv.Itoa(pid) == w.proc.ID() {
					left++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if left == 0 {
			return true
		}
		if a.clock.Now().After(deadline) {
			a.log.Error("workload processes survive on its GPUs", "instance", w.rec.InstanceID, "left", left)
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readopt takes over the workloads a previous agent left running. One that
// is gone is reported as exited (exit code unknown) so the portal frees its
// GPUs; one whose interruption deadline passed meanwhile gets its signals.
func (a *Agent) readopt() {
	var recs []workloadRecord
	if _, err := readJSON(filepath.Join(a.cfg.StateDir, "workloads.json"), &recs); err != nil {
		a.log.Error("read workload state; workloads cannot be re-adopted", "err", err)
	}
	// A container runtime also finds, by their labels, containers the
	// state file missed (the agent died between starting one and writing
	// it down).
	if c, ok := a.cfg.Runtime.(*ContainerRuntime); ok {
		known := map[int64]bool{}
		for _, rec := range recs {
			known[rec.InstanceID] = true
		}
		// Of an instance's containers, its latest attempt's (an earlier
		// attempt's may linger, ended).
		latest := map[int64]workloadRecord{}
		for _, rec := range c.Orphans(a.creds.NodeID) {
			if l, ok := latest[rec.InstanceID]; !known[rec.InstanceID] && (!ok || rec.Attempt > l.Attempt) {
				latest[rec.InstanceID] = rec
			}
		}
		for _, rec := range latest {
			recs = append(recs, rec)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rec := range recs {
		w := &workload{rec: rec}
		if rec.TermSent {
			w.signal = "SIGTERM"
		}
		if rec.KillSent {
			w.signal = "SIGKILL"
		}
		a.workloads[rec.InstanceID] = w
		proc, ok := a.cfg.Runtime.Adopt(rec, a.creds.NodeID)
		if !ok {
			a.log.Info("workload ended while the agent was away", "instance", rec.InstanceID)
			w.exited, w.endedAt, w.gpusFree = true, a.clock.Now(), true
			continue
		}
		// exec: the workload's environment names its endpoint's address;
		// serve it there again.
		if _, inContainer := a.cfg.Runtime.(*ContainerRuntime); !inContainer && rec.MetaAddr != "" {
			if _, err := a.serveMetadataLocked(w, rec.MetaAddr); err != nil {
				a.log.Warn("re-adopted workload's metadata endpoint is lost", "instance", rec.InstanceID, "addr", rec.MetaAddr, "err", err)
			}
		}
		a.runningLocked(w, proc)
		a.log.Info("re-adopted workload", "instance", rec.InstanceID, "process", rec.ProcessID)
	}
	a.wakeEnforcer()
}

// logTail is the end of a workload's output, as the runtime wrote it.
func (a *Agent) logTail(instanceID int64) string {
	tail := tailFile(a.logPath(instanceID), 4096)
	if d, ok := a.cfg.Runtime.(interface{ DecodeLog(string) string }); ok {
		tail = d.DecodeLog(tail)
	}
	return tail
}

func (a *Agent) logPath(instanceID int64) string {
	return filepath.Join(a.cfg.StateDir, "logs", logName(instanceID))
}

// tailFile returns the last limit bytes of a file, from a line start.
func tailFile(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return ""
	}
	off := max(0, info.Size()-limit)
	buf := make([]byte, info.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	s := string(buf)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.ToValidUTF8(s, "?")
}
