package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gpuportal"
)

// BenchmarkStartElsewhere prints DESIGN §7's figure for environments that
// last: a stopped instance with a 50 GiB kept disk holding 5 GiB starts on
// another node of the region (the first drained; both share the image
// root, as a region's shared storage) and runs its command: the time from
// POST .../start to the command running there. Nothing of the disk is
// copied: the new node mounts the same file.
func BenchmarkStartElsewhere(b *testing.B) {
	needPodman(b)
	p := startPortalB(b)
	addTestImage(b, p)
	dir := b.TempDir()
	images, ckpt := filepath.Join(dir, "images"), filepath.Join(dir, "ckpt")
	startPodmanAgent(b, p, filepath.Join(dir, "node-1"), ckpt, "--image-root", images)
	startPodmanAgent(b, p, filepath.Join(dir, "node-2"), ckpt, "--image-root", images)
	command := `d="$GPUPORTAL_CHECKPOINT_DIR"
if [ ! -f /data.bin ]; then dd if=/dev/urandom of=/data.bin bs=1M count=5120 2> /dev/null; fi
echo up > "$d/up"
` + untilTERM("sleep 3600")
	body, _ := json.Marshal(map[string]any{"kind": "on_demand", "model": "a100-80g", "region": "cd-1", "count": 1, "image": "e2e-busybox", "disk_gib": 50, "command": command})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		b.Fatalf("launch = %d", st)
	}
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID))
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(10 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the 5 GiB to be written", func() bool {
		d := p.instance(inst.ID).Disk
		return readTrim(filepath.Join(runDir, "up")) == "up" && d != nil && d.UsedBytes >= 5<<30
	})
	draining := ""
	for b.Loop() {
		b.StopTimer()
		waitFor("it to run with its disk", func() bool {
			i := p.instance(inst.ID)
			return i.Status == gpuportal.InstanceRunning && i.Disk != nil && i.Disk.Enforced != nil && *i.Disk.Enforced
		})
		i := p.instance(inst.ID)
		if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, `{"keep_disk":true}`, nil); st != 200 {
			b.Fatalf("stop = %d", st)
		}
		waitFor("the stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
		// Drain the node it ran on (and undrain the other) so the start
		// goes elsewhere.
		if draining != "" {
			p.api("POST", "/api/v1/admin/nodes/"+draining+"/drain", p.admin, `{"drain":false}`, nil)
		}
		draining = i.Node
		p.api("POST", "/api/v1/admin/nodes/"+draining+"/drain", p.admin, "", nil)
		_ = os.WriteFile(filepath.Join(runDir, "up"), nil, 0o644)
		b.StartTimer()
		if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/start", inst.ID), p.user, "", nil); st != 200 {
			b.Fatalf("start = %d", st)
		}
		waitFor("the command to run on the other node", func() bool { return readTrim(filepath.Join(runDir, "up")) == "up" })
		b.StopTimer()
		if got := p.instance(inst.ID); got.Node == draining {
			b.Fatalf("started on the drained node %s", got.Node)
		}
		b.StartTimer()
	}
}

// BenchmarkSaveImage prints DESIGN §7's other figure for environments
// that last: saving a running instance's disk holding 5 GiB as a private
// image, from POST .../images to ready (the archive kept in the image
// root, where every node of the region loads it from).
func BenchmarkSaveImage(b *testing.B) {
	needPodman(b)
	p := startPortalB(b)
	addTestImage(b, p)
	dir := b.TempDir()
	startPodmanAgent(b, p, filepath.Join(dir, "node"), filepath.Join(dir, "ckpt"), "--image-root", filepath.Join(dir, "images"))
	command := `dd if=/dev/urandom of=/data.bin bs=1M count=5120 2> /dev/null; echo up > "$GPUPORTAL_CHECKPOINT_DIR/up"; ` + untilTERM("sleep 3600")
	body, _ := json.Marshal(map[string]any{"kind": "on_demand", "model": "a100-80g", "region": "cd-1", "count": 1, "image": "e2e-busybox", "disk_gib": 50, "command": command})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		b.Fatalf("launch = %d", st)
	}
	up := filepath.Join(dir, "ckpt", fmt.Sprintf("instance-%d", inst.ID), "up")
	deadline := time.Now().Add(10 * time.Minute)
	for readTrim(up) != "up" || p.instance(inst.ID).Disk == nil || p.instance(inst.ID).Disk.Enforced == nil {
		if time.Now().After(deadline) {
			b.Fatal("the 5 GiB were not written")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for b.Loop() {
		var im gpuportal.Image
		if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/images", inst.ID), p.user, `{"name":"bench"}`, &im); st != 201 {
			b.Fatalf("save = %d", st)
		}
		for {
			var got gpuportal.Image
			p.api("GET", "/api/v1/images/"+im.ID, p.user, "", &got)
			if got.Status == gpuportal.ImageFailed {
				b.Fatalf("the save failed: %s", got.Error)
			}
			if got.Status == gpuportal.ImageReady {
				b.ReportMetric(float64(got.SizeBytes)/(1<<30), "GiB")
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.StopTimer()
		p.api("DELETE", "/api/v1/images/"+im.ID, p.user, "", nil)
		b.StartTimer()
	}
}
