package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/agent"
)

// (issue 46) An environment that lasts: what a workload installed on its
// disk is there when the instance is stopped keeping its disk and started
// again — on another node of the region (the first is drained), which
// mounts the same disk from the region's shared image root; saved as an
// image, a new instance starts from it; started in no-GPU mode it runs on
// no GPU with the same install. A stop that does not keep it lets it go.
func TestStopKeepingTheDiskStartsElsewhereWithIt(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	images, ckpt := filepath.Join(dir, "images"), filepath.Join(dir, "ckpt")
	first := startPodmanAgent(t, p, filepath.Join(dir, "node-1"), ckpt, "--image-root", images)
	second := startPodmanAgent(t, p, filepath.Join(dir, "node-2"), ckpt, "--image-root", images)
	defer func() {
		if t.Failed() {
			t.Logf("node 1:\n%s\nnode 2:\n%s", first.output(), second.output())
		}
	}()
	command := `d="$GPUPORTAL_CHECKPOINT_DIR"
echo "$NVIDIA_VISIBLE_DEVICES" > "$d/visible"; ls /dev > "$d/dev"
if [ -f /opt/env/marker ]; then cp /opt/env/marker "$d/seen-again"; else mkdir -p /opt/env && echo "installed on $(hostname)" > /opt/env/marker && echo done > "$d/first-run"; fi
` + untilTERM("sleep 600")
	body, _ := json.Marshal(map[string]any{"kind": "on_demand", "model": "a100-80g", "region": "cd-1", "count": 1, "image": "e2e-busybox", "disk_gib": 1, "command": command})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID))
	eventually(t, 60*time.Second, "the first run to install", func() bool {
		if i := p.instance(inst.ID); i.Status == gpuportal.InstanceFailed {
			t.Fatalf("the instance failed: %s", i.Error)
		}
		return readTrim(filepath.Join(runDir, "first-run")) == "done"
	})
	eventually(t, 30*time.Second, "its node to report the disk", func() bool {
		d := p.instance(inst.ID).Disk
		return d != nil && d.Enforced != nil && *d.Enforced
	})
	firstNode := p.instance(inst.ID).Node
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, `{"keep_disk":true}`, nil); st != 200 {
		t.Fatalf("stop keeping the disk = %d", st)
	}
	eventually(t, 30*time.Second, "the stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	if d := p.instance(inst.ID).Disk; d == nil || !d.Kept {
		t.Fatalf("stopped without its disk kept: %+v", d)
	}
	disk := agent.DiskFile(images, inst.ID)
	if _, err := os.Stat(disk); err != nil {
		t.Fatalf("the kept disk is not in the shared image root: %v", err)
	}
	// Save the stopped disk as an image (a node mounts it for the while).
	var saved gpuportal.Image
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/images", inst.ID), p.user, `{"name":"my env"}`, &saved); st != 201 || saved.Status != gpuportal.ImageSaving {
		t.Fatalf("save as image = %d %+v", st, saved)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "--force", saved.Reference).Run() })
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/images", inst.ID), p.user, `{"name":"twice"}`, nil); st != 409 {
		t.Errorf("a second save meanwhile = %d", st)
	}
	eventually(t, 60*time.Second, "the image to be saved", func() bool {
		var got gpuportal.Image
		p.api("GET", "/api/v1/images/"+saved.ID, p.user, "", &got)
		if got.Status == gpuportal.ImageFailed {
			t.Fatalf("the save failed: %s", got.Error)
		}
		return got.Status == gpuportal.ImageReady
	})
	if st := p.api("POST", "/api/v1/admin/nodes/"+firstNode+"/drain", p.admin, "", nil); st != 200 {
		t.Fatalf("drain = %d", st)
	}
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/start", inst.ID), p.user, "", nil); st != 200 {
		t.Fatalf("start = %d", st)
	}
	eventually(t, 60*time.Second, "the start elsewhere to find the install", func() bool {
		if i := p.instance(inst.ID); i.Status == gpuportal.InstanceFailed {
			t.Fatalf("the start failed: %s", i.Error)
		}
		return readTrim(filepath.Join(runDir, "seen-again")) != ""
	})
	if got := p.instance(inst.ID); got.Node == firstNode || got.Attempt < 2 {
		t.Errorf("started again on %s (attempt %d); want another node, a new attempt", got.Node, got.Attempt)
	}
	if seen := readTrim(filepath.Join(runDir, "seen-again")); seen != fmt.Sprintf("installed on instance-%d", inst.ID) {
		t.Errorf("the second run found %q", seen)
	}
	if st := p.api("DELETE", fmt.Sprintf("/api/v1/instances/%d", inst.ID), p.user, "", nil); st != 409 {
		t.Errorf("release while it runs = %d", st)
	}
	// A new instance from the saved image has the install in its image.
	fromImage, _ := json.Marshal(map[string]any{"kind": "on_demand", "model": "a100-80g", "region": "cd-1", "count": 1, "image": saved.ID, "disk_gib": 1,
		"command": `cp /opt/env/marker "$GPUPORTAL_CHECKPOINT_DIR/from-image"; ` + untilTERM("sleep 600")})
	var clone gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(fromImage), &clone); st != 201 {
		t.Fatalf("launch from the saved image = %d", st)
	}
	eventually(t, 60*time.Second, "the clone to find the install", func() bool {
		if i := p.instance(clone.ID); i.Status == gpuportal.InstanceFailed {
			t.Fatalf("the clone failed: %s", i.Error)
		}
		return readTrim(filepath.Join(ckpt, fmt.Sprintf("instance-%d", clone.ID), "from-image")) == fmt.Sprintf("installed on instance-%d", inst.ID)
	})
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", clone.ID), p.user, "", nil)

	// No-GPU mode: stopped keeping its disk again, it starts on no GPU,
	// install and all.
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, `{"keep_disk":true}`, nil); st != 200 {
		t.Fatalf("stop keeping the disk again = %d", st)
	}
	eventually(t, 30*time.Second, "the second stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	os.Remove(filepath.Join(runDir, "seen-again"))
	var noGPU gpuportal.Instance
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/start", inst.ID), p.user, `{"count":0}`, &noGPU); st != 200 || noGPU.Count != 0 {
		t.Fatalf("start with no GPU = %d %+v", st, noGPU)
	}
	eventually(t, 60*time.Second, "the no-GPU run to find the install", func() bool {
		if i := p.instance(inst.ID); i.Status == gpuportal.InstanceFailed {
			t.Fatalf("the no-GPU start failed: %s", i.Error)
		}
		return readTrim(filepath.Join(runDir, "seen-again")) != "" && p.instance(inst.ID).Status == gpuportal.InstanceRunning
	})
	if got := p.instance(inst.ID); got.Status != gpuportal.InstanceRunning || len(got.GPUs) != 0 {
		t.Errorf("in no-GPU mode: %s on GPUs %v", got.Status, got.GPUs)
	}
	if v := readTrim(filepath.Join(runDir, "visible")); v != "void" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES in no-GPU mode = %q, want void", v)
	}
	if dev := readTrim(filepath.Join(runDir, "dev")); strings.Contains(dev, "nvidia") {
		t.Errorf("a GPU device in no-GPU mode: %s", dev)
	}

	// A stop that does not keep it lets the disk go.
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", nil); st != 200 {
		t.Fatalf("stop = %d", st)
	}
	eventually(t, 30*time.Second, "the disk to go with the stop", func() bool {
		_, err := os.Stat(disk)
		return p.instance(inst.ID).Status == gpuportal.InstanceStopped && os.IsNotExist(err)
	})
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/start", inst.ID), p.user, "", nil); st != 409 {
		t.Errorf("start without a kept disk = %d", st)
	}
}

// (issue 46) Nothing half-done: the agent killed (-9) in the middle of a
// start and in the middle of a save, then started again, finishes or
// settles what it was doing — the kept disk survives with what was
// installed, the instance ends running (one container, its disk mounted
// once) or stopped, never both, and the save ends ready or failed, never
// saving for ever; the instance starts again afterwards with its install.
func TestKillingTheAgentMidStartOrSaveKeepsTheDisk(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	state, images, ckpt := filepath.Join(dir, "node"), filepath.Join(dir, "images"), filepath.Join(dir, "ckpt")
	// Heartbeats of 5 s: a restart is no node failure on a busy machine.
	args := []string{"--image-root", images, "--heartbeat", "5s"}
	node := startPodmanAgent(t, p, state, ckpt, args...)
	restart := func() *agentProc {
		t.Helper()
		node.kill()
		return startAgentProcArgs(t, p.url, "", state, ckpt, "mock:dgxa100", "5s", "", append([]string{"--runtime", "podman", "--memory-per-gpu", "256m", "--cpus-per-gpu", "1"}, args...)...)
	}
	var restarted *agentProc
	defer func() {
		if t.Failed() {
			t.Logf("node:\n%s", node.output())
			if restarted != nil {
				t.Logf("restarted:\n%s", restarted.output())
			}
		}
	}()
	command := `d="$GPUPORTAL_CHECKPOINT_DIR"
if [ -f /opt/env/marker ]; then date +%s%N >> "$d/runs-with-install"; else mkdir -p /opt/env && dd if=/dev/urandom of=/opt/env/blob bs=1M count=200 2> /dev/null && echo installed > /opt/env/marker && echo done > "$d/first-run"; fi
` + untilTERM("sleep 600")
	// (200 MiB installed: a save takes long enough to be killed in.)
	body, _ := json.Marshal(map[string]any{"kind": "on_demand", "model": "a100-80g", "region": "cd-1", "count": 1, "image": "e2e-busybox", "disk_gib": 1, "command": command})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID))
	eventually(t, 60*time.Second, "the first run to install", func() bool {
		return readTrim(filepath.Join(runDir, "first-run")) == "done" && p.instance(inst.ID).Disk != nil && p.instance(inst.ID).Disk.Enforced != nil
	})
	stopKeeping := func() {
		t.Helper()
		if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, `{"keep_disk":true}`, nil); st != 200 {
			t.Fatalf("stop keeping the disk = %d", st)
		}
		eventually(t, 60*time.Second, "the stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	}
	nodeID := node.nodeID
	containers := func() int {
		out, _ := exec.Command("podman", "ps", "--quiet", "--filter", fmt.Sprintf("label=gpuportal.instance=%d", inst.ID), "--filter", "label=gpuportal.node="+nodeID).Output()
		return len(strings.Fields(string(out)))
	}
	disk := agent.DiskFile(images, inst.ID)
	mounts := func() int {
		raw, _ := os.ReadFile("/proc/self/mountinfo")
		return strings.Count(string(raw), filepath.Join(agent.DiskMountDir(state), fmt.Sprintf("instance-%d", inst.ID))+"/")
	}
	stopKeeping()

	// The moments to kill in are short: watched closely.
	soon := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if cond() {
				return
			}
		}
		t.Fatalf("timed out waiting for %s", what)
	}

	// Mid-start: killed once its node has mounted the disk.
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/start", inst.ID), p.user, "", nil); st != 200 {
		t.Fatalf("start = %d", st)
	}
	soon("the start to mount the disk", func() bool { return mounts() > 0 })
	t.Logf("killed mid-start: %s, %d containers, %d mounts", p.instance(inst.ID).Status, containers(), mounts())
	restarted = restart()
	eventually(t, 90*time.Second, "the start to settle", func() bool {
		i := p.instance(inst.ID)
		return (i.Status == gpuportal.InstanceRunning && readTrim(filepath.Join(runDir, "runs-with-install")) != "") || i.Status == gpuportal.InstanceStopped || i.Status == gpuportal.InstanceFailed
	})
	if i := p.instance(inst.ID); i.Status == gpuportal.InstanceRunning {
		if n := containers(); n != 1 {
			t.Errorf("running in %d containers", n)
		}
	} else if n := containers(); n != 0 {
		t.Errorf("%s, yet %d containers run", i.Status, n)
	}
	if i := p.instance(inst.ID); i.Disk == nil || !i.Disk.Kept {
		t.Fatalf("after the killed start the disk is not kept: %s %+v", i.Status, i.Disk)
	}
	if p.instance(inst.ID).Status == gpuportal.InstanceRunning {
		stopKeeping()
	}
	if n := mounts(); n != 0 {
		t.Errorf("stopped, its disk is still mounted %d times", n)
	}

	// Mid-save: killed while the node writes the archive.
	node = &podmanNode{agentProc: restarted, state: state}
	var saved gpuportal.Image
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/images", inst.ID), p.user, `{"name":"mid-save"}`, &saved); st != 201 {
		t.Fatalf("save = %d", st)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "--force", saved.Reference).Run() })
	n, _ := strconv.ParseInt(strings.TrimPrefix(saved.ID, "img-"), 10, 64)
	partial := filepath.Join(images, gpuportal.PrivateImageArchive(n)) + ".new"
	soon("the save to write its archive", func() bool { fi, err := os.Stat(partial); return err == nil && fi.Size() > 0 })
	t.Logf("killed mid-save: %d mounts", mounts())
	restarted = restart()
	var settled gpuportal.Image
	eventually(t, 90*time.Second, "the save to settle", func() bool {
		p.api("GET", "/api/v1/images/"+saved.ID, p.user, "", &settled)
		return settled.Status == gpuportal.ImageReady || settled.Status == gpuportal.ImageFailed
	})
	t.Logf("the killed save ended %s %s", settled.Status, settled.Error)
	if _, err := os.Stat(disk); err != nil {
		t.Fatalf("the kept disk is gone after the killed save: %v", err)
	}
	node = &podmanNode{agentProc: restarted, state: state}
	before := readTrim(filepath.Join(runDir, "runs-with-install"))
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/start", inst.ID), p.user, "", nil); st != 200 {
		t.Fatalf("start after the save (%s) = %d", settled.Status, st)
	}
	eventually(t, 60*time.Second, "the start to find the install", func() bool {
		if i := p.instance(inst.ID); i.Status == gpuportal.InstanceFailed {
			t.Fatalf("the start failed: %s", i.Error)
		}
		return readTrim(filepath.Join(runDir, "runs-with-install")) != before && p.instance(inst.ID).Status == gpuportal.InstanceRunning
	})
	if n := containers(); n != 1 {
		t.Errorf("running in %d containers", n)
	}
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", nil)
	eventually(t, 30*time.Second, "the last stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
}
