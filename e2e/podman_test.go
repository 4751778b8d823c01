package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/agent"
)

// The container suite runs real agents with --runtime podman (rootful,
// runc) on simulated GPUs exposed as CDI devices, in an image built here
// from a static busybox plus the stock-AWS-SDK workload.

const podmanTestImage = "localhost/gpuportal-e2e:busybox"

var (
	podmanOnce sync.Once
	podmanErr  error
	// podmanOneAtATime keeps the container tests from running beside each
	// other (they still run beside the rest): rootful podman serialises
	// on its own locks, and four tests' creates, inits and removes at
	// once on a 2-core machine once lost a container between its init
	// and the agent opening its network namespace.
	podmanOneAtATime sync.Mutex
)

// needPodman skips (or, in CI, fails) without podman, runc, root and a
// static busybox, builds the test image once, and holds the container
// suite's turn until the test ends.
func needPodman(t testing.TB) {
	t.Helper()
	missing := ""
	if os.Geteuid() != 0 {
		missing = "root (rootful podman)"
	}
	for _, bin := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = bin
		}
	}
	busybox, ok := agent.StaticBusybox()
	if !ok {
		missing = "a static busybox (busybox-static)"
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("container tests need %s; .ci/run installs podman, runc and busybox-static", missing)
		}
		t.Skipf("skipping: container tests need %s (apt-get install -y podman runc busybox-static)", missing)
	}
	podmanOnce.Do(func() {
		extra := map[string]string{"/usr/local/bin/imdsworkload": imdsWorkloadBin, "/usr/local/bin/agentlist": agentListBin}
		maps.Copy(extra, withLibraries("rsync")) // rsync over ssh needs it at both ends
		podmanErr = agent.ImportBusyboxImage("podman", podmanTestImage, busybox, extra)
	})
	if podmanErr != nil {
		t.Fatal(podmanErr)
	}
	podmanOneAtATime.Lock()
	t.Cleanup(podmanOneAtATime.Unlock)
}

// withLibraries is the node's program name (when installed) with the
// shared libraries and loader it needs, each at its own path, to put in
// the busybox test image; none when it is not installed.
func withLibraries(name string) map[string]string {
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil
	}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil
	}
	files := map[string]string{bin: bin}
	for line := range strings.SplitSeq(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				files[f] = f
			}
		}
	}
	return files
}

// podmanNode is an agent running workloads in containers.
type podmanNode struct {
	*agentProc
	state string
}

// startPodmanAgent enrols an agent with --runtime podman; its containers
// and its simulated GPUs' CDI spec are removed when the test ends.
func startPodmanAgent(t testing.TB, p *portal, state, ckpt string, extra ...string) *podmanNode {
	t.Helper()
	var out struct{ Token string }
	if st := p.api("POST", "/api/v1/admin/enrollment-tokens", p.admin, `{"region":"cd-1"}`, &out); st != 201 {
		t.Fatalf("enrollment token: %d", st)
	}
	args := append([]string{"--runtime", "podman", "--memory-per-gpu", "256m", "--cpus-per-gpu", "1"}, extra...)
	a := startAgentProcArgs(t, p.url, out.Token, state, ckpt, "mock:dgxa100", testHeartbeat, "", args...)
	t.Cleanup(func() {
		a.kill()
		ids, _ := exec.Command("podman", "ps", "--all", "--quiet", "--filter", "label=gpuportal.node="+a.nodeID).Output()
		if f := strings.Fields(string(ids)); len(f) > 0 {
			_ = exec.Command("podman", append([]string{"rm", "--force"}, f...)...).Run()
		}
		os.Remove(agent.MockCDISpecPath("/var/run/cdi", state))
		if err := agent.ReleaseDisks(state); err != nil {
			t.Errorf("release the node's disks: %v", err)
		}
	})
	return &podmanNode{agentProc: a, state: state}
}

// addTestImage puts the test image first in the catalog's use: launches
// name it explicitly.
func addTestImage(t testing.TB, p *portal) {
	t.Helper()
	body := `{"id":"e2e-busybox","name":"e2e busybox","reference":"` + podmanTestImage + `"}`
	if st := p.api("POST", "/api/v1/admin/images", p.admin, body, nil); st != 201 {
		t.Fatalf("add image = %d", st)
	}
}

func launchIn(t testing.TB, p *portal, count int, command string, autoRestart bool) gpuportal.Instance {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"kind": "spot", "model": "a100-80g", "region": "cd-1", "count": count, "command": command,
		"auto_restart": autoRestart, "image": "e2e-busybox"})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	return inst
}

// hostPIDWith is the host pid of a process whose command line starts with
// marker (not a shell or podman command that merely mentions it).
func hostPIDWith(marker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.HasPrefix(strings.ReplaceAll(string(raw), "\x00", " "), marker) {
			return pid
		}
	}
	return 0
}

// untilTERM runs command (a marker the host can find, say) in the
// background and ends the workload on the stop's SIGTERM: a container's
// first process ignores the signal unless it traps it, and the stop would
// wait out its grace.
func untilTERM(command string) string {
	return command + " & trap 'kill $! 2> /dev/null; exit 0' TERM; wait"
}

// hostUID is the node's UID of process pid (-1 when it cannot be read).
func hostUID(pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[1])
			return uid
		}
	}
	return -1
}

func readTrim(path string) string {
	raw, _ := os.ReadFile(path)
	return strings.TrimSpace(string(raw))
}

// (issue 13) From inside a container: the workload is root only inside
// its user namespace (issue 45), sees
// only its own GPU devices, cannot read the agent's state, another
// instance's checkpoint or log, cannot see or signal another instance's
// processes, has no network but its own metadata endpoint, and a setsid
// child dies with the stop.
func TestContainerIsolation(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	state, ckpt := filepath.Join(dir, "node"), filepath.Join(dir, "ckpt")
	ag := startPodmanAgent(t, p, state, ckpt)

	// The neighbour: a long sleep with a marker the host can find.
	neighbourMarker := fmt.Sprintf("sleep %d", 8000+os.Getpid()%1000)
	neighbour := launchIn(t, p, 1, "echo secret > $GPUPORTAL_CHECKPOINT_DIR/secret; "+untilTERM(neighbourMarker), false)
	eventually(t, 30*time.Second, "the neighbour to run", func() bool { return hostPIDWith(neighbourMarker) != 0 })
	neighbourPID := hostPIDWith(neighbourMarker)
	neighbourDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", neighbour.ID))

	marker := fmt.Sprintf("sleep %d", 9000+os.Getpid()%1000)
	_, portalPort, _ := strings.Cut(strings.TrimPrefix(p.url, "http://"), ":")
	probe := `d="$GPUPORTAL_CHECKPOINT_DIR"
id -u > "$d/uid"
ls /dev | grep '^nvidia' | tr '\n' ' ' > "$d/devices"
ls /proc | grep -c '^[0-9]' > "$d/procs"
try() { if "$@" > /dev/null 2>&1; then echo allowed; else echo refused; fi; }
try cat ` + filepath.Join(state, "node.json") + ` > "$d/state"
try cat ` + filepath.Join(neighbourDir, "secret") + ` > "$d/neighbour-checkpoint"
try cat ` + filepath.Join(state, "logs", fmt.Sprintf("instance-%d.log", neighbour.ID)) + ` > "$d/neighbour-log"
try kill -9 ` + strconv.Itoa(neighbourPID) + ` > "$d/kill"
try nc -w 2 127.0.0.1 ` + portalPort + ` < /dev/null > "$d/network"
printf 'GET /latest/meta-data/instance-id HTTP/1.0\r\n\r\n' | nc -w 2 127.0.0.1 80 | tail -n 1 > "$d/instance-id"
echo "$CUDA_VISIBLE_DEVICES" > "$d/cuda"
echo done > "$d/written"
setsid ` + marker + ` &
trap 'exit 0' TERM
while true; do sleep 1; done`
	inst := launchIn(t, p, 2, probe, false)
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID))
	defer func() {
		if t.Failed() {
			i := p.instance(inst.ID)
			t.Logf("instance %s, error %q, log:\n%s\nagent:\n%s", i.Status, i.Error, i.LogTail, ag.output())
		}
	}()
	eventually(t, 30*time.Second, "the probe to write its findings", func() bool {
		_, err := os.Stat(filepath.Join(runDir, "written"))
		return err == nil && hostPIDWith(marker) != 0
	})
	got := p.instance(inst.ID)
	// Root inside its user namespace, no real user of the node outside.
	if uid := readTrim(filepath.Join(runDir, "uid")); uid != "0" {
		t.Errorf("the workload runs as uid %q inside", uid)
	}
	if uid := hostUID(hostPIDWith(marker)); uid < agent.DefaultUserNSBase {
		t.Errorf("the workload is UID %d of the node", uid)
	}
	// Exactly its two GPUs, as /dev/nvidia<index> of the node.
	var wantDevs []string
	for _, g := range got.GPUs {
		for _, n := range p.nodes() {
			for _, ng := range n.GPUs {
				if ng.UUID == g {
					wantDevs = append(wantDevs, fmt.Sprintf("nvidia%d", ng.Index))
				}
			}
		}
	}
	if devs := readTrim(filepath.Join(runDir, "devices")); len(wantDevs) != 2 || devs != strings.Join(wantDevs, " ") {
		t.Errorf("devices in the container %q; want %q", devs, wantDevs)
	}
	if cuda := readTrim(filepath.Join(runDir, "cuda")); cuda != strings.Join(got.GPUs, ",") {
		t.Errorf("CUDA_VISIBLE_DEVICES %q; want %q", cuda, got.GPUs)
	}
	if n, _ := strconv.Atoi(readTrim(filepath.Join(runDir, "procs"))); n < 1 || n > 6 {
		t.Errorf("the workload sees %d processes; want only its own few", n)
	}
	for file, want := range map[string]string{"state": "refused", "neighbour-checkpoint": "refused", "neighbour-log": "refused", "kill": "refused", "network": "refused"} {
		if got := readTrim(filepath.Join(runDir, file)); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	if id := readTrim(filepath.Join(runDir, "instance-id")); id != strconv.FormatInt(inst.ID, 10) {
		t.Errorf("metadata at 127.0.0.1:80 said instance-id %q", id)
	}
	if syscall.Kill(neighbourPID, 0) != nil || p.instance(neighbour.ID).Status != gpuportal.InstanceRunning {
		t.Error("the neighbour did not survive the probe")
	}
	var stopped gpuportal.Instance
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", &stopped)
	eventually(t, 30*time.Second, "the stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	if hostPIDWith(marker) != 0 {
		t.Fatal("the setsid child survived the stop")
	}
	if n := p.instance(inst.ID); n.Error != "" {
		t.Errorf("a stopped instance shows error %q", n.Error)
	}
	if out, _ := exec.Command("podman", "ps", "--all", "--quiet", "--filter", fmt.Sprintf("label=gpuportal.instance=%d", inst.ID), "--filter", "label=gpuportal.node="+ag.nodeID).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("the stopped instance's container is still there: %s", out)
	}
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", neighbour.ID), p.user, "", &stopped)
	eventually(t, 30*time.Second, "the neighbour to stop", func() bool { return p.instance(neighbour.ID).Status == gpuportal.InstanceStopped })
}

// (issue 13) A workload that goes past its memory ends failed, and the
// customer reads why.
func TestContainerOutOfMemoryFails(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	startPodmanAgent(t, p, filepath.Join(dir, "node"), filepath.Join(dir, "ckpt"))
	// 600 MB in a shell variable; the instance has 256 MiB.
	inst := launchIn(t, p, 1, `echo filling; x=$(head -c 600000000 /dev/zero | tr '\0' a); echo survived`, false)
	eventually(t, 60*time.Second, "the instance to end", func() bool {
		s := p.instance(inst.ID).Status
		return s == gpuportal.InstanceFailed || s == gpuportal.InstanceStopped
	})
	got := p.instance(inst.ID)
	if got.Status != gpuportal.InstanceFailed || !strings.Contains(got.Error, "out of memory") || !strings.Contains(got.Error, "256 MiB") {
		t.Fatalf("instance ended %s with %q; log:\n%s", got.Status, got.Error, got.LogTail)
	}
	if strings.Contains(got.LogTail, "survived") || !strings.Contains(got.LogTail, "filling") {
		t.Fatalf("log tail %q", got.LogTail)
	}
}

// (issue 13) The stock AWS SDK for Go v2 reads instance-id and then the
// interruption notice before its SIGTERM, from inside a container: its
// endpoint is 127.0.0.1:80 of the container's own network namespace.
func TestStockAWSSDKInAContainer(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	startPodmanAgent(t, p, filepath.Join(dir, "node"), ckpt)
	a := launchIn(t, p, 1, "imdsworkload", false)
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", a.ID))
	eventually(t, 30*time.Second, "the SDK to read instance-id", func() bool {
		return readTrim(filepath.Join(runDir, "instance-id")) == strconv.FormatInt(a.ID, 10)
	})
	var got gpuportal.Instance
	if st := p.api("POST", fmt.Sprintf("/api/v1/admin/instances/%d/interrupt", a.ID), p.admin, "", &got); st != 200 {
		t.Fatalf("interrupt = %d", st)
	}
	eventually(t, 5*time.Second, "the SDK to see the notice", func() bool { _, err := os.Stat(filepath.Join(runDir, "notice")); return err == nil })
	var action map[string]string
	if err := json.Unmarshal([]byte(readTrim(filepath.Join(runDir, "notice"))), &action); err != nil || action["action"] != "terminate" {
		t.Fatalf("notice as the SDK read it: %v", action)
	}
	eventually(t, 30*time.Second, "the interruption to finish", func() bool { return p.instance(a.ID).Status == gpuportal.InstanceInterrupted })
	if term := readTrim(filepath.Join(runDir, "term")); term != "after-notice" {
		t.Fatalf("SIGTERM came %q; log:\n%s", term, p.instance(a.ID).LogTail)
	}
	if tail := p.instance(a.ID).LogTail; !strings.Contains(tail, "running as instance") || !strings.Contains(tail, "interruption notice:") {
		t.Fatalf("log tail (decoded from the engine's log) %q", tail)
	}
}

// (issue 13) A checkpoint written before an interruption is there after
// the auto-restart on another node (both nodes share the checkpoint root,
// as a network mount does in production), though that run is another
// container under another UID.
func TestContainerCheckpointFollowsTheRestart(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "shared-ckpt")
	startPodmanAgent(t, p, filepath.Join(dir, "node-1"), ckpt)
	startPodmanAgent(t, p, filepath.Join(dir, "node-2"), ckpt)
	// Fill node 1 (where the first instance goes) from the other side: the
	// restart must land on node 2.
	inst := launchIn(t, p, 8, counter, true)
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID))
	eventually(t, 30*time.Second, "the counter to move", func() bool {
		n, _ := strconv.Atoi(readTrim(filepath.Join(runDir, "count")))
		return n >= 5
	})
	first := p.instance(inst.ID).Node
	// Take the first node out of service, then interrupt: the restart
	// goes to the other node.
	if st := p.api("POST", "/api/v1/admin/nodes/"+first+"/drain", p.admin, "", nil); st != 200 {
		t.Fatalf("drain = %d", st)
	}
	var got gpuportal.Instance
	if st := p.api("POST", fmt.Sprintf("/api/v1/admin/instances/%d/interrupt", inst.ID), p.admin, "", &got); st != 200 {
		t.Fatalf("interrupt = %d", st)
	}
	eventually(t, 120*time.Second, "the restarted run to finish", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	final := p.instance(inst.ID)
	runs := readTrim(filepath.Join(runDir, "runs"))
	lines := strings.Split(runs, "\n")
	if final.Node == first || final.Attempt != 2 || len(lines) != 3 || !strings.HasPrefix(lines[0], "start 0 ") || !strings.HasPrefix(lines[1], "term at ") {
		t.Fatalf("final %+v (first node %s); runs:\n%s", final, first, runs)
	}
	saved := strings.TrimPrefix(lines[1], "term at ")
	if !strings.HasPrefix(lines[2], "start "+saved+" ") || saved == "0" {
		t.Fatalf("the restart did not resume from the checkpoint; runs:\n%s", runs)
	}
	if readTrim(filepath.Join(runDir, "finished")) != "done" {
		t.Fatal("the workload did not finish")
	}
}

// (issue 13) Containers outlive the agent: a restarted agent re-adopts
// them by their labels — also when its state file lost them — and a stop
// still ends them.
func TestContainerReadoptedByLabel(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	state, ckpt := filepath.Join(dir, "node"), filepath.Join(dir, "ckpt")
	// Heartbeats of 5 s: the node is taken offline after three missed
	// ones, and the restart below (podman listing and inspecting its
	// containers) must not look like a node failure on a busy machine.
	const heartbeat = "5s"
	ag := startPodmanAgent(t, p, state, ckpt, "--heartbeat", heartbeat)
	marker := fmt.Sprintf("sleep %d", 10000+os.Getpid()%1000)
	inst := launchIn(t, p, 1, "echo up; "+untilTERM(marker), false)
	eventually(t, 30*time.Second, "the workload to run", func() bool {
		return p.instance(inst.ID).Status == gpuportal.InstanceRunning && hostPIDWith(marker) != 0
	})
	pid := hostPIDWith(marker)
	ag.kill()
	// The state file is lost too: only the container's labels are left.
	if err := os.Remove(filepath.Join(state, "workloads.json")); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the container died with the agent")
	}
	restarted := startAgentProcArgs(t, p.url, "", state, ckpt, "mock:dgxa100", heartbeat, "", "--runtime", "podman", "--memory-per-gpu", "256m", "--cpus-per-gpu", "1")
	eventually(t, 20*time.Second, "the restarted agent to re-adopt the container", func() bool {
		return strings.Contains(restarted.output(), "re-adopted workload")
	})
	// Its first heartbeats' answers: the time in which a wrong re-adoption
	// would have been stopped or restarted (the silence being tested, not
	// a wait for a condition).
	time.Sleep(2 * time.Second)
	got := p.instance(inst.ID)
	if got.Status != gpuportal.InstanceRunning || got.Attempt != 1 || hostPIDWith(marker) != pid {
		t.Fatalf("after the agent's restart: %+v (pid %d → %d)", got, pid, hostPIDWith(marker))
	}
	var stopped gpuportal.Instance
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", &stopped)
	eventually(t, 30*time.Second, "the stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	if hostPIDWith(marker) != 0 {
		t.Fatal("the re-adopted container outlived its stop")
	}
}

// (issue 26) The stock AWS SDK for Go v2 IMDS client reads the rebalance
// recommendation from inside a container, before any notice.
func TestStockAWSSDKReadsTheRebalanceInAContainer(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, true) // 09:30
	addTestImage(t, p)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	startPodmanAgent(t, p, filepath.Join(dir, "node"), ckpt)
	a := launchIn(t, p, 8, "imdsworkload", false)
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", a.ID))
	eventually(t, 30*time.Second, "the SDK to read instance-id", func() bool {
		return readTrim(filepath.Join(runDir, "instance-id")) == strconv.FormatInt(a.ID, 10)
	})
	if st := p.api("POST", "/api/v1/reservations", p.user, `{"model":"a100-80g","region":"cd-1","count":4,"start":"2026-12-01T11:00:00+08:00","end":"2026-12-01T15:00:00+08:00"}`, nil); st != 201 {
		t.Fatalf("book = %d", st)
	}
	advance(t, p, "1h") // 10:30: within the rebalance lead of 11:00
	eventually(t, 30*time.Second, "the SDK to read the rebalance recommendation", func() bool {
		_, err := os.Stat(filepath.Join(runDir, "rebalance"))
		return err == nil
	})
	var doc map[string]string
	if err := json.Unmarshal([]byte(readTrim(filepath.Join(runDir, "rebalance"))), &doc); err != nil || doc["noticeTime"] == "" {
		t.Fatalf("recommendation as the SDK read it: %v %v", doc, err)
	}
	if _, err := os.Stat(filepath.Join(runDir, "notice")); err == nil {
		t.Fatal("a notice came with the recommendation")
	}
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", a.ID), p.user, "", nil)
}

// (issue 26) A containerised workload reports its checkpoints to its own
// metadata endpoint (127.0.0.1:80 in its network namespace) and the
// portal stamps them.
func TestCheckpointReportsFromAContainer(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	startPodmanAgent(t, p, filepath.Join(dir, "node"), filepath.Join(dir, "ckpt"))
	report := `trap 'exit 0' TERM
while true; do
  printf 'PUT /gpuportal/checkpoint HTTP/1.0\r\nContent-Length: 0\r\n\r\n' | nc -w 2 127.0.0.1 80 | head -n 1
  sleep 1
done`
	inst := launchIn(t, p, 1, report, false)
	// The stamp and the answer in the log travel separately (the stamp is
	// pushed while the request is served; the log tail with its "200 OK"
	// comes with a later report): wait for both.
	eventually(t, 30*time.Second, "the checkpoint report stamped and answered 200 OK", func() bool {
		i := p.instance(inst.ID)
		return i.LastCheckpoint != nil && strings.Contains(i.LogTail, "200 OK")
	})
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", nil)
}
