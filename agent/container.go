package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"gpuportal"
)

// Inside a container the workload finds its metadata endpoint and its
// checkpoint directory at the same places on every node.
const (
	ContainerMetadataAddr  = "127.0.0.1:80"
	ContainerCheckpointDir = "/checkpoint"
)

// DefaultUserNSBase is the first UID of the node that containers' user
// namespaces map to: far above any real user of the node (and above the
// 100000+ ranges /etc/subuid hands out to rootless users).
const DefaultUserNSBase = 1_000_000

// ContainerRuntime runs each workload in a container of its own through
// the podman CLI (rootful, with the runc OCI runtime) or, where the two
// CLIs agree, docker's. The CLI rather than podman's Docker-compatible
// API: podman has no daemon to talk to (the API would be one more service
// to run on every node), every command used here exists in both CLIs with
// JSON output, and containers started this way are children of podman's
// conmon, not of the agent, so they outlive an agent restart.
//
// Each container gets: the image the customer chose (never pulled: the
// node operator preloads images), a user of its own (UIDBase + the index
// of its first GPU, unique on the node while it runs), exactly its GPUs
// as CDI devices, CPU, memory, pids and /dev/shm limits in proportion to
// its GPUs, no capabilities, its own network namespace (no network unless
// Network is "bridge") with its metadata endpoint listening inside it, and
// its checkpoint directory at /checkpoint — nothing else of the host.
type ContainerRuntime struct {
	CLI          string // "podman" or "docker"
	OCIRuntime   string // podman's --runtime (runc here: crun refuses hybrid cgroups); "" for the default
	CDIKind      string // e.g. nvidia.com/gpu
	DefaultImage string // for instances launched before the image catalog
	Network      string // none or bridge
	// EgressAllow are the ranges a bridge workload may reach although
	// they are private (a package mirror, a resolver); see egress.go.
	EgressAllow []netip.Prefix
	UIDBase     int

	// Limits per GPU of the instance.
	CPUsPerGPU   float64
	MemoryPerGPU int64 // bytes; swap is not allowed on top
	ShmPerGPU    int64 // bytes
	PidsPerGPU   int
	NoFile       int   // open files per process
	TmpPerGPU    int64 // bytes of /tmp and /var/tmp (the root filesystem is read-only)
	// UserNSBase, when set, runs every container in a user namespace whose
	// UIDs and GIDs 0–65535 are the node's UserNSBase onwards: a workload's
	// UID (and root inside the container) is then no real user of the node.
	UserNSBase int
	LogMax     int64 // bytes of output the engine keeps (its log rotates past it)
	// Disks: the node gives each container a sized disk of its own as its
	// writable root filesystem (rootfs.go; ProbeDisks says whether it
	// can); DiskNote says why not when it cannot. Disks live in
	// ImageRoot, their mounts in StateDir.
	Disks     bool
	DiskNote  string
	ImageRoot string
	StateDir  string
	// SFTPHelper is the node's static SFTP server (gpuportal-sftp),
	// mounted read-only into every container at gpuportal.SFTPHelperPath
	// for sftp and scp sessions; "" offers none.
	SFTPHelper string

	Log  *slog.Logger
	OOMs *OOMWatcher // nil: rely on the engine's own OOMKilled flag
}

// Container labels: what a restarted agent needs to re-adopt a container
// its state file does not list.
const (
	labelNode       = "gpuportal.node"
	labelInstance   = "gpuportal.instance"
	labelAttempt    = "gpuportal.attempt"
	labelLifecycle  = "gpuportal.lifecycle"
	labelGPUs       = "gpuportal.gpus"
	labelCheckpoint = "gpuportal.checkpoint"
)

func (r *ContainerRuntime) Name() string { return r.CLI }

func (r *ContainerRuntime) containerName(spec Spec) string {
	return fmt.Sprintf("gpuportal-%s-%d-%d", spec.Node, spec.InstanceID, spec.Attempt)
}

// tmpSize is the /tmp of an instance of n GPUs (default 4 GiB a GPU).
func (r *ContainerRuntime) tmpSize(n int) int64 {
	if r.TmpPerGPU > 0 {
		return r.TmpPerGPU * int64(n)
	}
	return 4 << 30 * int64(n)
}

func (r *ContainerRuntime) logMax() int64 {
	if r.LogMax > 0 {
		return r.LogMax
	}
	return DefaultLogCap
}

// CreateArgs is the `create` command line for a workload in the engine's
// own copy of its image (no disk of its own).
func (r *ContainerRuntime) CreateArgs(spec Spec) []string {
	return r.createArgs(spec, "", imageLayout{})
}

// rootInside: the workload is root in its container, which only a user
// namespace makes safe.
func (r *ContainerRuntime) rootInside() bool { return r.UserNSBase > 0 }

// workloadHostUID is the node's UID of a workload's processes (and of
// the files it writes into its checkpoint directory).
func (r *ContainerRuntime) workloadHostUID(spec Spec) int {
	if r.rootInside() {
		return r.UserNSBase
	}
	return r.UIDBase + spec.Slot
}

// createArgs is the `create` command line for a workload; with rootfs it
// runs on that tree (the instance's disk over the image's layers, whose
// environment img carries) rather than on the engine's copy of its image.
func (r *ContainerRuntime) createArgs(spec Spec, rootfs string, img imageLayout) []string {
	n := max(len(spec.GPUs), 1)
	image := spec.Image
	if image == "" {
		image = r.DefaultImage
	}
	mem := r.MemoryPerGPU * int64(n)
	pids := r.PidsPerGPU * n
	args := []string{"create"}
	if r.CLI == "podman" && r.OCIRuntime != "" {
		args = append(args, "--runtime", r.OCIRuntime)
	}
	args = append(args,
		"--name", r.containerName(spec),
		"--hostname", fmt.Sprintf("instance-%d", spec.InstanceID),
		"--label", labelNode+"="+spec.Node,
		"--label", labelInstance+"="+strconv.FormatInt(spec.InstanceID, 10),
		"--label", labelAttempt+"="+strconv.Itoa(spec.Attempt),
		"--label", labelLifecycle+"="+string(spec.Lifecycle),
		"--label", labelGPUs+"="+strings.Join(spec.GPUs, ","),
		"--label", labelCheckpoint+"="+spec.CheckpointDir,
	)
	if rootfs == "" {
		args = append(args, "--pull", "never")
	}
	if r.rootInside() {
		// Root inside, an unprivileged range of the node outside, with
		// the engine's default capabilities — which hold only inside the
		// namespace: apt-get, pip install, chown work as in a VM.
		m := strconv.Itoa(r.UserNSBase)
		args = append(args, "--uidmap", "0:"+m+":65536", "--gidmap", "0:"+m+":65536", "--user", "0:0")
	} else {
		uid := strconv.Itoa(r.UIDBase + spec.Slot)
		args = append(args, "--user", uid+":"+uid, "--cap-drop", "ALL")
	}
	args = append(args, "--network", r.Network)
	if r.Network == "bridge" {
		// IPv4 only: the egress routes (egress.go) are IPv4's.
		args = append(args, "--sysctl", "net.ipv6.conf.all.disable_ipv6=1", "--sysctl", "net.ipv6.conf.default.disable_ipv6=1")
	}
	args = append(args,
		"--security-opt", "no-new-privileges",
		"--cpus", strconv.FormatFloat(r.CPUsPerGPU*float64(n), 'f', 2, 64),
		"--memory", strconv.FormatInt(mem, 10),
		"--memory-swap", strconv.FormatInt(mem, 10),
		"--pids-limit", strconv.Itoa(pids),
		"--shm-size", strconv.FormatInt(r.ShmPerGPU*int64(n), 10),
		// Explicit: the engines' defaults raise limits, which needs
		// CAP_SYS_RESOURCE. nproc counts per UID, which is the
		// container's own.
		"--ulimit", fmt.Sprintf("nofile=%d:%d", r.NoFile, r.NoFile),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", pids, pids),
		"--volume", spec.CheckpointDir+":"+ContainerCheckpointDir+":rw",
	)
	if r.SFTPHelper != "" {
		args = append(args, "--volume", r.SFTPHelper+":"+gpuportal.SFTPHelperPath+":ro")
	}
	for _, v := range spec.Volumes {
		args = append(args, "--volume", v.HostDir+":"+v.MountPath+":rw")
	}
	if len(spec.Volumes) > 0 {
		// The owner's workloads share their volumes through one group;
		// files they make are the group's to write (umask 002).
		args = append(args, "--group-add", strconv.Itoa(gpuportal.VolumeGID))
		if r.CLI == "podman" {
			args = append(args, "--umask", "0002")
		}
	}
	args = append(args, "--workdir", ContainerCheckpointDir)
	if rootfs == "" {
		// Without a disk of its own nothing of the node's disk is the
		// workload's but the checkpoint directory: the image is
		// read-only, scratch space a sized tmpfs (charged to the
		// instance's memory).
		args = append(args,
			"--read-only",
			"--tmpfs", "/tmp:rw,mode=1777,size="+strconv.FormatInt(r.tmpSize(n), 10),
			"--tmpfs", "/var/tmp:rw,mode=1777,size="+strconv.FormatInt(r.tmpSize(n), 10),
		)
	}
	if r.CLI == "podman" {
		// conmon writes the output where the agent keeps every log, and
		// keeps it under the cap.
		args = append(args, "--log-driver", "k8s-file", "--log-opt", "path="+spec.LogPath)
	} else {
		args = append(args, "--log-driver", "json-file")
	}
	args = append(args, "--log-opt", "max-size="+strconv.FormatInt(r.logMax(), 10))
	for _, g := range spec.GPUs {
		args = append(args, "--device", r.CDIKind+"="+g)
	}
	// The image's own environment first (a tree of its own has none),
	// then the instance's, which wins.
	for _, kv := range img.Env {
		args = append(args, "--env", kv)
	}
	for _, kv := range spec.Env {
		if strings.HasPrefix(kv, "PATH=") {
			continue // the image's own
		}
		args = append(args, "--env", kv)
	}
	if rootfs != "" {
		return append(args, "--rootfs", rootfs, "/bin/sh", "-c", spec.Command)
	}
	return append(args, image, "/bin/sh", "-c", spec.Command)
}

func (r *ContainerRuntime) cli(args ...string) (string, error) {
	var stderr strings.Builder
	cmd := exec.Command(r.CLI, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("%s %s: %s", r.CLI, args[0], msg)
	}
	return strings.TrimSpace(string(out)), nil
}

// Start creates the container, opens its metadata endpoint inside its
// network namespace, and only then starts the workload, so that its first
// request finds the endpoint there.
func (r *ContainerRuntime) Start(spec Spec) (Process, error) {
	if err := chownTree(spec.CheckpointDir, r.workloadHostUID(spec)); err != nil {
		return nil, fmt.Errorf("checkpoint directory: %w", err)
	}
	name := r.containerName(spec)
	_, _ = r.cli("rm", "--force", name) // a leftover of a start the agent did not finish
	if err := r.ensureImage(spec); err != nil {
		return nil, err
	}
	rootfs, img, err := r.prepareDisk(spec)
	if err != nil {
		return nil, err
	}
	// A start that fails keeps what the disk held before it (a kept
	// disk is the customer's environment), and takes a new one away.
	keepOnFailure := spec.DiskKept
	id, err := r.cli(r.createArgs(spec, rootfs, img)...)
	if err != nil {
		r.releaseDisk(spec.InstanceID, keepOnFailure)
		return nil, r.explain(err, spec)
	}
	fail := func(err error) (Process, error) {
		_, _ = r.cli("rm", "--force", id)
		r.releaseDisk(spec.InstanceID, keepOnFailure)
		return nil, err
	}
	var meta net.Listener
	if r.CLI == "podman" {
		// podman init sets the container up (namespaces, cgroup) without
		// running its command.
		if _, err := r.cli("init", id); err != nil {
			return fail(err)
		}
		st, err := r.inspect(id)
		if err != nil {
			return fail(err)
		}
		if err := r.isolate(st.Pid); err != nil {
			return fail(err)
		}
		if meta, err = listenInNetns(st.Pid, ContainerMetadataAddr); err != nil {
			return fail(fmt.Errorf("metadata endpoint in the container: %w", err))
		}
	}
	if _, err := r.cli("start", id); err != nil {
		if meta != nil {
			meta.Close()
		}
		return fail(err)
	}
	st, err := r.inspect(id)
	if err != nil {
		return fail(err)
	}
	if meta == nil {
		// docker has no `init`: the routes are set and the endpoint opens
		// just after the start (a workload's very first request may have
		// to retry, as the AWS SDKs do).
		if err := r.isolate(st.Pid); err != nil {
			return fail(err)
		}
		if meta, err = listenInNetns(st.Pid, ContainerMetadataAddr); err != nil {
			return fail(fmt.Errorf("metadata endpoint in the container: %w", err))
		}
		if st.LogPath != "" {
			_ = os.Remove(spec.LogPath)
			_ = os.Symlink(st.LogPath, spec.LogPath)
		}
	}
	return r.track(id, st, meta), nil
}

// prepareDisk builds the tree of a workload with a disk (a size, and a
// node that can): its root and its image's environment. Without one the
// container runs on the engine's copy of its image ("" root).
func (r *ContainerRuntime) prepareDisk(spec Spec) (string, imageLayout, error) {
	if !r.Disks || spec.DiskGiB <= 0 || r.CLI != "podman" {
		return "", imageLayout{}, nil
	}
	image := spec.Image
	if image == "" {
		image = r.DefaultImage
	}
	img, err := r.inspectImage(image)
	if err != nil {
		return "", imageLayout{}, r.explain(err, spec)
	}
	root, err := r.mountRootfs(spec, img)
	if err != nil {
		return "", imageLayout{}, err
	}
	return root, img, nil
}

// releaseDisk takes down an attempt's tree and removes its disk (unless
// keep), once its container is gone.
func (r *ContainerRuntime) releaseDisk(instanceID int64, keep bool) {
	if !r.Disks {
		return
	}
	if err := r.releaseRootfs(instanceID, keep); err != nil {
		r.Log.Warn("cannot release an instance's disk", "instance", instanceID, "keep", keep, "err", err)
	}
}

// isolate keeps a bridge workload off the node, its neighbours and the
// private networks (egress.go); a container without a network has
// nothing to isolate.
func (r *ContainerRuntime) isolate(pid int) error {
	if r.Network != "bridge" {
		return nil
	}
	node, err := nodeAddresses()
	if err != nil {
		return fmt.Errorf("the node's addresses: %w", err)
	}
	if err := isolateEgress(pid, node, r.EgressAllow); err != nil {
		return fmt.Errorf("isolate the container's network: %w", err)
	}
	return nil
}

// explain turns the engine's complaint about a missing image into a line
// the customer can act on.
func (r *ContainerRuntime) explain(err error, spec Spec) error {
	msg := err.Error()
	if strings.Contains(msg, "pull policy") || strings.Contains(msg, "No such image") || strings.Contains(msg, "image not known") {
		image := spec.Image
		if image == "" {
			image = r.DefaultImage
		}
		return fmt.Errorf("image %s is not on this node (nodes never pull; the operator preloads the catalog's images)", image)
	}
	return err
}

// containerState is the part of `inspect` the agent reads.
type containerState struct {
	ID      string
	Pid     int
	Running bool
	// Created: made but never started (its agent died in between).
	NeverStarted bool
	Exit         int
	OOM          bool
	LogPath      string
	Labels       map[string]string
	Created      time.Time
}

func (r *ContainerRuntime) inspect(id string) (containerState, error) {
	out, err := r.cli("inspect", "--type", "container", id)
	if err != nil {
		return containerState{}, err
	}
	var raw []struct {
		ID      string    `json:"Id"`
		Created time.Time `json:"Created"`
		LogPath string    `json:"LogPath"`
		State   struct {
			Status    string `json:"Status"`
			Running   bool   `json:"Running"`
			Pid       int    `json:"Pid"`
			ExitCode  int    `json:"ExitCode"`
			OOMKilled bool   `json:"OOMKilled"`
			// StartedAt is zero for a container never started, whatever
			// state podman names (created, configured, initialized…).
			StartedAt time.Time `json:"StartedAt"`
		} `json:"State"`
		Config struct {
			Labels map[string]string `json:"Labels"`
		} `json:"Config"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil || len(raw) != 1 {
		return containerState{}, fmt.Errorf("%s inspect %s: unexpected answer", r.CLI, id)
	}
	c := raw[0]
	return containerState{ID: c.ID, Pid: c.State.Pid, Running: c.State.Running, Exit: c.State.ExitCode, OOM: c.State.OOMKilled,
		LogPath: c.LogPath, Labels: c.Config.Labels, Created: c.Created,
		NeverStarted: !c.State.Running && (c.State.StartedAt.IsZero() || c.State.Status == "created" || c.State.Status == "configured" || c.State.Status == "initialized")}, nil
}

// Adopt finds the container of a workload a previous agent started, by
// its labels. One that ended meanwhile is adopted too, so its real exit
// code (and an out-of-memory end) is reported.
func (r *ContainerRuntime) Adopt(rec workloadRecord, node string) (Process, bool) {
	id, err := r.cli("ps", "--all", "--quiet", "--no-trunc",
		"--filter", "label="+labelNode+"="+node,
		"--filter", "label="+labelInstance+"="+strconv.FormatInt(rec.InstanceID, 10),
		"--filter", "label="+labelAttempt+"="+strconv.Itoa(rec.Attempt))
	if err != nil || id == "" {
		return nil, false
	}
	id, _, _ = strings.Cut(id, "\n")
	st, err := r.inspect(id)
	if err != nil {
		return nil, false
	}
	if st.NeverStarted {
		// Its agent died between making and starting it (a wait on it
		// would never end): start it now, it is what the portal wants.
		if _, err := r.cli("start", id); err != nil {
			r.Log.Warn("a container made but never started could not be started: removed", "instance", rec.InstanceID, "err", err)
			_, _ = r.cli("rm", "--force", id)
			return nil, false
		}
		if st, err = r.inspect(id); err != nil {
			return nil, false
		}
		r.Log.Info("started a container its agent made but never started", "instance", rec.InstanceID)
	}
	var meta net.Listener
	if st.Running {
		if meta, err = listenInNetns(st.Pid, ContainerMetadataAddr); err != nil {
			r.Log.Warn("re-adopted container's metadata endpoint is lost", "instance", rec.InstanceID, "err", err)
		}
	}
	return r.track(id, st, meta), true
}

// Orphans lists the containers of this node that its state file may not
// know (the agent died between starting one and writing it down), as
// records rebuilt from their labels.
func (r *ContainerRuntime) Orphans(node string) []workloadRecord {
	out, err := r.cli("ps", "--all", "--quiet", "--no-trunc", "--filter", "label="+labelNode+"="+node)
	if err != nil {
		r.Log.Warn("cannot list this node's containers", "err", err)
		return nil
	}
	var recs []workloadRecord
	for _, id := range strings.Fields(out) {
		st, err := r.inspect(id)
		if err != nil {
			continue
		}
		l := st.Labels
		inst, err1 := strconv.ParseInt(l[labelInstance], 10, 64)
		attempt, err2 := strconv.Atoi(l[labelAttempt])
		if err1 != nil || err2 != nil {
			continue
		}
		recs = append(recs, workloadRecord{InstanceID: inst, Attempt: attempt, Lifecycle: gpuportal.Lifecycle(l[labelLifecycle]),
			GPUs: splitGPUs(l[labelGPUs]), CheckpointDir: l[labelCheckpoint], ProcessID: st.ID, StartedAt: st.Created})
	}
	return recs
}

// splitGPUs reads a container's GPU label: none for a no-GPU workload.
func splitGPUs(label string) []string {
	if label == "" {
		return nil
	}
	return strings.Split(label, ",")
}

func (r *ContainerRuntime) track(id string, st containerState, meta net.Listener) *containerProcess {
	c := &containerProcess{rt: r, id: id, pid: st.Pid, meta: meta, done: make(chan struct{}),
		gpus: max(len(splitGPUs(st.Labels[labelGPUs])), 1)}
	c.instance, _ = strconv.ParseInt(st.Labels[labelInstance], 10, 64)
	c.attempt, _ = strconv.Atoi(st.Labels[labelAttempt])
	if st.Running {
		c.ns = namespaceOf(st.Pid)
	}
	go c.watch(st)
	return c
}

// DecodeLog turns the engine's log file into the workload's output.
func (r *ContainerRuntime) DecodeLog(raw string) string {
	if r.CLI == "podman" {
		return decodeK8sFileLog(raw)
	}
	return decodeJSONFileLog(raw)
}

// containerProcess is one running (or just ended) container.
type containerProcess struct {
	rt   *ContainerRuntime
	id   string
	pid  int          // its init on the host
	ns   pidNamespace // every process of the container is in it
	meta net.Listener
	gpus int
	// instance and attempt name its disk, if it has one; keepDisk: the
	// portal asked for it to be kept at the end (a stop that keeps it).
	instance int64
	attempt  int
	keepDisk atomic.Bool

	done chan struct{}
	code *int
	oom  bool
}

func (c *containerProcess) ID() string                     { return c.id }
func (c *containerProcess) PID() int                       { return c.pid }
func (c *containerProcess) MetadataListener() net.Listener { return c.meta }

// Signal sends sig to every process of the container. The engines' own
// `kill` reaches only its PID 1, which — a shell running the customer's
// command, say — ignores SIGTERM as the init of a PID namespace; the
// program that should checkpoint is one of its children.
func (c *containerProcess) Signal(sig syscall.Signal) error {
	for _, pid := range c.ns.pids() { // none once the container has ended
		_ = syscall.Kill(pid, sig)
	}
	return nil
}

func (c *containerProcess) Wait() *int {
	<-c.done
	return c.code
}

// Belongs: every process of the container is in its PID namespace.
func (c *containerProcess) Belongs(pid int) bool {
	return c.ns.holds(pid)
}

// ExitError says why a container ended abnormally: out of memory.
func (c *containerProcess) ExitError() string {
	<-c.done
	if !c.oom {
		return ""
	}
	return fmt.Sprintf("out of memory: the instance used all of its %s of memory and was killed", formatBytes(c.rt.MemoryPerGPU*int64(c.gpus)))
}

// watch waits for the container's init to exit (the PID namespace ends
// with it, taking every process of the container along), then reads the
// exit code and removes the container.
func (c *containerProcess) watch(st containerState) {
	defer close(c.done)
	if st.Running {
		waitForExit(c.pid)
		if c.meta != nil {
			c.meta.Close()
		}
	}
	if out, err := c.rt.cli("wait", c.id); err == nil {
		if code, err := strconv.Atoi(strings.TrimSpace(out)); err == nil {
			c.code = &code
		}
	} else if !st.Running {
		c.code = &st.Exit
	}
	if end, err := c.rt.inspect(c.id); err == nil {
		c.oom = end.OOM
	}
	if c.rt.OOMs != nil {
		// The kernel's report may lag the death it caused by a moment.
		var lag time.Duration
		if !c.oom && c.code != nil && *c.code == 128+int(syscall.SIGKILL) {
			lag = 500 * time.Millisecond
		}
		hit := c.rt.OOMs.WaitFor(c.id, lag)
		c.oom = c.oom || (hit && c.code != nil && *c.code != 0)
	}
	if _, err := c.rt.cli("rm", "--force", c.id); err != nil {
		c.rt.Log.Warn("cannot remove ended container", "container", c.id, "err", err)
		return // its tree stays until the container is gone
	}
	c.rt.releaseDisk(c.instance, c.keepDisk.Load())
}

// DiskUsed is how much of its disk the workload has written.
func (c *containerProcess) DiskUsed() (int64, bool) {
	if !c.rt.Disks {
		return 0, false
	}
	return c.rt.diskUsed(c.instance)
}

// KeepDisk says whether its disk outlives it (set before it is stopped).
func (c *containerProcess) KeepDisk(keep bool) { c.keepDisk.Store(keep) }

// pidsInNamespace lists the host PIDs of the processes in PID namespace ns.
func pidsInNamespace(ns string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "pid")); err == nil && link == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

// decodeK8sFileLog strips podman's k8s-file framing ("TIME STREAM F|P
// text", P marking a line continued in the next record).
func decodeK8sFileLog(raw string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(raw, "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, " ", 4)
		if len(parts) < 3 {
			continue
		}
		text := ""
		if len(parts) == 4 {
			text = parts[3]
		}
		b.WriteString(text)
		if parts[2] != "P" {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// decodeJSONFileLog reads docker's json-file log: one {"log": …} per line.
func decodeJSONFileLog(raw string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(raw, "\n") {
		var rec struct {
			Log string `json:"log"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			b.WriteString(rec.Log)
		}
	}
	return b.String()
}

func formatBytes(n int64) string {
	const gib, mib = 1 << 30, 1 << 20
	switch {
	case n >= gib && n%gib == 0:
		return fmt.Sprintf("%d GiB", n/gib)
	case n >= gib:
		return fmt.Sprintf("%.1f GiB", float64(n)/gib)
	default:
		return fmt.Sprintf("%d MiB", n/mib)
	}
}

// ErrNoContainerEngine is returned when the CLI is not installed.
var ErrNoContainerEngine = errors.New("container engine not found")

// CheckEngine verifies the CLI runs, for a clear message at agent start.
func (r *ContainerRuntime) CheckEngine() error {
	if _, err := exec.LookPath(r.CLI); err != nil {
		return fmt.Errorf("%w: %s is not installed", ErrNoContainerEngine, r.CLI)
	}
	if _, err := r.cli("version", "--format", "json"); err != nil {
		return err
	}
	return nil
}

// chownTree gives a checkpoint directory and what is in it to the
// container's user: an earlier attempt, on another node or another GPU,
// ran as another UID. It works inside an os.Root of the directory: a
// workload that swaps a subdirectory for a symlink to the node's files
// while the walk runs gets an error, never a chown outside.
func chownTree(dir string, uid int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == uid {
			return nil
		}
		return root.Lchown(path, uid, uid)
	})
}

// waitForExit returns once process pid (not a child of the agent: the
// engine's conmon is its parent) has exited. It waits on a pidfd through
// Go's poller, which costs nothing while the container runs; where pidfds
// are missing (Linux before 5.3) it polls.
func waitForExit(pid int) {
	ticks, ok := processStartTicks(pid)
	if !ok {
		return
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		defer f.Close()
		// The pid is pinned now: is it still the container's process?
		if t, ok := processStartTicks(pid); !ok || t != ticks {
			return
		}
		if rc, err := f.SyscallConn(); err == nil {
			// A pidfd turns readable when its process exits: the first
			// call asks the poller to wait for that, the second ends it.
			waited := false
			if rc.Read(func(uintptr) bool { done := waited; waited = true; return done }) == nil {
				return
			}
		}
	}
	for {
		if t, ok := processStartTicks(pid); !ok || t != ticks {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
