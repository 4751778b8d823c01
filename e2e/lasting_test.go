package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
