// Command agent runs on every GPU node: it enrols with the portal, reports
// GPU state through NVML (or go-nvml's DGX mocks), starts the workloads the
// portal assigns and carries out spot interruptions.
//
// This file is wiring only: flags and environment → components → run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	osuser "os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gpuportal/agent"
	"gpuportal/agent/nvidia"
)

func main() {
	// The agent binary is also the PID 1 of isolated exec workloads.
	if len(os.Args) > 1 && os.Args[1] == agent.WorkloadInitArg {
		os.Exit(agent.RunWorkloadInit(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "agent:", err)
		}
		os.Exit(1)
	}
}

func envOr(getenv func(string) string, key, fallback string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return fallback
}

// The agent in named steps, like `portal serve`: read and check the flags
// (parseFlags), open the GPUs (openGPUs), make the runtime (newRuntime),
// then run the agent until the context ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	gpus, err := openGPUs(o, log)
	if err != nil {
		return err
	}
	defer gpus.Close()
	rt, err := newRuntime(o, gpus, log)
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{
		Portal: o.portal, EnrollToken: o.enroll, StateDir: o.stateDir, CheckpointRoot: o.checkpointRoot, VolumeRoot: o.volumeRoot,
		Region: o.region, Hostname: o.hostname, Heartbeat: o.heartbeat, MetadataAddr: o.metadataAddr,
		MetricsAddr: o.metricsAddr, GPUs: gpus, Runtime: rt, Log: log, Out: stdout, LogCap: o.logCap, Retention: o.retention,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// options are the agent's flags once read and checked: nothing below
// needs a flag or getenv again.
type options struct {
	portal, enroll, stateDir, volumeRoot, checkpointRoot, region string
	imageRoot                                                    string
	nvml, runtime, ociRuntime, cdiKind, cdiSpecDir, defaultImage string
	mockFaults                                                   string
	network                                                      string
	egressAllow                                                  []netip.Prefix
	uidBase, usernsBase, pidsPerGPU, noFile                      int
	cpusPerGPU                                                   float64
	memoryPerGPU, shmPerGPU                                      string
	tmpPerGPU, logCap                                            int64
	retention, heartbeat                                         time.Duration
	execUser                                                     string
	execAllowRoot                                                bool
	metadataAddr, sftpHelper, metricsAddr, hostname              string
	logLevel                                                     slog.Level
}

// parseFlags reads the agent's flags and environment and checks them all
// before anything starts.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.portal, "portal", envOr(getenv, "AGENT_PORTAL", ""), "portal URL, e.g. http://127.0.0.1:8080 (env AGENT_PORTAL)")
	fs.StringVar(&o.enroll, "enroll-token", getenv("AGENT_ENROLL_TOKEN"), "one-time enrollment token (env AGENT_ENROLL_TOKEN); needed only the first time")
	fs.StringVar(&o.stateDir, "state-dir", envOr(getenv, "AGENT_STATE_DIR", "/var/lib/gpuportal-agent"), "node credentials, workload state and logs")
	fs.StringVar(&o.volumeRoot, "volume-root", getenv("AGENT_VOLUME_ROOT"), "where volumes live (default <state-dir>/volumes): the region's shared filesystem (NFS, CephFS) so every node of the region sees the same files; on XFS mounted with prjquota each volume's size holds inside instances too (docs/nodes.md)")
	fs.StringVar(&o.checkpointRoot, "checkpoint-root", getenv("AGENT_CHECKPOINT_ROOT"), "where instances' checkpoint directories live (default <state-dir>/checkpoints; share it between nodes so auto-restarted instances find their checkpoints)")
	fs.StringVar(&o.imageRoot, "image-root", getenv("AGENT_IMAGE_ROOT"), "where instances' disks (and kept disks and private images) live (default <state-dir>/images): in production a mount every node of the region shares, as --volume-root")
	fs.StringVar(&o.region, "region", envOr(getenv, "AGENT_REGION", ""), "the node's region, e.g. cd-1 (must match the enrollment token)")
	fs.StringVar(&o.nvml, "nvml", "real", "GPU source: real, "+nvidia.MockDGXA100+" or "+nvidia.MockDGXH100)
	fs.StringVar(&o.mockFaults, "mock-faults", "", `with a mock NVML backend: a JSON file of faults to raise, read again at every sample, e.g. [{"gpu":3,"xid":79}] or [{"gpu":1,"ecc_uncorrected":true}]; a GPU whose faults leave the file was reset`)
	fs.StringVar(&o.runtime, "runtime", envOr(getenv, "AGENT_RUNTIME", "podman"), "workload runtime: podman (rootful, the production default), docker, or exec (a trusted single-tenant node or a laptop demo only) (env AGENT_RUNTIME)")
	fs.StringVar(&o.ociRuntime, "oci-runtime", "runc", "with --runtime podman: the OCI runtime (runc; crun refuses hybrid cgroups)")
	fs.StringVar(&o.cdiKind, "cdi-kind", "nvidia.com/gpu", "containers: the CDI kind of GPU devices, named by UUID (the spec `nvidia-ctk cdi generate` writes)")
	fs.StringVar(&o.cdiSpecDir, "cdi-spec-dir", "/var/run/cdi", "with a mock: NVML backend and containers: where the simulated GPUs' CDI spec is written")
	fs.StringVar(&o.defaultImage, "default-image", "docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "containers: the image of instances launched without one (preloaded; nodes never pull)")
	fs.StringVar(&o.network, "workload-network", "bridge", "containers: bridge (egress to the internet only: never the node, other containers or private, link-local and reserved ranges) or none (no network but the metadata endpoint)")
	egressAllow := fs.String("workload-egress-allow", "", "with --workload-network bridge: comma-separated CIDRs in those ranges workloads may reach all the same, e.g. a package mirror (the container's DNS servers always are, unless they are the node)")
	fs.IntVar(&o.uidBase, "workload-uid-base", 20000, "containers: each workload runs as UID:GID base+index of its first GPU")
	fs.IntVar(&o.usernsBase, "userns-base", agent.DefaultUserNSBase, "containers: run every container in a user namespace mapping its UIDs/GIDs 0-65535 to the node's N onwards, so the workload is root inside (apt-get, pip install, chown work) and no real user of the node outside; 0: off (the workload then runs as an unprivileged UID with no capabilities and a read-only image). Needs GPU device nodes the mapped users may open (NVIDIA's are 0666)")
	fs.Float64Var(&o.cpusPerGPU, "cpus-per-gpu", 0, "containers: CPUs per GPU of an instance (0: the node's CPUs ÷ its GPUs)")
	fs.StringVar(&o.memoryPerGPU, "memory-per-gpu", "", "containers: memory per GPU of an instance, e.g. 60g (default: 90% of the node's memory ÷ its GPUs)")
	fs.StringVar(&o.shmPerGPU, "shm-size", "", "containers: /dev/shm per GPU of an instance (default: a quarter of --memory-per-gpu)")
	fs.IntVar(&o.pidsPerGPU, "pids-per-gpu", 4096, "containers: processes per GPU of an instance")
	fs.IntVar(&o.noFile, "nofile", 0, "containers: open files per process (default: the agent's own hard limit, at most 1048576)")
	tmpPerGPU := fs.String("tmp-per-gpu", "4g", "containers without a disk of their own (--userns-base 0, or a node that cannot make disks): size of /tmp (and of /var/tmp) per GPU of an instance, in memory; the image is read-only then")
	logMax := fs.String("log-max", "64m", "the most output one instance's log keeps (the earliest is dropped past it)")
	fs.DurationVar(&o.retention, "retention", agent.DefaultRetention, "how long the logs and checkpoint directories of instances that ended stay on the node")
	fs.StringVar(&o.execUser, "exec-user", "", "with --runtime exec: the user workloads run as (name or UID[:GID]; default the agent's own)")
	fs.BoolVar(&o.execAllowRoot, "exec-allow-root", false, "with --runtime exec: allow workloads to run as root (a trusted single-tenant node or a laptop demo only)")
	fs.StringVar(&o.metadataAddr, "metadata-addr", "127.0.0.1:0", "HOST:0 where each instance's own EC2-style metadata endpoint listens, on a port of its own (each bound address is logged)")
	fs.StringVar(&o.sftpHelper, "sftp-helper", defaultSFTPHelper(), "the static SFTP server (gpuportal-sftp, built with CGO_ENABLED=0) sessions run for sftp and scp; mounted read-only into every container (default: gpuportal-sftp beside this binary; empty: no SFTP)")
	fs.DurationVar(&o.heartbeat, "heartbeat", 10*time.Second, "heartbeat interval")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "listen address for Prometheus metrics (dcgm-exporter names); empty: none")
	fs.StringVar(&o.hostname, "hostname", "", "the node's name in the portal (default: the machine's hostname)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	// Absolute: container engines read a relative path as a volume name,
	// and conmon writes logs from a directory of its own.
	for _, dir := range []*string{&o.stateDir, &o.checkpointRoot, &o.volumeRoot, &o.imageRoot} {
		if *dir != "" {
			abs, err := filepath.Abs(*dir)
			if err != nil {
				return nil, err
			}
			*dir = abs
		}
	}
	if o.imageRoot == "" {
		o.imageRoot = filepath.Join(o.stateDir, "images")
	}
	if err := o.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	var err error
	if o.logCap, err = parseSize(*logMax); err != nil {
		return nil, fmt.Errorf("--log-max: %w", err)
	}
	if o.tmpPerGPU, err = parseSize(*tmpPerGPU); err != nil {
		return nil, fmt.Errorf("--tmp-per-gpu: %w", err)
	}
	if o.usernsBase < 0 || (o.usernsBase > 0 && o.usernsBase < 65536) {
		return nil, errors.New("--userns-base: 0 (off), or 65536 and up (above every real user of the node)")
	}
	if o.egressAllow, err = parseCIDRs(*egressAllow); err != nil {
		return nil, fmt.Errorf("--workload-egress-allow: %w", err)
	}
	if len(o.egressAllow) > 0 && o.network != "bridge" {
		return nil, errors.New("--workload-egress-allow: only with --workload-network bridge")
	}
	if o.retention < time.Hour {
		return nil, errors.New("--retention: at least 1h")
	}
	if o.mockFaults != "" && o.nvml == "real" {
		return nil, errors.New("--mock-faults: only with a mock NVML backend (the real one raises its own)")
	}
	switch o.runtime {
	case "exec", "podman", "docker":
	default:
		return nil, fmt.Errorf("--runtime %q: want podman, docker or exec", o.runtime)
	}
	return o, nil
}

// openGPUs opens the node's GPUs through NVML, or one of its mocks.
func openGPUs(o *options, log *slog.Logger) (*nvidia.Source, error) {
	if o.nvml == "real" {
		return nvidia.OpenReal(log)
	}
	s, err := nvidia.OpenMock(o.nvml, o.stateDir, log)
	if err != nil {
		return nil, err
	}
	s.FaultsFile = o.mockFaults
	return s, nil
}

// newRuntime makes the workload runtime the flags ask for, sized to the
// node's GPUs.
func newRuntime(o *options, gpus *nvidia.Source, log *slog.Logger) (agent.Runtime, error) {
	if o.runtime == "exec" {
		r, err := execRuntime(o.execUser, o.execAllowRoot, log)
		if err != nil {
			return nil, err
		}
		r.SFTPHelper = o.sftpHelper
		return r, nil
	}
	c := &agent.ContainerRuntime{CLI: o.runtime, CDIKind: o.cdiKind, DefaultImage: o.defaultImage, Network: o.network, UIDBase: o.uidBase,
		CPUsPerGPU: o.cpusPerGPU, PidsPerGPU: o.pidsPerGPU, NoFile: o.noFile, TmpPerGPU: o.tmpPerGPU, LogMax: o.logCap, UserNSBase: o.usernsBase, Log: log,
		SFTPHelper: o.sftpHelper, EgressAllow: o.egressAllow, StateDir: o.stateDir, ImageRoot: o.imageRoot}
	if o.usernsBase == 0 {
		log.Warn("USER NAMESPACES OFF (--userns-base 0): workloads run as an unprivileged UID of this node with no capabilities and a read-only image; customers cannot install packages")
	}
	switch {
	case o.runtime != "podman":
		c.DiskNote = "sized disks need the podman runtime"
	default:
		if err := os.MkdirAll(o.stateDir, 0o700); err != nil {
			return nil, err
		}
		c.Disks, c.DiskNote = agent.ProbeDisks(o.stateDir, o.usernsBase)
	}
	if !c.Disks {
		log.Warn("no sized disks on this node: containers run on a read-only image with /tmp in memory", "why", c.DiskNote)
	}
	if o.runtime == "podman" {
		c.OCIRuntime = o.ociRuntime
	}
	if err := sizeContainers(c, len(gpus.Devices()), o.memoryPerGPU, o.shmPerGPU); err != nil {
		return nil, err
	}
	if err := c.CheckEngine(); err != nil {
		return nil, fmt.Errorf("--runtime %s: %w (install it, or run a trusted demo node with --runtime exec)", o.runtime, err)
	}
	if o.nvml != "real" {
		path, err := agent.WriteMockCDISpec(o.cdiSpecDir, o.stateDir, o.cdiKind, gpus.Devices())
		if err != nil {
			return nil, fmt.Errorf("CDI spec of the simulated GPUs: %w", err)
		}
		log.Info("simulated GPUs' CDI spec written", "path", path)
	}
	c.OOMs = agent.WatchOOMKills(log)
	log.Info("container runtime", "cli", c.CLI, "cpus_per_gpu", c.CPUsPerGPU, "memory_per_gpu", c.MemoryPerGPU, "shm_per_gpu", c.ShmPerGPU,
		"pids_per_gpu", c.PidsPerGPU, "network", c.Network, "userns_base", c.UserNSBase, "disks", c.Disks, "image_root", c.ImageRoot, "log_max", c.LogMax)
	return c, nil
}

// execRuntime sets up --runtime exec: as root, each workload gets its own
// PID and mount namespaces with this binary as its init, and runs as
// --exec-user; root workloads only with --exec-allow-root.
func execRuntime(user string, allowRoot bool, log *slog.Logger) (agent.ExecRuntime, error) {
	log.Warn("runtime exec: workloads are processes of this machine, not containers — only for a trusted single-tenant node or a laptop demo")
	uid, gid := os.Geteuid(), os.Getegid()
	if user != "" {
		var err error
		if uid, gid, err = lookupUser(user); err != nil {
			return agent.ExecRuntime{}, fmt.Errorf("--exec-user: %w", err)
		}
	}
	if uid == 0 && !allowRoot {
		return agent.ExecRuntime{}, errors.New("refusing to run workloads as root: pass --exec-user (e.g. nobody), or --exec-allow-root on a trusted single-tenant node")
	}
	if os.Geteuid() != 0 {
		if uid != os.Geteuid() {
			return agent.ExecRuntime{}, errors.New("--exec-user needs the agent to run as root")
		}
		log.Warn("runtime exec without root: workloads share this machine's process namespace and run as the agent's user")
		return agent.ExecRuntime{}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return agent.ExecRuntime{}, fmt.Errorf("find the agent binary (the workloads' init): %w", err)
	}
	return agent.ExecRuntime{Init: self, UID: uid, GID: gid}, nil
}

// lookupUser reads a user name or UID[:GID].
func lookupUser(s string) (uid, gid int, err error) {
	idPart, gidPart, hasGID := strings.Cut(s, ":")
	if n, err := strconv.Atoi(idPart); err == nil {
		uid, gid = n, n
	} else {
		u, err := osuser.Lookup(idPart)
		if err != nil {
			return 0, 0, err
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	if hasGID {
		if gid, err = strconv.Atoi(gidPart); err != nil {
			return 0, 0, fmt.Errorf("GID %q is not a number", gidPart)
		}
	}
	if uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("%q: negative ids", s)
	}
	return uid, gid, nil
}

// parseCIDRs reads a comma-separated list of IPv4 ranges ("" is none).
func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q: not a CIDR such as 10.1.2.0/24", f)
		}
		if !p.Addr().Is4() {
			return nil, fmt.Errorf("%q: IPv4 only (bridge workloads have no IPv6)", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// sizeContainers fills the per-GPU limits the flags left to the node's
// size: its CPUs and 90 % of its memory shared out by GPU.
func sizeContainers(c *agent.ContainerRuntime, gpus int, memory, shm string) error {
	if c.Network != "none" && c.Network != "bridge" {
		return fmt.Errorf("--workload-network %q: want none or bridge", c.Network)
	}
	gpus = max(gpus, 1)
	if c.CPUsPerGPU < 0 {
		return errors.New("--cpus-per-gpu must not be negative")
	}
	if c.CPUsPerGPU == 0 {
		c.CPUsPerGPU = float64(runtime.NumCPU()) / float64(gpus)
	}
	var err error
	if memory != "" {
		if c.MemoryPerGPU, err = parseSize(memory); err != nil {
			return fmt.Errorf("--memory-per-gpu: %w", err)
		}
	} else {
		total, err := nodeMemory()
		if err != nil {
			return fmt.Errorf("the node's memory (pass --memory-per-gpu): %w", err)
		}
		c.MemoryPerGPU = total / 10 * 9 / int64(gpus)
	}
	if shm != "" {
		if c.ShmPerGPU, err = parseSize(shm); err != nil {
			return fmt.Errorf("--shm-size: %w", err)
		}
	} else {
		c.ShmPerGPU = c.MemoryPerGPU / 4
	}
	if c.MemoryPerGPU < 6<<20 {
		return errors.New("--memory-per-gpu: at least 6m")
	}
	if c.PidsPerGPU < 1 {
		return errors.New("--pids-per-gpu: at least 1")
	}
	if c.NoFile <= 0 {
		// Raising a limit needs CAP_SYS_RESOURCE, which a sandboxed agent
		// may lack: stay within its own.
		var lim syscall.Rlimit
		c.NoFile = 1 << 20
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Max < uint64(c.NoFile) {
			c.NoFile = int(lim.Max)
		}
	}
	return nil
}

// parseSize reads 512m, 8g, 1.5g, 1t or a number of bytes (binary units).
func parseSize(s string) (int64, error) {
	units := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], t[i:]
	}
	mult, ok := units[unit]
	n, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a size like 512m or 8g", s)
	}
	return int64(n * mult), nil
}

// nodeMemory is MemTotal of /proc/meminfo, in bytes.
func nodeMemory() (int64, error) {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no MemTotal in /proc/meminfo")
}

// defaultSFTPHelper is gpuportal-sftp beside the agent binary, if there.
func defaultSFTPHelper() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(exe), "gpuportal-sftp")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}
