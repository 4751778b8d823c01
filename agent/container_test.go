package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The create command gives the container exactly its GPUs, limits in
// proportion to them, a user of its own, no network, no capabilities and
// its checkpoint directory — and never pulls.
func TestContainerCreateArgs(t *testing.T) {
	r := &ContainerRuntime{CLI: "podman", OCIRuntime: "runc", CDIKind: "nvidia.com/gpu", DefaultImage: "cuda:base", Network: "none", UIDBase: 20000,
		CPUsPerGPU: 2.5, MemoryPerGPU: 8 << 30, ShmPerGPU: 1 << 30, PidsPerGPU: 1000, NoFile: 4096}
	args := r.CreateArgs(Spec{
		Node: "n-1", InstanceID: 7, Attempt: 2, Lifecycle: "spot", GPUs: []string{"GPU-a", "GPU-b"}, Slot: 3,
		Command: "python train.py", Image: "pytorch:2.5", CheckpointDir: "/ckpt/instance-7", LogPath: "/state/logs/instance-7.log",
		Env: []string{"PATH=/usr/bin", "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b", "GPUPORTAL_INSTANCE_ID=7"},
	})
	got := strings.Join(args, " ")
	for _, want := range []string{
		"create --runtime runc --name gpuportal-n-1-7-2",
		"--label gpuportal.node=n-1 --label gpuportal.instance=7 --label gpuportal.attempt=2 --label gpuportal.lifecycle=spot --label gpuportal.gpus=GPU-a,GPU-b --label gpuportal.checkpoint=/ckpt/instance-7",
		"--pull never --user 20003:20003 --cap-drop ALL --network none --security-opt no-new-privileges",
		"--cpus 5.00 --memory 17179869184 --memory-swap 17179869184 --pids-limit 2000 --shm-size 2147483648",
		"--ulimit nofile=4096:4096 --ulimit nproc=2000:2000",
		"--volume /ckpt/instance-7:/checkpoint:rw --workdir /checkpoint",
		"--read-only --tmpfs /tmp:rw,mode=1777,size=8589934592 --tmpfs /var/tmp:rw,mode=1777,size=8589934592", // (issue 22, item 7)
		"--log-driver k8s-file --log-opt path=/state/logs/instance-7.log --log-opt max-size=67108864",
		"--device nvidia.com/gpu=GPU-a --device nvidia.com/gpu=GPU-b",
		"--env CUDA_VISIBLE_DEVICES=GPU-a,GPU-b --env GPUPORTAL_INSTANCE_ID=7",
		"pytorch:2.5 /bin/sh -c python train.py",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("argv lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "PATH=") {
		t.Errorf("argv passes the host PATH: %q", got)
	}
	if args[len(args)-1] != "python train.py" {
		t.Errorf("the command must be one argument: %q", args[len(args)-1])
	}
	// Before the catalog an instance had no image: the node's default.
	if old := r.CreateArgs(Spec{Node: "n-1", InstanceID: 8, GPUs: []string{"GPU-c"}, Command: "true"}); !slices.Contains(old, "cuda:base") {
		t.Errorf("no default image: %q", old)
	}
	// In a user namespace on a disk of its own (issue 45): root inside
	// with the engine's capabilities, the tree as its root, writable, and
	// the image's environment that the tree does not carry.
	r.UserNSBase = 1_000_000
	own := strings.Join(r.createArgs(Spec{Node: "n-1", InstanceID: 10, GPUs: []string{"GPU-e"}, Command: "sleep 1", Image: "pytorch:2.5"},
		"/run/gpuportal-agent/x/instance-10-1/root", imageLayout{Env: []string{"PATH=/opt/conda/bin:/usr/bin", "LANG=C.UTF-8"}}), " ")
	for _, want := range []string{"--uidmap 0:1000000:65536 --gidmap 0:1000000:65536 --user 0:0 --network none --security-opt no-new-privileges",
		"--env PATH=/opt/conda/bin:/usr/bin --env LANG=C.UTF-8", "--rootfs /run/gpuportal-agent/x/instance-10-1/root /bin/sh -c sleep 1"} {
		if !strings.Contains(own, want) {
			t.Errorf("argv on a disk lacks %q:\n%s", want, own)
		}
	}
	for _, not := range []string{"--cap-drop", "--read-only", "--tmpfs", "--pull", "pytorch:2.5"} {
		if strings.Contains(own, not) {
			t.Errorf("argv on a disk has %q:\n%s", not, own)
		}
	}
	// No-GPU mode (issue 46): no device, one GPU's share of the rest.
	none := strings.Join(r.CreateArgs(Spec{Node: "n-1", InstanceID: 11, Command: "sleep 1"}), " ")
	if strings.Contains(none, "--device") || !strings.Contains(none, "--label gpuportal.gpus= ") || !strings.Contains(none, "--cpus 2.50 --memory 8589934592") {
		t.Errorf("argv in no-GPU mode:\n%s", none)
	}
	if got := splitGPUs(""); got != nil {
		t.Errorf("the GPU label of a no-GPU container reads as %q", got)
	}
	docker := &ContainerRuntime{CLI: "docker", OCIRuntime: "runc", CDIKind: "nvidia.com/gpu", Network: "bridge", NoFile: 1024, PidsPerGPU: 10}
	if d := strings.Join(docker.CreateArgs(Spec{InstanceID: 9, GPUs: []string{"GPU-d"}, Command: "true"}), " "); strings.Contains(d, "--runtime") || strings.Contains(d, "k8s-file") || !strings.Contains(d, "--network bridge") ||
		!strings.Contains(d, "--sysctl net.ipv6.conf.all.disable_ipv6=1") {
		t.Errorf("docker argv (bridge workloads are IPv4 only): %s", d)
	}
}

func TestContainerLogDecoding(t *testing.T) {
	k8s := "2026-12-01T02:18:00.1+00:00 stdout F step 1\n" +
		"2026-12-01T02:18:00.2+00:00 stderr P half a \n" +
		"2026-12-01T02:18:00.3+00:00 stderr F line\n" +
		"2026-12-01T02:18:00.4+00:00 stdout F \n"
	if got, want := decodeK8sFileLog(k8s), "step 1\nhalf a line\n\n"; got != want {
		t.Errorf("k8s-file: %q, want %q", got, want)
	}
	js := `{"log":"step 1\n","stream":"stdout","time":"2026-12-01T02:18:00Z"}` + "\n" + `{"log":"步骤 2\n","stream":"stderr"}` + "\n"
	if got, want := decodeJSONFileLog(js), "step 1\n步骤 2\n"; got != want {
		t.Errorf("json-file: %q, want %q", got, want)
	}
}

// The kernel's OOM report names the victim's cgroup, and with it the
// container; other kernel lines and other containers do not count.
func TestOOMWatcherReadsTheKernelReport(t *testing.T) {
	w := newOOMWatcher()
	id := strings.Repeat("9b", 32)
	other := strings.Repeat("ab", 32)
	w.record("6,1234,235599395,-;Memory cgroup out of memory: Killed process 6638 (sh)")
	w.record("6,1233,235599394,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=libpod-" + id + ",mems_allowed=0,oom_memcg=/gpuportal/libpod-" + id + ",task_memcg=/libpod_parent/libpod-" + id + ",task=sh,pid=6638,uid=20000")
	if w.WaitFor(other, 0) {
		t.Error("another container counted as out of memory")
	}
	if !w.WaitFor(id, 0) {
		t.Error("the OOM kill was not seen")
	}
	if w.WaitFor(id, 0) {
		t.Error("a report counts once")
	}
	// A report that arrives while the agent waits still counts.
	go func() {
		time.Sleep(20 * time.Millisecond)
		w.record("oom-kill:task_memcg=/machine.slice/libpod-" + other + ".scope,task=python")
	}()
	if !w.WaitFor(other, 2*time.Second) {
		t.Error("a late report was missed")
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{64 << 20: "64 MiB", 8 << 30: "8 GiB", 3 << 29: "1.5 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// The simulated GPUs' CDI spec names each GPU by UUID with a device node
// per GPU; a stale spec naming the same GPUs (the state dir moved) goes.
func TestMockCDISpec(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: device nodes need root")
	}
	specDir, state := t.TempDir(), t.TempDir()
	devs := []Device{{UUID: "GPU-a", Index: 0}, {UUID: "GPU-b", Index: 1}}
	stale := filepath.Join(specDir, "gpuportal-mock-000000000000.json")
	other := filepath.Join(specDir, "gpuportal-mock-111111111111.json")
	os.WriteFile(stale, []byte(`{"devices":[{"name":"GPU-b"}]}`), 0o644)
	os.WriteFile(other, []byte(`{"devices":[{"name":"GPU-z"}]}`), 0o644)
	path, err := WriteMockCDISpec(specDir, state, "nvidia.com/gpu", devs)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		CDIVersion, Kind string
		Devices          []struct {
			Name           string
			ContainerEdits struct {
				Mounts []struct{ HostPath, ContainerPath string }
			}
		}
	}
	raw, _ := os.ReadFile(path)
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != "nvidia.com/gpu" || len(spec.Devices) != 2 || spec.Devices[1].Name != "GPU-b" ||
		len(spec.Devices[1].ContainerEdits.Mounts) != 1 || spec.Devices[1].ContainerEdits.Mounts[0].ContainerPath != "/dev/nvidia1" {
		t.Fatalf("spec: %s", raw)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(spec.Devices[1].ContainerEdits.Mounts[0].HostPath, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
		t.Fatalf("device node: %v %o", err, st.Mode)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the stale spec naming this node's GPUs is still there")
	}
	if _, err := os.Stat(other); err != nil {
		t.Error("another node's spec was removed")
	}
}

// (issue 22, item 15) chownTree works inside the checkpoint directory
// alone: a symlink a workload left there pointing at the node's files is
// not followed, and nothing outside changes owner.
func TestChownTreeStaysInside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	outside := filepath.Join(t.TempDir(), "node-secret")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o700)
	os.WriteFile(filepath.Join(dir, "sub", "ckpt"), []byte("state"), 0o600)
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := chownTree(dir, 23456); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{filepath.Join(dir, "sub", "ckpt"): 23456, outside: 0} {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != want {
			t.Errorf("%s is owned by %d, want %d", path, st.Uid, want)
		}
	}
	// A user namespace maps the workload's UIDs to unprivileged ones.
	r := &ContainerRuntime{CLI: "podman", UserNSBase: 1_000_000, NoFile: 1024, PidsPerGPU: 10}
	if got := strings.Join(r.CreateArgs(Spec{InstanceID: 1, GPUs: []string{"GPU-a"}, Command: "true"}), " "); !strings.Contains(got, "--uidmap 0:1000000:65536 --gidmap 0:1000000:65536") {
		t.Errorf("argv without the user namespace: %s", got)
	}
}

// A workload's slot makes its UID without a user namespace: its first
// GPU's index, and for no-GPU workloads (issue 46) the first slot past the
// GPUs that no other running one holds — never a GPU workload's UID, never
// another's.
func TestNoGPUWorkloadsGetSlotsOfTheirOwn(t *testing.T) {
	a := &Agent{devices: []Device{{UUID: "GPU-a", Index: 0}, {UUID: "GPU-b", Index: 1}}, workloads: map[int64]*workload{}}
	if s := a.slotOf([]string{"GPU-b"}); s != 1 {
		t.Errorf("GPU-b's slot = %d", s)
	}
	first := a.slotOf(nil)
	a.workloads[1] = &workload{rec: workloadRecord{InstanceID: 1, Slot: first}}
	second := a.slotOf(nil)
	a.workloads[2] = &workload{rec: workloadRecord{InstanceID: 2, Slot: second}}
	if first != 2 || second != 3 {
		t.Errorf("no-GPU slots = %d, %d; want 2, 3 (past the GPUs)", first, second)
	}
	a.workloads[1].exited = true
	if again := a.slotOf(nil); again != 2 {
		t.Errorf("an ended workload's slot is not used again: %d", again)
	}
}
