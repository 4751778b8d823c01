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

// (issue 45) Bring your own image: a `podman save` archive put in a
// volume is imported (checked, loaded, kept in the image root), runs an
// instance on a node that had to load it from there, and a file that is
// no archive fails with the reason.
func TestPrivateImageFromAVolumeArchive(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	state, ckpt := filepath.Join(dir, "node"), filepath.Join(dir, "ckpt")
	ag := startPodmanAgent(t, p, state, ckpt)

	var vol gpuportal.Volume
	if st := p.api("POST", "/api/v1/volumes", p.user, `{"name":"envs","region":"cd-1","size_gib":5}`, &vol); st != 201 {
		t.Fatalf("create volume = %d", st)
	}
	volDir := filepath.Join(state, "volumes", gpuportal.VolumeDirName(vol.ID))
	if err := os.MkdirAll(filepath.Join(volDir, "images"), 0o775); err != nil {
		t.Fatal(err)
	}
	// The customer's image: busybox and a marker, saved as docker save does.
	marker := filepath.Join(dir, "marker")
	os.WriteFile(marker, []byte("built by the customer\n"), 0o644)
	busybox, _ := agent.StaticBusybox()
	own := fmt.Sprintf("localhost/gpuportal-e2e-own:%d", os.Getpid())
	if err := agent.ImportBusyboxImage("podman", own, busybox, map[string]string{"/etc/own-marker": marker}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("podman", "save", "--format", "docker-archive", "-o", filepath.Join(volDir, "images", "env.tar"), own).CombinedOutput(); err != nil {
		t.Fatalf("podman save: %v %s", err, out)
	}
	exec.Command("podman", "rmi", "--force", own).Run()
	os.WriteFile(filepath.Join(volDir, "images", "notes.txt"), []byte("no image here\n"), 0o644)

	var im, bad gpuportal.Image
	if st := p.api("POST", "/api/v1/images", p.user, fmt.Sprintf(`{"name":"my env","volume_id":%d,"path":"images/env.tar"}`, vol.ID), &im); st != 201 || im.Status != gpuportal.ImageSaving {
		t.Fatalf("import = %d %+v", st, im)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "--force", im.Reference).Run() })
	if st := p.api("POST", "/api/v1/images", p.user, fmt.Sprintf(`{"name":"notes","volume_id":%d,"path":"images/notes.txt"}`, vol.ID), &bad); st != 201 {
		t.Fatalf("import of a text file = %d", st)
	}
	if st := p.api("POST", "/api/v1/images", p.user, fmt.Sprintf(`{"name":"x","volume_id":%d,"path":"../../node.json"}`, vol.ID), nil); st != 400 {
		t.Errorf("import from outside the volume = %d", st)
	}
	imageNow := func(id string) gpuportal.Image {
		var got gpuportal.Image
		p.api("GET", "/api/v1/images/"+id, p.user, "", &got)
		return got
	}
	defer func() {
		if t.Failed() {
			t.Logf("agent:\n%s", ag.output())
		}
	}()
	eventually(t, 60*time.Second, "the import to be ready", func() bool { return imageNow(im.ID).Status == gpuportal.ImageReady })
	eventually(t, 60*time.Second, "the text file to fail", func() bool { return imageNow(bad.ID).Status == gpuportal.ImageFailed })
	if got := imageNow(bad.ID); !strings.Contains(got.Error, "not a tar archive") {
		t.Errorf("the failed import says %q", got.Error)
	}
	if got := imageNow(im.ID); got.SizeBytes <= 0 || got.Owner != "me" {
		t.Errorf("ready image = %+v", got)
	}
	var list []gpuportal.Image
	p.api("GET", "/api/v1/images", p.user, "", &list)
	if len(list) < 2 || list[len(list)-1].Owner != "me" {
		t.Errorf("GET /images = %+v", list)
	}
	if _, err := os.Stat(filepath.Join(state, "images", gpuportal.PrivateImageArchive(1))); err != nil {
		t.Errorf("the archive is not in the image root: %v", err)
	}
	// This node must load it again from the image root, as any node of
	// the region that never had it does.
	exec.Command("podman", "rmi", "--force", im.Reference).Run()
	body, _ := json.Marshal(map[string]any{"kind": "spot", "model": "a100-80g", "region": "cd-1", "count": 1, "image": im.ID, "disk_gib": 1,
		"command": `cat /etc/own-marker > "$GPUPORTAL_CHECKPOINT_DIR/seen"; ` + untilTERM("sleep 600")})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		t.Fatalf("launch in the own image = %d", st)
	}
	seen := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID), "seen")
	eventually(t, 60*time.Second, "the workload to read its image's marker", func() bool {
		if i := p.instance(inst.ID); i.Status == gpuportal.InstanceFailed {
			t.Fatalf("the instance failed: %s", i.Error)
		}
		return readTrim(seen) == "built by the customer"
	})
	if st := p.api("DELETE", "/api/v1/images/"+im.ID, p.user, "", nil); st != 409 {
		t.Errorf("delete while it runs = %d", st)
	}
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", nil)
	eventually(t, 30*time.Second, "the stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	if st := p.api("DELETE", "/api/v1/images/"+im.ID, p.user, "", nil); st != 204 {
		t.Errorf("delete = %d", st)
	}
	eventually(t, 30*time.Second, "the node to remove the archive", func() bool {
		_, err := os.Stat(filepath.Join(state, "images", gpuportal.PrivateImageArchive(1)))
		return os.IsNotExist(err)
	})
}
