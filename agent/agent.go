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
	"strings"
	"sync"
	"sync/atomic"
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
	// VolumeRoot is where volumes live (default <StateDir>/volumes): the
	// region's shared filesystem in production, so every node of the
	// region sees the same files.
	VolumeRoot   string
	Region       string
	Hostname     string
	Heartbeat    time.Duration
	MetadataAddr string // host of the per-instance metadata listeners, port 0 (default 127.0.0.1:0)
	MetricsAddr  string // "" for none
	GPUs         GPUSource
	Runtime      Runtime
	Log          *slog.Logger
	Out          io.Writer // the "agent ready" line goes here
	HTTPClient   *http.Client
	// LogCap is the most a workload's log keeps (default DefaultLogCap);
	// Retention how long ended instances' logs and checkpoint directories
	// stay (default DefaultRetention).
	LogCap    int64
	Retention time.Duration
	// Clock is the node's real time (default: the system clock): notices
	// are enforced, and workloads' start and end recorded, in it. Tests
	// may give another.
	Clock gpuportal.Clock
}

// Agent is a running node agent.
type Agent struct {
	cfg     Config
	clock   gpuportal.Clock
	log     *slog.Logger
	client  *client
	creds   credentials
	devices []Device

	mu        sync.Mutex
	workloads map[int64]*workload // by instance id
	revision  int64
	samples   []gpuportal.GPUSample

	sessions     map[string]*liveSession // the session streams served now, by id
	sessionsSeen map[string]time.Time    // sessions connected out for (each once)

	// volumeReport is the latest measurement of the volume root not yet
	// sent (the next heartbeat carries it).
	volumeReport atomic.Pointer[gpuportal.VolumeReport]
	// quotas enforces volume sizes where the volume root can (nil: it
	// cannot, for quotaNote's reason); volumeAccounts count what the
	// file server's sessions write into each volume (volumes.go).
	quotas         *projectQuotas
	quotaNote      string
	volumeAccounts volumeAccounts
	// images are the private-image imports this node was given.
	images imageImports

	wake     chan struct{} // re-check interruption deadlines
	push     chan struct{} // report workload changes now
	meta     *metadataServer
	metaHost string // where each instance's metadata listener binds
	metrics  *gpuMetrics
	registry *prometheus.Registry
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
	if cfg.VolumeRoot == "" {
		cfg.VolumeRoot = filepath.Join(cfg.StateDir, "volumes")
	}
	if cfg.VolumeRoot, err = filepath.Abs(cfg.VolumeRoot); err != nil {
		return nil, err
	}
	if cfg.CheckpointRoot, err = filepath.Abs(cfg.CheckpointRoot); err != nil {
		return nil, err
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = gpuportal.RealClock{}
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
	for _, dir := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "logs"), cfg.CheckpointRoot, cfg.VolumeRoot} {
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
		cfg: cfg, clock: cfg.Clock, log: cfg.Log, devices: cfg.GPUs.Devices(),
		client:    &client{base: cfg.Portal, http: cfg.HTTPClient},
		workloads: map[int64]*workload{}, sessions: map[string]*liveSession{}, sessionsSeen: map[string]time.Time{},
		wake: make(chan struct{}, 1), push: make(chan struct{}, 1),
		registry: prometheus.NewRegistry(), metaHost: metaHost,
	}
	a.metrics = newGPUMetrics(a.registry)
	a.meta = newMetadataServer(a.metadataView, a.workloadReport)
	a.quotas, a.quotaNote = detectProjectQuotas(cfg.VolumeRoot)
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
	if enforced, note := a.volumeEnforcement(); !enforced {
		a.log.Warn("volumes: "+note, "root", a.cfg.VolumeRoot)
	}
	for _, loop := range []func(context.Context){a.cfg.GPUs.Watch, a.enforceLoop, a.pushLoop, a.sampleLoop, a.diskLoop, a.volumeLoop} {
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
	b := backoff{min: 500 * time.Millisecond, max: gpuportal.AgentBackoffCap}
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
	b := backoff{min: 500 * time.Millisecond, max: gpuportal.AgentBackoffCap}
	for ctx.Err() == nil {
		hb := a.heartbeat(true)
		desired, err := a.client.heartbeat(ctx, hb)
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
		a.acknowledge(hb.Workloads)
		a.deleteVolumes(desired.DeleteVolumes)
		a.removeImages(desired.DeleteImages)
		a.releaseDisks(desired.ReleaseDisks)
		a.importImages(desired.ImportImages)
		a.reconcile(desired)
		a.startSessions(ctx, desired.Sessions)
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
	hb := gpuportal.AgentHeartbeat{Revision: a.revision, HeartbeatSeconds: int(a.cfg.Heartbeat / time.Second), GPUs: a.samples, Workloads: a.statusesLocked(),
		Volumes: a.volumeReport.Swap(nil), Images: a.images.reports()}
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
		if !w.rec.CheckpointAt.IsZero() {
			at := w.rec.CheckpointAt
			st.CheckpointAt = &at
		}
		if !w.rec.ReadyAt.IsZero() {
			at := w.rec.ReadyAt
			st.ReadyAt = &at
		}
		if w.rec.DrillReadyAfter != nil {
			st.DrillID, st.DrillReadyAfterSeconds = w.rec.DrillID, w.rec.DrillReadyAfter
		}
		if !w.exited && w.rec.DiskGiB > 0 {
			st.Disk = a.diskStatus(w)
		}
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

// diskStatus is what the agent says of a running workload's disk.
func (a *Agent) diskStatus(w *workload) *gpuportal.WorkloadDisk {
	if d, ok := w.proc.(diskReporter); ok {
		if used, ok := d.DiskUsed(); ok {
			return &gpuportal.WorkloadDisk{UsedBytes: used, Enforced: true}
		}
	}
	c, ok := a.cfg.Runtime.(*ContainerRuntime)
	if ok && c.Disks {
		// Disks are this node's: one not mounted now is being mounted or
		// let go (its workload starting or ending) — nothing to say.
		// "No disk" would tell the portal to let a kept disk go.
		return nil
	}
	note := "this node's runtime gives workloads no disk of their own"
	if ok && c.DiskNote != "" {
		note = c.DiskNote
	}
	return &gpuportal.WorkloadDisk{Note: note}
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
		if err := a.client.events(pctx, ev); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("event push failed (the next heartbeat carries it)", "err", err)
			}
		} else {
			a.acknowledge(ev.Workloads)
		}
		cancel()
	}
}

// acknowledge notes the exits a report that the portal answered carried:
// those workloads may be forgotten once the portal stops listing them.
func (a *Agent) acknowledge(sent []gpuportal.WorkloadStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, st := range sent {
		if w := a.workloads[st.InstanceID]; w != nil && st.State == gpuportal.WorkloadExited && w.exited && w.rec.Attempt == st.Attempt {
			w.acked = true
		}
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

func envOr(k, fallback string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return fallback
}

// NodeID is the id the portal gave this node (after Run has enrolled).
func (a *Agent) NodeID() string { return a.creds.NodeID }
