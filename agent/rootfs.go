package agent

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// An instance's disk. With a user namespace (the default), a container's
// root filesystem is built by the agent rather than the engine:
//
//   - the image's layers, each an idmapped mount of the engine's own layer
//     directory (shared by every container of the image, never copied),
//     seen with the container's user namespace: the image's root-owned
//     files belong to root inside;
//   - under an overlay whose upper layer lives on the instance's disk: a
//     sparse ext4 image file of the instance's size in --image-root (the
//     region's shared storage), loop-mounted, also idmapped.
//
// Writes past the size fail with ENOSPC inside the container; the node's
// disk holds only the bytes written. The disk stores the container's own
// UIDs (0 is root inside, whatever the node's user-namespace base), so the
// same file means the same on every node of the region.
//
// The engine runs the container on that tree (podman --rootfs); the agent
// unmounts it once the container is gone.

// rootfsLayout is where one instance's tree is mounted on the node (one
// attempt of it runs on a node at a time): <run dir>/instance-<id>/{disk,
// disk.idmap,layers/N,root}.
// The run dir is under /run, not the state dir: the container's own
// init (an unprivileged UID of the node) must reach the root through
// every directory above it, and a state dir is private to root.
type rootfsLayout string

func (l rootfsLayout) disk() string       { return filepath.Join(string(l), "disk") }
func (l rootfsLayout) diskMapped() string { return filepath.Join(string(l), "disk.idmap") }
func (l rootfsLayout) layer(i int) string { return filepath.Join(string(l), "layers", fmt.Sprint(i)) }
func (l rootfsLayout) root() string       { return filepath.Join(string(l), "root") }

func (r *ContainerRuntime) rootfsLayout(instanceID int64) rootfsLayout {
	return rootfsLayout(filepath.Join(DiskMountDir(r.StateDir), fmt.Sprintf("instance-%d", instanceID)))
}

// DiskMountDir is where the disk trees of the node with stateDir are mounted:
// one directory per node, as several simulated nodes may share a machine.
func DiskMountDir(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join("/run/gpuportal-agent", hex.EncodeToString(sum[:6]))
}

// makeTraversable makes dir and the directories above it up to /run
// enterable by anyone (0711: not listable), so the container's init can
// reach its root.
func makeTraversable(dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	for d := dir; d != "/run" && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	return nil
}

// diskFile is an instance's disk image in the image root: the same file
// for each of its attempts, so that a kept disk starts again on any node
// of the region. The portal names an instance on one node at a time, and
// an attempt's disk is let go before its end is reported, so no two
// nodes ever mount it at once.
func (r *ContainerRuntime) diskFile(instanceID int64) string {
	return DiskFile(r.ImageRoot, instanceID)
}

// DiskFile is instance id's disk under an image root.
func DiskFile(imageRoot string, instanceID int64) string {
	return filepath.Join(imageRoot, "disks", fmt.Sprintf("instance-%d.ext4", instanceID))
}

// imageLayout is what the agent reads of an image to run it on a tree of
// its own: its layer directories (top first) and its configured
// environment and working directory, which --rootfs leaves behind.
type imageLayout struct {
	Layers  []string
	Env     []string
	WorkDir string
}

func (r *ContainerRuntime) inspectImage(ref string) (imageLayout, error) {
	out, err := r.cli("image", "inspect", "--format", "json", ref)
	if err != nil {
		return imageLayout{}, err
	}
	var raw []struct {
		GraphDriver struct {
			Name string            `json:"Name"`
			Data map[string]string `json:"Data"`
		} `json:"GraphDriver"`
		Config struct {
			Env        []string `json:"Env"`
			WorkingDir string   `json:"WorkingDir"`
		} `json:"Config"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil || len(raw) != 1 {
		return imageLayout{}, fmt.Errorf("%s image inspect %s: unexpected answer", r.CLI, ref)
	}
	img := raw[0]
	if img.GraphDriver.Name != "overlay" {
		return imageLayout{}, fmt.Errorf("image %s is stored by the %q storage driver; sized disks need overlay", ref, img.GraphDriver.Name)
	}
	var layers []string
	if up := img.GraphDriver.Data["UpperDir"]; up != "" {
		layers = append(layers, up)
	}
	if low := img.GraphDriver.Data["LowerDir"]; low != "" {
		layers = append(layers, strings.Split(low, ":")...)
	}
	if len(layers) == 0 {
		return imageLayout{}, fmt.Errorf("image %s has no layers", ref)
	}
	return imageLayout{Layers: layers, Env: img.Config.Env, WorkDir: img.Config.WorkingDir}, nil
}

// makeDisk creates a disk image of sizeGiB at path unless one is there: a
// sparse file (it takes the node's disk only as it is written) with an
// ext4 filesystem and no blocks reserved for root — the customer gets the
// whole size. It is made under a temporary name and renamed, so a crash
// never leaves half a filesystem under the disk's name.
func makeDisk(path string, sizeGiB int) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(sizeGiB) << 30)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var out []byte
		out, err = exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-L", "gpuportal-disk",
			"-E", "root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1", tmp).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// mountRootfs builds the tree an attempt's container runs on and returns
// its root. Whatever an earlier, unfinished start left mounted there is
// taken down first.
func (r *ContainerRuntime) mountRootfs(spec Spec, img imageLayout) (string, error) {
	l := r.rootfsLayout(spec.InstanceID)
	if err := unmountTree(string(l)); err != nil {
		return "", err
	}
	file := r.diskFile(spec.InstanceID)
	if err := makeDisk(file, spec.DiskGiB); err != nil {
		return "", fmt.Errorf("make the instance's disk: %w", err)
	}
	if err := makeTraversable(l.root()); err != nil {
		return "", err
	}
	for _, dir := range []string{l.disk(), l.diskMapped()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
	}
	fail := func(err error) (string, error) {
		_ = unmountTree(string(l))
		return "", err
	}
	if out, err := exec.Command("mount", "-o", "loop,nodev,noatime", file, l.disk()).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("mount the instance's disk: %v: %s", err, strings.TrimSpace(string(out))))
	}
	// upper/root: root's home, so HOME is writable even in an image
	// without one.
	for _, dir := range []string{"upper/root", "work"} {
		if err := os.MkdirAll(filepath.Join(l.disk(), dir), 0o755); err != nil {
			return fail(err)
		}
	}
	ns, err := newIDMapNamespace(r.UserNSBase)
	if err != nil {
		return fail(err)
	}
	defer ns.Close()
	if err := ns.bind(l.disk(), l.diskMapped(), false); err != nil {
		return fail(fmt.Errorf("idmap the instance's disk: %w", err))
	}
	lower := make([]string, len(img.Layers))
	for i, layer := range img.Layers {
		lower[i] = l.layer(i)
		if err := os.MkdirAll(lower[i], 0o700); err != nil {
			return fail(err)
		}
		if err := ns.bind(layer, lower[i], true); err != nil {
			return fail(fmt.Errorf("idmap the image's layer %s: %w", layer, err))
		}
	}
	opts := "lowerdir=" + strings.Join(lower, ":") +
		",upperdir=" + filepath.Join(l.diskMapped(), "upper") + ",workdir=" + filepath.Join(l.diskMapped(), "work")
	if err := unix.Mount("overlay", l.root(), "overlay", unix.MS_NODEV, opts); err != nil {
		return fail(fmt.Errorf("mount the instance's root filesystem: %w", err))
	}
	return l.root(), nil
}

// diskUsed is how much of an instance's disk is written (0 when it has
// no mounted disk).
func (r *ContainerRuntime) diskUsed(instanceID int64) (int64, bool) {
	// Every heartbeat asks, for each running workload: a mounted disk is
	// another device than the directory above it (cheaper than reading
	// the node's whole mount table).
	dir := r.rootfsLayout(instanceID).disk()
	var here, above unix.Stat_t
	if unix.Stat(dir, &here) != nil || unix.Stat(filepath.Dir(dir), &above) != nil || here.Dev == above.Dev {
		return 0, false
	}
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, true
}

// releaseRootfs takes an ended attempt's tree down and removes its disk,
// unless it is kept (a stop that keeps it: the disk stays in the image
// root for the instance's next start, on any node).
func (r *ContainerRuntime) releaseRootfs(instanceID int64, keep bool) error {
	l := r.rootfsLayout(instanceID)
	if err := unmountTree(string(l)); err != nil {
		return err
	}
	if keep {
		return nil
	}
	if err := os.Remove(r.diskFile(instanceID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// idmapNamespace is a user namespace that holds the mapping of a
// container's IDs (0–65535 inside are base onwards on the node), for
// idmapped mounts. One more ID is mapped: the node's root is 65536 of the
// mount, so that what the engine itself writes into the tree (an
// /etc/mtab link, mount points) can be written, as a file no one inside
// owns.
type idmapNamespace struct{ fd int }

func newIDMapNamespace(base int) (*idmapNamespace, error) {
	maps := []syscall.SysProcIDMap{{ContainerID: 0, HostID: base, Size: 65536}, {ContainerID: 65536, HostID: 0, Size: 1}}
	// A user namespace is made for a process: a short-lived one that
	// waits on its input. The namespace outlives it through the file
	// descriptor.
	cmd := exec.Command("cat")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: maps, GidMappings: maps}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("make a user namespace for idmapped mounts: %w", err)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	in.Close()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("open the idmap user namespace: %w", err)
	}
	return &idmapNamespace{fd: fd}, nil
}

func (n *idmapNamespace) Close() error { return unix.Close(n.fd) }

// bind mounts src at dst seen through the namespace's mapping, without
// device nodes (a customer's disk never holds a usable one); readOnly for
// an image's layers, which nothing on the node may change through it.
func (n *idmapNamespace) bind(src, dst string, readOnly bool) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(n.fd)}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, sc.Err()
}

// unescapeMountPath reads mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isMountPoint(dir string) bool {
	mps, err := mountsUnder(dir)
	return err == nil && slices.Contains(mps, dir)
}

// ReleaseDisks takes down every disk tree under a node's state dir: for a
// node being taken apart (and tests that end their agent while its
// containers still ran), never while the agent runs.
func ReleaseDisks(stateDir string) error {
	return unmountTree(DiskMountDir(stateDir))
}

// unmountTree unmounts everything mounted at or below dir (lazily: a
// process still inside keeps its view, the node's tree is clear at once)
// and then removes dir — only once nothing is mounted there, so a
// removal never reaches into a disk.
func unmountTree(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
	}
	if left, err := mountsUnder(dir); err != nil || len(left) > 0 {
		return fmt.Errorf("%s is still mounted after unmounting (%v)", dir, left)
	}
	return os.RemoveAll(dir)
}

// ProbeDisks says whether this node can give containers sized disks the
// way mountRootfs does: mkfs.ext4, loop devices and idmapped mounts, tried
// on a small disk under stateDir. The reason says what is missing.
func ProbeDisks(stateDir string, usernsBase int) (bool, string) {
	if usernsBase == 0 {
		return false, "workloads run without a user namespace (--userns-base 0)"
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		return false, "mkfs.ext4 is not installed (e2fsprogs)"
	}
	dir, err := os.MkdirTemp(stateDir, "disk-probe-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(dir)
	file, mnt, mapped, root := filepath.Join(dir, "probe.ext4"), filepath.Join(dir, "mnt"), filepath.Join(dir, "mapped"), filepath.Join(dir, "root")
	defer unmountTree(mnt)
	defer unmountTree(mapped)
	defer unmountTree(root)
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		return false, err.Error()
	}
	if err := os.Truncate(file, 16<<20); err != nil {
		return false, err.Error()
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", file).CombinedOutput(); err != nil {
		return false, fmt.Sprintf("mkfs.ext4: %s", strings.TrimSpace(string(out)))
	}
	for _, d := range []string{mnt, mapped, root} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return false, err.Error()
		}
	}
	if out, err := exec.Command("mount", "-o", "loop", file, mnt).CombinedOutput(); err != nil {
		return false, fmt.Sprintf("loop mount: %s", strings.TrimSpace(string(out)))
	}
	for _, d := range []string{"lower", "upper", "work"} {
		if err := os.MkdirAll(filepath.Join(mnt, d), 0o755); err != nil {
			return false, err.Error()
		}
	}
	ns, err := newIDMapNamespace(usernsBase)
	if err != nil {
		return false, err.Error()
	}
	defer ns.Close()
	if err := ns.bind(mnt, mapped, false); err != nil {
		return false, fmt.Sprintf("idmapped mounts: %v (Linux 5.19 or later)", err)
	}
	opts := fmt.Sprintf("lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work", mapped, mapped, mapped)
	if err := unix.Mount("overlay", root, "overlay", 0, opts); err != nil {
		return false, fmt.Sprintf("overlay on idmapped layers: %v (Linux 5.19 or later)", err)
	}
	if err := os.WriteFile(filepath.Join(root, "probe"), nil, 0o644); err != nil {
		return false, fmt.Sprintf("write through the overlay: %v", err)
	}
	return true, ""
}
