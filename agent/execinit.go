package agent

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// WorkloadInitArg is the hidden first argument with which the agent binary
// runs as the init of an isolated exec workload (see RunWorkloadInit).
const WorkloadInitArg = "__gpuportal-workload-init"

// naturalEndGrace is how long the rest of a workload may run on after its
// command ended by itself (no stop asked): then it is killed, so that a
// background process cannot keep GPUs after its instance ended.
const naturalEndGrace = 5 * time.Second

// RunWorkloadInit is PID 1 of an exec workload's own PID and mount
// namespaces. It mounts a /proc of the namespace (the workload sees only
// its own processes, and can signal nothing else), drops to the workload's
// user, runs `/bin/sh -c command`, passes SIGTERM on to every process of
// the namespace, reaps whatever the command leaves behind, and exits with
// the command's status once nothing of the workload is left. Because it is
// PID 1, SIGKILL to it ends every process of the workload at once — a
// `setsid` child cannot escape the stop. args: uid, gid, command.
func RunWorkloadInit(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "workload init: want uid gid command")
		return 125
	}
	if os.Getpid() != 1 {
		// Mounting /proc outside a namespace of its own would change the
		// node's: only ever run as the PID 1 ExecRuntime starts.
		fmt.Fprintln(os.Stderr, "workload init: not PID 1 of a PID namespace of its own; the agent starts it")
		return 125
	}
	uid, err1 := strconv.Atoi(args[0])
	gid, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "workload init: bad uid/gid")
		return 125
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "workload init: private mounts:", err)
		return 125
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		fmt.Fprintln(os.Stderr, "workload init: mount /proc:", err)
		return 125
	}
	if uid != os.Geteuid() || gid != os.Getegid() {
		if err := syscall.Setgroups(nil); err != nil {
			fmt.Fprintln(os.Stderr, "workload init: setgroups:", err)
			return 125
		}
		if err := syscall.Setgid(gid); err != nil {
			fmt.Fprintln(os.Stderr, "workload init: setgid:", err)
			return 125
		}
		if err := syscall.Setuid(uid); err != nil {
			fmt.Fprintln(os.Stderr, "workload init: setuid:", err)
			return 125
		}
	}
	wd, _ := os.Getwd()
	if _, err := os.ReadDir(wd); err != nil {
		fmt.Fprintf(os.Stderr, "workload init: uid %d cannot use its checkpoint directory %s (every directory above it must be enterable, chmod o+x): %v\n", uid, wd, err)
		return 126
	}
	pid, err := syscall.ForkExec("/bin/sh", []string{"/bin/sh", "-c", args[2]}, &syscall.ProcAttr{
		Dir: wd, Env: os.Environ(), Files: []uintptr{0, 1, 2},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "workload init: start:", err)
		return 126
	}
	var stopping atomic.Bool
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for sig := range sigs {
			stopping.Store(true)
			_ = syscall.Kill(-1, sig.(syscall.Signal)) // every process of the namespace
		}
	}()
	code := 0
	var deadline time.Time // once the command has ended by itself
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.ECHILD:
			return code
		case err == nil && wpid == pid:
			code = ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			if !stopping.Load() {
				// The command is done; what it left behind gets SIGTERM
				// now and SIGKILL after a short grace.
				_ = syscall.Kill(-1, syscall.SIGTERM)
				deadline = time.Now().Add(naturalEndGrace)
			}
			continue
		case err == nil && wpid > 0:
			continue // an orphan reaped
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			_ = syscall.Kill(-1, syscall.SIGKILL)
			deadline = time.Time{}
		}
		time.Sleep(20 * time.Millisecond)
	}
}
