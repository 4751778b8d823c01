package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/agent"
)

// (issue 45) With the agent's default flags a workload is root in its
// container and an unprivileged UID of the node; it installs into the
// image's own directories (write into /usr/local, chown), writes up to
// its disk's size and gets ENOSPC past it without filling the node, and
// cannot escape with unshare, mount, a device node or setns. Its disk
// shows on the instance, and goes with its end.
func TestRootInsideAUserNamespaceWithASizedDisk(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	state, ckpt := filepath.Join(dir, "node"), filepath.Join(dir, "ckpt")
	ag := startPodmanAgent(t, p, state, ckpt) // the defaults: no --userns-base, no --workload-network

	marker := fmt.Sprintf("sleep %d", 7000+os.Getpid()%1000)
	probe := `d="$GPUPORTAL_CHECKPOINT_DIR"
id -u > "$d/uid"
echo "$HOME" > "$d/home"
try() { if "$@" > /dev/null 2>&1; then echo allowed; else echo refused; fi; }
mkdir -p /usr/local/bin /usr/local/lib/pkg
printf '#!/bin/sh\necho installed\n' > /usr/local/bin/tool && chmod 755 /usr/local/bin/tool && tool > "$d/install"
echo data > /usr/local/lib/pkg/file && chown 1000:1000 /usr/local/lib/pkg/file && stat -c %u:%g /usr/local/lib/pkg/file > "$d/chown"
touch "$HOME/.profile" && echo home-writable > "$d/home-writable"
dd if=/dev/zero of=/big bs=1M count=1300 2> "$d/dd"; echo $? > "$d/dd-code"
rm -f /big
dd if=/dev/zero of=/kept bs=1M count=64 2> /dev/null
try unshare -m true > "$d/unshare"
try mount -t tmpfs none /mnt > "$d/mount"
try mknod /dev-null-copy c 1 3 > "$d/mknod"
try nsenter -t 1 -m true > "$d/setns"
grep NoNewPrivs /proc/self/status | tr -d ' \t' > "$d/nnp"
echo done > "$d/written"
` + untilTERM(marker)
	body, _ := json.Marshal(map[string]any{"kind": "spot", "model": "a100-80g", "region": "cd-1", "count": 1, "command": probe, "image": "e2e-busybox", "disk_gib": 1})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	if inst.Disk == nil || inst.Disk.SizeGiB != 1 {
		t.Fatalf("the launch's disk = %+v", inst.Disk)
	}
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID))
	defer func() {
		if t.Failed() {
			i := p.instance(inst.ID)
			t.Logf("instance %s, error %q, log:\n%s\nagent:\n%s", i.Status, i.Error, i.LogTail, ag.output())
		}
	}()
	eventually(t, 60*time.Second, "the probe to write its findings", func() bool {
		if st := p.instance(inst.ID).Status; st == gpuportal.InstanceFailed {
			t.Fatalf("the instance failed")
		}
		_, err := os.Stat(filepath.Join(runDir, "written"))
		return err == nil && hostPIDWith(marker) != 0
	})
	want := map[string]string{
		"uid": "0", "home": "/root", "home-writable": "home-writable", "install": "installed", "chown": "1000:1000", "dd-code": "1",
		"unshare": "refused", "mount": "refused", "mknod": "refused", "setns": "refused",
		"nnp": "NoNewPrivs:1", // a setuid binary gains nothing
	}
	for file, w := range want {
		if got := readTrim(filepath.Join(runDir, file)); got != w {
			t.Errorf("%s: %q, want %q", file, got, w)
		}
	}
	if dd := readTrim(filepath.Join(runDir, "dd")); !strings.Contains(dd, "No space left on device") {
		t.Errorf("writing past the disk: %q", dd)
	}
	// The node sees the same process as an unprivileged UID of its own.
	if uid := hostUID(hostPIDWith(marker)); uid < agent.DefaultUserNSBase {
		t.Errorf("the workload is UID %d on the node", uid)
	}
	// The disk file takes the node only what was written (64 MiB, not the
	// 1.3 GiB tried nor its 1 GiB size).
	files, _ := filepath.Glob(filepath.Join(state, "images", "disks", fmt.Sprintf("instance-%d.ext4", inst.ID)))
	if len(files) != 1 {
		t.Fatalf("disk files %v", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Size() != 1<<30 {
		t.Errorf("the disk file is %v (%v), want 1 GiB apparent", fi, err)
	} else if st, ok := fi.Sys().(interface{ Blocks() int64 }); ok && st.Blocks()*512 > 300<<20 {
		t.Errorf("the disk takes %d bytes of the node", st.Blocks()*512)
	}
	eventually(t, 30*time.Second, "the instance to show its disk's use", func() bool {
		d := p.instance(inst.ID).Disk
		return d != nil && d.Enforced != nil && *d.Enforced && d.UsedBytes >= 64<<20
	})
	var stopped gpuportal.Instance
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", &stopped)
	eventually(t, 30*time.Second, "the stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	eventually(t, 30*time.Second, "the disk to go", func() bool {
		left, _ := filepath.Glob(filepath.Join(state, "images", "disks", fmt.Sprintf("instance-%d*", inst.ID)))
		trees, _ := filepath.Glob(filepath.Join(agent.DiskMountDir(state), fmt.Sprintf("instance-%d*", inst.ID)))
		return len(left) == 0 && len(trees) == 0
	})
}
