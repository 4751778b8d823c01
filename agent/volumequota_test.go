package agent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The agent reads where its volume root lives and says why sizes are
// not enforced there (here: a temp dir that is not XFS with project
// quotas); the reason is what the portal shows.
func TestVolumeQuotaDetection(t *testing.T) {
	mp, fstype, _, err := mountOf(t.TempDir())
	if err != nil || mp == "" || fstype == "" {
		t.Fatalf("mountOf = %q %q %v", mp, fstype, err)
	}
	if q, why := detectProjectQuotas(t.TempDir()); q != nil || !strings.Contains(why, "not enforced") {
		if fstype != "xfs" {
			t.Errorf("detect on %s = %v %q; want a reason sizes are not enforced", fstype, q, why)
		}
	}
	if got := unescapeMount(`/mnt/with\040space`); got != "/mnt/with space" {
		t.Errorf("unescapeMount = %q", got)
	}
}

// (issue 44, item 2) On an XFS volume root with project quotas, a
// volume's size holds for whoever writes — an instance, SFTP, the file
// manager: a write past it fails with "no space left on device". It needs
// root, xfsprogs and a kernel with XFS quota support (CONFIG_XFS_QUOTA);
// where one is missing it says which and skips.
func TestVolumeSizeHoldsOnXFSProjectQuotas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: loop-mounting an XFS image needs root")
	}
	for _, tool := range []string{"mkfs.xfs", "xfs_quota"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is missing (apt-get install xfsprogs)", tool)
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "root.img"), filepath.Join(dir, "root")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Truncate(3 << 30) // sparse: XFS writes little of it
	f.Close()
	if out, err := exec.Command("mkfs.xfs", "-q", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v %s", err, out)
	}
	_ = os.MkdirAll(mnt, 0o755)
	if out, err := exec.Command("mount", "-o", "loop,prjquota", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("skipping: this kernel cannot mount XFS with project quotas (no CONFIG_XFS_QUOTA?): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	q, why := detectProjectQuotas(mnt)
	if q == nil {
		t.Fatalf("an XFS root with prjquota is not taken as enforcing: %s", why)
	}
	vol := filepath.Join(mnt, "vol-1")
	_ = os.MkdirAll(vol, 0o775)
	if err := q.limit(context.Background(), vol, 1, 1); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(vol, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	err = unix.Fallocate(int(big.Fd()), 0, 0, 3<<29) // 1.5 GiB into 1 GiB
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("1.5 GiB into a 1 GiB volume: %v; want no space left", err)
	}
	if err := unix.Fallocate(int(big.Fd()), 0, 0, 1<<29); err != nil {
		t.Fatalf("0.5 GiB into a 1 GiB volume: %v", err)
	}
	// Grown: the new limit holds.
	if err := q.limit(context.Background(), vol, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(big.Fd()), 0, 0, 3<<29); err != nil {
		t.Fatalf("1.5 GiB into the volume grown to 2 GiB: %v", err)
	}
}
