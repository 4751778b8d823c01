package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Volume sizes inside instances are the filesystem's to enforce: a
// volume is a directory of the volume root mounted into containers, and
// nothing in a container's path to it counts bytes. An XFS volume root
// mounted with project quotas (prjquota) does: each volume's directory is
// an XFS project of its own (its id projectBase + the volume's id,
// inherited by all it holds), limited to the volume's size, and a write
// past it fails with ENOSPC in the instance, over SFTP and in the file
// manager alike — whichever node of the region writes, since the limit
// lives in the shared filesystem. xfs_quota (Debian's xfsprogs) sets them.
// On any other root, sizes are measured, not enforced, and the agent
// says so (docs/nodes.md).

// projectBase keeps volume projects clear of ids an operator's own
// projects on the same filesystem use.
const projectBase = 1 << 24

// projectQuotas sets volume directories' XFS project quotas.
type projectQuotas struct {
	mountpoint string // of the filesystem holding the volume root
	tool       string // xfs_quota

	mu      sync.Mutex
	limited map[int64]int // volume id → GiB its project is limited to now
}

// detectProjectQuotas reports whether root is on an XFS filesystem with
// project quotas on, and xfs_quota can set them; why not otherwise.
func detectProjectQuotas(root string) (*projectQuotas, string) {
	mnt, fstype, opts, err := mountOf(root)
	if err != nil {
		return nil, "volume sizes are measured, not enforced: cannot read the volume root's mount (" + err.Error() + ")"
	}
	if fstype != "xfs" {
		return nil, fmt.Sprintf("volume sizes are measured, not enforced: the volume root is on %s, not XFS with project quotas (prjquota)", fstype)
	}
	if !hasAny(opts, "prjquota", "pquota", "pqnoenforce") || hasAny(opts, "pqnoenforce") {
		return nil, "volume sizes are measured, not enforced: the volume root's XFS is mounted without project quotas (mount it with -o prjquota)"
	}
	tool, err := exec.LookPath("xfs_quota")
	if err != nil {
		return nil, "volume sizes are measured, not enforced: xfs_quota is missing (apt-get install xfsprogs)"
	}
	return &projectQuotas{mountpoint: mnt, tool: tool, limited: map[int64]int{}}, ""
}

func hasAny(opts []string, names ...string) bool {
	for _, o := range opts {
		for _, n := range names {
			if o == n {
				return true
			}
		}
	}
	return false
}

// mountOf finds the mount holding path in /proc/self/mountinfo: the
// longest mount point above it, with its filesystem type and options.
func mountOf(path string) (mountpoint, fstype string, opts []string, err error) {
	path, err = filepath.EvalSymlinks(path)
	if err != nil {
		return "", "", nil, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := -1
		for k, fl := range fields {
			if fl == "-" {
				sep = k
				break
			}
		}
		if len(fields) < 6 || sep < 0 || sep+3 > len(fields) {
			continue
		}
		mp := unescapeMount(fields[4])
		if !(path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")) || len(mp) < len(mountpoint) {
			continue
		}
		mountpoint, fstype = mp, fields[sep+1]
		opts = append(strings.Split(fields[5], ","), strings.Split(fields[sep+3], ",")...)
	}
	if mountpoint == "" {
		return "", "", nil, fmt.Errorf("no mount holds %s", path)
	}
	return mountpoint, fstype, opts, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for k := 0; k < len(s); k++ {
		if s[k] == '\\' && k+3 < len(s) {
			if n, err := strconv.ParseUint(s[k+1:k+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				k += 3
				continue
			}
		}
		b.WriteByte(s[k])
	}
	return b.String()
}

// limit makes dir volume id's project, limited to sizeGiB (idempotent: a
// volume whose limit is set already costs a map look-up). A volume grown
// since gets its new limit.
func (q *projectQuotas) limit(ctx context.Context, dir string, id int64, sizeGiB int) error {
	if sizeGiB <= 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	had, known := q.limited[id]
	if known && had == sizeGiB {
		return nil
	}
	project := strconv.FormatInt(projectBase+id, 10)
	if !known {
		// -s: set the project (and its inherit flag) on the directory and
		// everything already in it.
		if err := q.run(ctx, fmt.Sprintf("project -s -p %s %s", dir, project)); err != nil {
			return err
		}
	}
	if err := q.run(ctx, fmt.Sprintf("limit -p bhard=%dg %s", sizeGiB, project)); err != nil {
		return err
	}
	q.limited[id] = sizeGiB
	return nil
}

func (q *projectQuotas) run(ctx context.Context, command string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, q.tool, "-x", "-c", command, q.mountpoint).CombinedOutput()
	if err != nil {
		return fmt.Errorf("xfs_quota %q: %v: %s", command, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// limitVolume sets volume id's size limit where the volume root enforces
// sizes (a no-op elsewhere).
func (a *Agent) limitVolume(dir string, id int64, sizeGiB int) error {
	if a.quotas == nil {
		return nil
	}
	if err := a.quotas.limit(context.Background(), dir, id, sizeGiB); err != nil {
		return fmt.Errorf("volume %d's size limit: %w", id, err)
	}
	return nil
}
