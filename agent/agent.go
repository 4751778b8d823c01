// Package agent is the node agent: it enrols the node with the portal,
// reports GPU telemetry (through a GPUSource: NVML or its mocks), runs the
// workloads the portal wants on the GPUs it names, serves each workload an
// EC2-style metadata endpoint, and carries out interruptions (notice,
// SIGTERM at the deadline, SIGKILL after the grace, then a check that the
// GPUs are free). It never imports the portal's web or store packages.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gpuportal"
)

// Config is what an agent needs from the outside.
type Config struct {
	Portal         string
	EnrollToken    string
	StateDir       string
	CheckpointRoot string // default <StateDir>/checkpoints
	Region         string
	Hostname       string
	Heartbeat      time.Duration
	MetadataAddr   string // host of the per-instance metadata listeners, port 0 (default 127.0.0.1:0)
	MetricsAddr    string // "" for none
	GPUs           GPUSource
	Runtime        Runtime
	Log            *slog.Logger
	Out            io.Writer // the "agent ready" line goes here
	HTTPClient     *http.Client
}

// Agent is a running node agent.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	client  *client
	creds   credentials
	devices []Device

	mu        sync.Mutex
	workloads map[int64]*workload // by instance id
	revision  int64
	samples   []gpuportal.GPUSample

	wake     chan struct{} // re-check interruption deadlines
	push     chan struct{} // report workload changes now
	meta     *metadataServer
	metaHost string // where each instance's metadata listener binds
	metrics  *gpuMetrics
	registry *prometheus.Registry
}

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
}

// New checks the configuration and prepares the state directory.
func New(cfg Config) (*Agent, error) {
	if cfg.Portal == "" {
		return nil, errors.New("--portal is required")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("--state-dir is required")
	}
	if cfg.GPUs == nil || cfg.Runtime == nil {
		return nil, errors.New("agent: no GPU source or runtime")
	}
	if cfg.CheckpointRoot == "" {
		cfg.CheckpointRoot = filepath.Join(cfg.StateDir, "checkpoints")
	}
	var err error
	if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
		return nil, err
	}
	if cfg.CheckpointRoot, err = filepath.Abs(cfg.CheckpointRoot); err != nil {
		return nil, err
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.MetadataAddr == "" {
		cfg.MetadataAddr = "127.0.0.1:0"
	}
	metaHost, metaPort, err := net.SplitHostPort(cfg.MetadataAddr)
	if err != nil || metaPort != "0" {
		return nil, fmt.Errorf("--metadata-addr %q: want HOST:0 — every instance gets a port of its own on HOST", cfg.MetadataAddr)
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.Heartbeat + 30*time.Second}
	}
	for _, dir := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "logs"), cfg.CheckpointRoot} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	// The state dir holds the node token and every workload's log: only
	// the agent's user may enter it, also when it existed before.
	if err := os.Chmod(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	// Workloads of another user must pass through to their checkpoint
	// directories (each their own, 0700): the directories above them may
	// be entered, not listed.
	if r, ok := cfg.Runtime.(ExecRuntime); ok && r.Init != "" && r.UID != os.Geteuid() {
		for dir := filepath.Clean(cfg.CheckpointRoot); ; dir = filepath.Dir(dir) {
			if err := os.Chmod(dir, 0o711); err != nil {
				return nil, fmt.Errorf("checkpoint root: %w", err)
			}
			if dir == filepath.Clean(cfg.StateDir) || !strings.HasPrefix(dir, filepath.Clean(cfg.StateDir)+string(filepath.Separator)) {
				break
			}
		}
	}
	a := &Agent{
		cfg: cfg, log: cfg.Log, devices: cfg.GPUs.Devices(),
		client:    &client{base: cfg.Portal, http: cfg.HTTPClient},
		workloads: map[int64]*workload{},
		wake:      make(chan struct{}, 1), push: make(chan struct{}, 1),
		registry: prometheus.NewRegistry(), metaHost: metaHost,
	}
	a.metrics = newGPUMetrics(a.registry)
	a.meta = newMetadataServer(a.metadataView)
	return a, nil
}

// Run enrols (or reuses the stored credentials), then heartbeats and
// reconciles until ctx ends. Workloads keep running when the agent stops:
// the next agent re-adopts them.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.enrol(ctx); err != nil {
		return err
	}
	var servers []*http.Server
	if a.cfg.MetricsAddr != "" {
		l, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics endpoint: %w", err)
		}
		a.log.Info("metrics listening", "addr", l.Addr().String())
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(l) }()
	}
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
		a.mu.Lock()
		for _, w := range a.workloads {
			a.closeMetadataLocked(w)
		}
		a.mu.Unlock()
	}()

	a.readopt()
	a.sample()
	fmt.Fprintf(a.cfg.Out, "agent ready node=%s gpus=%d\n", a.creds.NodeID, len(a.devices))

	// The other loops end with the heartbeat loop: when it gives up (the
	// portal refuses this node's token) the agent stops, instead of
	// hanging on loops that only a signal would end.
	loopCtx, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){a.cfg.GPUs.Watch, a.enforceLoop, a.pushLoop, a.sampleLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); loop(loopCtx) }()
	}
	err := a.heartbeatLoop(ctx)
	stopLoops()
	wg.Wait()
	a.mu.Lock()
	a.persistLocked()
	a.mu.Unlock()
	return err
}

// enrol loads the node's credentials, or registers with the enrollment token.
func (a *Agent) enrol(ctx context.Context) error {
	path := filepath.Join(a.cfg.StateDir, "node.json")
	if ok, err := readJSON(path, &a.creds); err != nil {
		return err
	} else if ok && a.creds.NodeToken != "" {
		a.client.setToken(a.creds.NodeToken)
		return nil
	}
	if a.cfg.EnrollToken == "" {
		return errors.New("this node is not enrolled yet: pass --enroll-token (from `portal enroll-token --region R`)")
	}
	reg := gpuportal.AgentRegistration{EnrollToken: a.cfg.EnrollToken, Hostname: a.cfg.Hostname, Region: a.cfg.Region, HeartbeatSeconds: int(a.cfg.Heartbeat / time.Second)}
	for _, d := range a.devices {
		reg.GPUs = append(reg.GPUs, gpuportal.AgentGPU{UUID: d.UUID, Index: d.Index, Name: d.Name, MemoryTotalMiB: d.MemoryTotalMiB})
	}
	b := backoff{min: 500 * time.Millisecond, max: 30 * time.Second}
	for {
		creds, err := a.client.register(ctx, reg)
		if err == nil {
			a.creds = credentials{Portal: a.cfg.Portal, NodeID: creds.NodeID, NodeToken: creds.NodeToken}
			a.client.setToken(creds.NodeToken)
			return writeJSON(path, a.creds)
		}
		if errors.Is(err, errRejected) {
			return fmt.Errorf("enrollment refused: %w", err)
		}
		a.log.Warn("cannot reach the portal to enrol; retrying", "err", err)
		if !sleepCtx(ctx, b.next()) {
			return ctx.Err()
		}
	}
}

// heartbeatLoop long-polls the portal: each request reports the node and
// comes back when the desired state changes (or after one heartbeat).
func (a *Agent) heartbeatLoop(ctx context.Context) error {
	b := backoff{min: 500 * time.Millisecond, max: 30 * time.Second}
	for ctx.Err() == nil {
		desired, err := a.client.heartbeat(ctx, a.heartbeat(true))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, errRejected) && strings.Contains(err.Error(), "401") {
				return fmt.Errorf("the portal no longer accepts this node's token (re-enrol with a new token after removing %s): %w",
					filepath.Join(a.cfg.StateDir, "node.json"), err)
			}
			// Keep workloads running and deadlines enforced; retry.
			a.log.Warn("heartbeat failed; retrying", "err", err)
			sleepCtx(ctx, b.next())
			continue
		}
		b.reset()
		a.reconcile(desired)
		if desired.RotateToken {
			a.rotateToken(ctx)
		}
	}
	return nil
}

// rotateToken fetches the new node token the portal asked this node to
// take, keeps it in the state dir and uses it from now on. Should any step
// fail, the old token still works and the next heartbeat asks again.
func (a *Agent) rotateToken(ctx context.Context) {
	creds, err := a.client.rotateToken(ctx)
	if err != nil {
		a.log.Warn("token rotation failed; the next heartbeat retries", "err", err)
		return
	}
	next := a.creds
	next.NodeToken = creds.NodeToken
	if err := writeJSON(filepath.Join(a.cfg.StateDir, "node.json"), next); err != nil {
		a.log.Error("cannot keep the new node token; staying on the old one", "err", err)
		return
	}
	a.creds = next
	a.client.setToken(next.NodeToken)
	a.log.Info("node token rotated")
}

func (a *Agent) heartbeat(wait bool) gpuportal.AgentHeartbeat {
	a.mu.Lock()
	defer a.mu.Unlock()
	hb := gpuportal.AgentHeartbeat{Revision: a.revision, HeartbeatSeconds: int(a.cfg.Heartbeat / time.Second), GPUs: a.samples, Workloads: a.statusesLocked()}
	if wait {
		hb.WaitSeconds = hb.HeartbeatSeconds
	}
	return hb
}

func (a *Agent) statusesLocked() []gpuportal.WorkloadStatus {
	out := []gpuportal.WorkloadStatus{}
	for _, w := range a.workloads {
		if w.proc == nil && !w.exited {
			continue // still starting: the portal keeps it pending
		}
		st := gpuportal.WorkloadStatus{InstanceID: w.rec.InstanceID, Attempt: w.rec.Attempt, State: gpuportal.WorkloadRunning, StartedAt: w.rec.StartedAt, Signal: w.signal,
			LogTail: a.logTail(w.rec.InstanceID)}
		if w.exited {
			st.State = gpuportal.WorkloadExited
			end := w.endedAt
			st.EndedAt = &end
			st.ExitCode = w.exitCode
			st.GPUsFree = w.gpusFree
			st.Error = w.errText
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y gpuportal.WorkloadStatus) int { return int(x.InstanceID - y.InstanceID) })
	return out
}

// pushLoop reports workload changes at once rather than at the next
// heartbeat; a lost push is healed by the heartbeat.
func (a *Agent) pushLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.push:
		}
		a.mu.Lock()
		ev := gpuportal.AgentEvents{Workloads: a.statusesLocked()}
		a.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := a.client.events(pctx, ev); err != nil && ctx.Err() == nil {
			a.log.Warn("event push failed (the next heartbeat carries it)", "err", err)
		}
		cancel()
	}
}

func (a *Agent) pushNow() {
	select {
	case a.push <- struct{}{}:
	default:
	}
}

func (a *Agent) wakeEnforcer() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// sampleLoop refreshes telemetry (and the Prometheus gauges) every few
// seconds, so the heartbeat and /metrics never wait on NVML.
func (a *Agent) sampleLoop(ctx context.Context) {
	every := min(a.cfg.Heartbeat, 5*time.Second)
	for sleepCtx(ctx, every) {
		a.sample()
	}
}

func (a *Agent) sample() {
	s := a.cfg.GPUs.Sample()
	a.metrics.update(a.devices, s, a.cfg.Hostname)
	a.mu.Lock()
	a.samples = s
	a.mu.Unlock()
}

// reconcile makes the node match the desired state: start what should run,
// schedule ordered interruptions, stop what should not run, and forget
// finished workloads the portal no longer lists (it has their report).
func (a *Agent) reconcile(d gpuportal.AgentDesired) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revision = d.Revision
	want := map[int64]gpuportal.DesiredWorkload{}
	for _, dw := range d.Workloads {
		want[dw.InstanceID] = dw
	}
	now := time.Now()
	changed := false
	for id, w := range a.workloads {
		dw, ok := want[id]
		switch {
		case ok && dw.Attempt == w.rec.Attempt:
			continue
		case w.exited:
			a.closeMetadataLocked(w)
			delete(a.workloads, id) // reported and acknowledged (or superseded)
			changed = true
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
		if w == nil {
			if busy := a.gpusBusyLocked(dw.GPUs); busy != "" {
				a.log.Info("waiting for GPU to be free before starting", "instance", dw.InstanceID, "gpu", busy)
				continue
			}
			a.startLocked(dw)
			changed = true
			continue
		}
		if dw.Interrupt == nil && !w.exited && !w.rec.NoticeAt.IsZero() && !w.rec.TermSent && !w.rec.StopAsked {
			// The portal called the notice off (a top-up arrived in time).
			a.log.Info("interruption notice withdrawn", "instance", dw.InstanceID)
			w.rec.NoticeAt, w.rec.Deadline, w.rec.Grace, w.rec.Reason, w.rec.Action = time.Time{}, time.Time{}, 0, "", ""
			changed = true
		}
		if dw.Interrupt != nil && !w.exited && w.rec.NoticeAt.IsZero() {
			w.rec.NoticeAt = now
			w.rec.Deadline = now.Add(time.Duration(dw.Interrupt.DeadlineInSeconds * float64(time.Second)))
			w.rec.Grace = float64(dw.Interrupt.GraceSeconds)
			w.rec.Reason = dw.Interrupt.Reason
			w.rec.Action = dw.Interrupt.Action
			a.log.Info("interruption notice", "instance", dw.InstanceID, "deadline", w.rec.Deadline.UTC().Format(time.RFC3339), "reason", dw.Interrupt.Reason)
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
		InstanceID: dw.InstanceID, Attempt: dw.Attempt, Lifecycle: dw.Lifecycle, GPUs: dw.GPUs, Command: dw.Command,
		CheckpointDir: filepath.Join(a.cfg.CheckpointRoot, safeName(dw.CheckpointKey, dw.InstanceID)),
		StartedAt:     time.Now(),
	}}
	a.workloads[dw.InstanceID] = w
	fail := func(err error) {
		a.log.Error("cannot start workload", "instance", dw.InstanceID, "err", err)
		w.exited, w.endedAt, w.errText, w.gpusFree = true, time.Now(), err.Error(), true
		a.pushNow()
	}
	if err := os.MkdirAll(w.rec.CheckpointDir, 0o700); err != nil {
		fail(err)
		return
	}
	_, inContainer := a.cfg.Runtime.(*ContainerRuntime)
	metaURL, checkpointDir := "http://"+ContainerMetadataAddr, ContainerCheckpointDir
	if !inContainer {
		// exec: the endpoint is a loopback port of its own, opened now
		// because the workload's environment names it.
		var err error
		if metaURL, err = a.serveMetadataLocked(w, net.JoinHostPort(a.metaHost, "0")); err != nil {
			fail(fmt.Errorf("metadata endpoint: %w", err))
			return
		}
		checkpointDir = w.rec.CheckpointDir
	}
	env := []string{
		"PATH=" + envOr("PATH", "/usr/local/bin:/usr/bin:/bin"),
		"HOME=" + checkpointDir,
		"LANG=C.UTF-8",
		"CUDA_VISIBLE_DEVICES=" + strings.Join(dw.GPUs, ","),
		"NVIDIA_VISIBLE_DEVICES=" + strings.Join(dw.GPUs, ","),
		"GPUPORTAL_INSTANCE_ID=" + strconv.FormatInt(dw.InstanceID, 10),
		"GPUPORTAL_CHECKPOINT_DIR=" + checkpointDir,
		"GPUPORTAL_METADATA_URL=" + metaURL,
		"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + metaURL,
	}
	if t := dw.Task; t != nil {
		env = append(env, "GPUPORTAL_JOB_ID="+strconv.FormatInt(t.JobID, 10), "GPUPORTAL_TASK_INDEX="+strconv.Itoa(t.Index), "GPUPORTAL_TASK_COUNT="+strconv.Itoa(t.Count))
	}
	for k, v := range dw.Env {
		if !strings.HasPrefix(k, "GPUPORTAL_") && k != "CUDA_VISIBLE_DEVICES" {
			env = append(env, k+"="+v)
		}
	}
	spec := Spec{
		Node: a.creds.NodeID, InstanceID: dw.InstanceID, Attempt: dw.Attempt, Lifecycle: dw.Lifecycle, GPUs: dw.GPUs, Slot: a.slotOf(dw.GPUs),
		Command: dw.Command, Image: dw.Image, Env: env, CheckpointDir: w.rec.CheckpointDir, LogPath: a.logPath(dw.InstanceID),
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
	go a.watch(w)
}

// slotOf is the node index of the first of uuids.
func (a *Agent) slotOf(uuids []string) int {
	for _, d := range a.devices {
		if len(uuids) > 0 && d.UUID == uuids[0] {
			return d.Index
		}
	}
	return 0
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

func envOr(k, fallback string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return fallback
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
	a.mu.Lock()
	w.exited, w.exitCode, w.endedAt, w.gpusFree, w.errText = true, code, time.Now(), free, why
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
	for termed && r.Remaining() && time.Now().Before(until) {
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
	deadline := time.Now().Add(10 * time.Second)
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
		if time.Now().After(deadline) {
			a.log.Error("workload processes survive on its GPUs", "instance", w.rec.InstanceID, "left", left)
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// enforceLoop sends SIGTERM at each deadline and SIGKILL after the grace,
// in this machine's clock, whether or not the portal can be reached.
func (a *Agent) enforceLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := a.enforce(time.Now())
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.wake:
		}
	}
}

// enforce sends the signals that are due and returns when the next one is.
func (a *Agent) enforce(now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var next time.Time
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	dirty := false
	for _, w := range a.workloads {
		if w.exited || w.proc == nil || w.rec.Deadline.IsZero() {
			continue
		}
		killAt := w.rec.Deadline.Add(time.Duration(w.rec.Grace * float64(time.Second)))
		switch {
		case !w.rec.TermSent && !now.Before(w.rec.Deadline):
			a.log.Info("deadline: SIGTERM", "instance", w.rec.InstanceID)
			_ = w.proc.Signal(syscall.SIGTERM)
			w.rec.TermSent, w.signal, dirty = true, "SIGTERM", true
			soonest(killAt)
		case !w.rec.TermSent:
			soonest(w.rec.Deadline)
		case !w.rec.KillSent && !now.Before(killAt):
			a.log.Info("grace over: SIGKILL", "instance", w.rec.InstanceID)
			_ = w.proc.Signal(syscall.SIGKILL)
			w.rec.KillSent, w.signal, dirty = true, "SIGKILL", true
		case !w.rec.KillSent:
			soonest(killAt)
		}
	}
	if dirty {
		a.persistLocked()
	}
	return next
}

// persistLocked writes the running workloads to the state directory.
func (a *Agent) persistLocked() {
	var recs []workloadRecord
	for _, w := range a.workloads {
		if !w.exited && w.proc != nil {
			recs = append(recs, w.rec)
		}
	}
	if err := writeJSON(filepath.Join(a.cfg.StateDir, "workloads.json"), recs); err != nil {
		a.log.Error("save workload state", "err", err)
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
		for _, rec := range c.Orphans(a.creds.NodeID) {
			if !known[rec.InstanceID] {
				known[rec.InstanceID] = true
				recs = append(recs, rec)
			}
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
			w.exited, w.endedAt, w.gpusFree = true, time.Now(), true
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

// metadataView answers an instance's metadata endpoint.
func (a *Agent) metadataView(instanceID int64) (metadataView, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w, ok := a.workloads[instanceID]
	if !ok {
		return metadataView{}, false
	}
	v := metadataView{instanceID: strconv.FormatInt(w.rec.InstanceID, 10), lifecycle: w.rec.Lifecycle}
	if !w.rec.NoticeAt.IsZero() {
		v.deadline, v.action = w.rec.Deadline, w.rec.Action
	}
	return v, true
}

// serveMetadataLocked opens the instance's own metadata listener on addr
// and returns the endpoint's URL (root path, as the AWS SDKs want it).
func (a *Agent) serveMetadataLocked(w *workload, addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	w.rec.MetaAddr = l.Addr().String()
	a.log.Info("metadata endpoint listening", "instance", w.rec.InstanceID, "addr", w.rec.MetaAddr)
	a.serveMetadataOnLocked(w, l)
	return "http://" + w.rec.MetaAddr, nil
}

// serveMetadataOnLocked answers the instance's metadata requests on l.
func (a *Agent) serveMetadataOnLocked(w *workload, l net.Listener) {
	w.metaSrv = &http.Server{Handler: a.meta.forInstance(w.rec.InstanceID), ReadHeaderTimeout: 5 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(l) }(w.metaSrv)
}

func (a *Agent) closeMetadataLocked(w *workload) {
	if w.metaSrv != nil {
		_ = w.metaSrv.Close()
		w.metaSrv = nil
	}
}

// logTail is the end of a workload's output, as the runtime wrote it.
func (a *Agent) logTail(instanceID int64) string {
	tail := tailFile(a.logPath(instanceID), 4096)
	if d, ok := a.cfg.Runtime.(interface{ DecodeLog(string) string }); ok {
		tail = d.DecodeLog(tail)
	}
	return tail
}

// NodeID is the id the portal gave this node (after Run has enrolled).
func (a *Agent) NodeID() string { return a.creds.NodeID }

func (a *Agent) logPath(instanceID int64) string {
	return filepath.Join(a.cfg.StateDir, "logs", fmt.Sprintf("instance-%d.log", instanceID))
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
