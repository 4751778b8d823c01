package agent

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

// startIsolated starts `sleep 60` as the init of a PID namespace of its
// own, as the exec runtime's isolation and a container engine do.
func startIsolated(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// A workload's namespace, once ended, holds nothing and is signalled
// nothing, even where the kernel gave its number to the next workload's
// namespace (as it does: the lowest free number goes first). Before, the
// agent signalled an ended container's namespace by its number alone and
// killed the workload that had just started in its place.
func TestEndedNamespaceIsNoOnesElse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: PID namespaces need root")
	}
	ended := startIsolated(t)
	old := namespaceOf(ended.Process.Pid)
	if !old.live() || !old.holds(ended.Process.Pid) {
		t.Fatalf("a running init's namespace %+v is not live or does not hold it", old)
	}
	_ = ended.Process.Kill()
	_ = ended.Wait()
	if old.live() || len(old.pids()) != 0 {
		t.Fatalf("an ended namespace is live or lists %v", old.pids())
	}

	next := startIsolated(t)
	own := namespaceOf(next.Process.Pid)
	if !own.holds(next.Process.Pid) || !slices.Contains(own.pids(), next.Process.Pid) {
		t.Fatalf("the new workload's namespace %+v does not hold it", own)
	}
	// The ended workload's record as it reads once its number is reused,
	// whether or not the kernel reused it just now.
	reused := old
	reused.name = own.name
	if reused.holds(next.Process.Pid) || len(reused.pids()) != 0 {
		t.Fatal("an ended namespace whose number was reused holds the new workload")
	}
	p := &execProcess{pid: ended.Process.Pid, ns: reused}
	if (&containerProcess{ns: reused}).Belongs(next.Process.Pid) || p.Belongs(next.Process.Pid) {
		t.Fatal("an ended workload claims the new one's process")
	}
	// A container's signal goes to what its namespace lists (none, above,
	// for the ended one); the live one's reaches its init.
	_ = (&containerProcess{ns: own}).Signal(syscall.SIGKILL)
	_ = next.Wait()
	if ws, ok := next.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the live namespace's init ended %v, not by the signal sent to its namespace", next.ProcessState)
	}
}
