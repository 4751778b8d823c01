package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gpuportal"
)

// Spec is what a runtime needs to start one instance's workload.
type Spec struct {
	Node          string // the node's id, for container labels
	InstanceID    int64
	Attempt       int
	Lifecycle     gpuportal.Lifecycle
	GPUs          []string
	Slot          int // the node index of its first GPU: unique among the node's running workloads
	Command       string
	Image         string   // image reference for container runtimes; "" = the runtime's default
	ImageArchive  string   // a private image's archive under the image root, loaded when missing
	Env           []string // KEY=value, the DESIGN §4 environment included
	CheckpointDir string
	LogPath       string
	// Volumes to mount read-write: a host directory at a path inside.
	Volumes []SpecVolume
	// DiskGiB sizes its writable root filesystem, its disk (container
	// runtimes on nodes that can; 0: none, the image read-only).
	DiskGiB int
	// DiskKept: its disk was kept by an earlier stop; a failed start
	// leaves it as it was.
	DiskKept bool
}

// SpecVolume is one volume a workload mounts.
type SpecVolume struct {
	HostDir   string
	MountPath string
}

// Process is a started (or re-adopted) workload.
type Process interface {
	// ID identifies it across agent restarts (a pid, a container id).
	ID() string
	// PID is its first process on the host (a container's init).
	PID() int
	// Signal sends sig to the whole workload (its process group).
	Signal(sig syscall.Signal) error
	// Wait blocks until the workload has exited and returns its exit code
	// (nil when it cannot be known).
	Wait() *int
	// Members lists the PIDs that belong to it, for the check that nothing
	// of it is left on its GPUs.
	Belongs(pid int) bool
}

// diskReporter is a Process with a disk of its own, which says how much
// of it is written, and keeps it at its end when asked.
type diskReporter interface {
	DiskUsed() (bytes int64, ok bool)
	KeepDisk(keep bool)
}

// Runtime starts workloads and re-adopts them after an agent restart.
type Runtime interface {
	Name() string
	Start(spec Spec) (Process, error)
	// Adopt finds the workload of rec that a previous agent on node
	// started; ok is false when it is gone.
	Adopt(rec workloadRecord, node string) (p Process, ok bool)
}

// ExecRuntime runs each workload as `/bin/sh -c command` in a process group
// of its own, so that signals reach all of it and it outlives an agent
// restart. It is for a trusted single-tenant node or a laptop demo: the
// workload is a process of the node, not a container.
//
// With Init set (the agent binary; needs root) each workload also gets PID
// and mount namespaces of its own, with Init as its PID 1
// (RunWorkloadInit): it runs as UID:GID, sees only its own processes, and
// a stop ends every process of it, `setsid` children included.
type ExecRuntime struct {
	Init     string
	UID, GID int
	// SFTPHelper is the static SFTP server (gpuportal-sftp) sessions run
	// for sftp and scp; "" offers none.
	SFTPHelper string
}

func (ExecRuntime) Name() string { return "exec" }

func (r ExecRuntime) Start(spec Spec) (Process, error) {
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open workload log: %w", err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command("/bin/sh", "-c", spec.Command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if r.Init != "" {
		// Its checkpoint directory is the workload user's own.
		if err := os.Chown(spec.CheckpointDir, r.UID, r.GID); err != nil {
			return nil, fmt.Errorf("checkpoint directory: %w", err)
		}
		cmd = exec.Command(r.Init, WorkloadInitArg, strconv.Itoa(r.UID), strconv.Itoa(r.GID), spec.Command)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	}
	cmd.Env = spec.Env
	cmd.Dir = spec.CheckpointDir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start workload: %w", err)
	}
	p := &execProcess{pid: cmd.Process.Pid, done: make(chan struct{})}
	if r.Init != "" {
		p.ns = namespaceOf(p.pid)
	}
	go func() {
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			code = -1
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		p.code = &code
		close(p.done)
	}()
	return p, nil
}

func (ExecRuntime) Adopt(rec workloadRecord, _ string) (Process, bool) {
	pid, err := strconv.Atoi(rec.ProcessID)
	if err != nil || pid <= 0 {
		return nil, false
	}
	if ticks, ok := processStartTicks(pid); !ok || ticks != rec.StartTicks {
		return nil, false // gone, or the pid now belongs to another process
	}
	p := &execProcess{pid: pid, done: make(chan struct{}), adopted: true}
	if ns := namespaceOf(pid); ns.name != "" && ns.name != namespaceName(os.Getpid()) {
		p.ns = ns // an isolated workload
	}
	go func() {
		// Not our child: poll until it is gone.
		for {
			if _, ok := processStartTicks(pid); !ok {
				close(p.done)
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	return p, true
}

type execProcess struct {
	pid     int
	adopted bool
	done    chan struct{}
	code    *int
	ns      pidNamespace // the workload's own, when isolated
}

func (p *execProcess) ID() string { return strconv.Itoa(p.pid) }
func (p *execProcess) PID() int   { return p.pid }

func (p *execProcess) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.pid, sig) // the pid is also the process group id
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Remaining reports whether any process of the workload's group is still
// there (the shell may be gone while the program it started checkpoints).
func (p *execProcess) Remaining() bool { return syscall.Kill(-p.pid, 0) == nil }

func (p *execProcess) Wait() *int {
	<-p.done
	return p.code
}

// Belongs: a process of the workload's PID namespace (setsid ones too),
// or of its process group.
func (p *execProcess) Belongs(pid int) bool {
	if p.ns.holds(pid) {
		return true
	}
	pgid, err := syscall.Getpgid(pid)
	return err == nil && pgid == p.pid
}

// processStartTicks reads a process's start time (field 22 of
// /proc/<pid>/stat), which tells a live process from a reused pid.
func processStartTicks(pid int) (uint64, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(raw)
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 || fields[0] == "Z" { // a zombie has exited
		return 0, false
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	return ticks, err == nil
}

// StartTicks returns the start time of a started process (for the state
// file), or 0 when it cannot be read.
func StartTicks(p Process) uint64 {
	t, _ := processStartTicks(p.PID())
	return t
}
