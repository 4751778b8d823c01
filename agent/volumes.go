package agent

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkg/sftp"

	"gpuportal"
)

// Volumes live under the agent's volume root (--volume-root: the
// region's shared filesystem in production, so every node of the region
// sees the same files), one directory per volume (gpuportal.VolumeDirName).
// The agent mounts them into workloads, serves their files to the portal
// over session streams (SFTP), measures their usage and removes the files
// of deleted ones.

// VolumeMeasureEvery is how often the agent measures its volumes' usage.
const VolumeMeasureEvery = time.Minute

// volumeDir is volume id's directory, made when first needed: setgid and
// group-writable for gpuportal.VolumeGID, so the owner's workloads (each
// a UID of its own, all in that group) and the file manager share it.
func (a *Agent) volumeDir(id int64) (string, error) {
	dir := filepath.Join(a.cfg.VolumeRoot, gpuportal.VolumeDirName(id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	gid := a.volumeHostGID()
	if err := os.Chown(dir, 0, gid); err != nil && !errors.Is(err, syscall.EPERM) {
		return "", err
	}
	return dir, os.Chmod(dir, 0o775|fs.ModeSetgid)
}

// volumeHostGID is gpuportal.VolumeGID as the node sees it (shifted by a
// user namespace's base when workloads run in one).
func (a *Agent) volumeHostGID() int {
	if rt, ok := a.cfg.Runtime.(*ContainerRuntime); ok {
		return rt.UserNSBase + gpuportal.VolumeGID
	}
	return gpuportal.VolumeGID
}

// volumeEnforcement says whether the volume root fails writes past a
// volume's size: an XFS root with project quotas does (volumequota.go);
// elsewhere the agent says why not, its own file server still refuses
// writes past the size, and the portal shows usage as measured.
func (a *Agent) volumeEnforcement() (bool, string) {
	return a.quotas != nil, a.quotaNote
}

// measureVolumes reports each volume directory's usage.
func (a *Agent) measureVolumes() *gpuportal.VolumeReport {
	enforced, note := a.volumeEnforcement()
	rep := &gpuportal.VolumeReport{Enforced: enforced, Note: note, Usage: []gpuportal.VolumeUsage{}}
	entries, err := os.ReadDir(a.cfg.VolumeRoot)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("cannot read the volume root", "root", a.cfg.VolumeRoot, "err", err)
		}
		return rep
	}
	for _, e := range entries {
		id, ok := volumeIDOf(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		rep.Usage = append(rep.Usage, gpuportal.VolumeUsage{ID: id, UsedBytes: diskUsage(filepath.Join(a.cfg.VolumeRoot, e.Name()))})
	}
	return rep
}

func volumeIDOf(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "vol-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id > 0
}

// diskUsage is the space dir's files take (their blocks, as du counts).
func diskUsage(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			} else {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// volumeLoop measures the volume root at once and then every
// VolumeMeasureEvery; the next heartbeat carries each measurement (a lost
// one is replaced by the next).
func (a *Agent) volumeLoop(ctx context.Context) {
	t := time.NewTicker(VolumeMeasureEvery)
	defer t.Stop()
	for {
		a.volumeReport.Store(a.measureVolumes())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deleteVolumes removes the files of volumes the portal deleted. The
// portal names a freshly deleted volume in every answer for a while, so
// one already removed (or never here) is passed over quietly.
func (a *Agent) deleteVolumes(ids []int64) {
	for _, id := range ids {
		dir := filepath.Join(a.cfg.VolumeRoot, gpuportal.VolumeDirName(id))
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			a.log.Warn("cannot remove a deleted volume", "volume", id, "err", err)
			continue
		}
		a.log.Info("deleted volume removed", "volume", id)
	}
}

// volumeFS serves one volume's files over SFTP, every path opened inside
// an os.Root of its directory: neither ".." nor a symbolic link can reach
// outside it. Writes past the volume's size fail with ENOSPC.
type volumeFS struct {
	root     *os.Root
	gid      int
	readOnly bool  // a suspended volume: every write is refused
	limit    int64 // bytes; 0: no limit known
	acct     *volumeAccount
}

// volumeAccount is what one volume holds, as every session of the file
// server on this node writes into it: one account per volume, shared by
// all its sessions (parallel uploads and SFTP clients included), counted
// in blocks allocated (as du counts), not apparent sizes, so a file
// extended by truncation and then written inside is counted as it fills.
type volumeAccount struct {
	used atomic.Int64 // bytes
	open int          // sessions on it now (under volumeAccounts.mu)
}

// volumeAccounts are the accounts of the volumes this node serves now.
type volumeAccounts struct {
	mu   sync.Mutex
	byID map[int64]*volumeAccount
}

// open is volume id's account for a session: measured afresh when no
// other session of it is open here (others — instances, other nodes — may
// have written since), shared while one is. close when the session ends.
func (va *volumeAccounts) open(id int64, dir string) *volumeAccount {
	va.mu.Lock()
	defer va.mu.Unlock()
	if va.byID == nil {
		va.byID = map[int64]*volumeAccount{}
	}
	acct := va.byID[id]
	if acct == nil {
		acct = &volumeAccount{}
		va.byID[id] = acct
	}
	if acct.open == 0 {
		acct.used.Store(diskUsage(dir))
	}
	acct.open++
	return acct
}

func (va *volumeAccounts) close(id int64) {
	va.mu.Lock()
	defer va.mu.Unlock()
	if acct := va.byID[id]; acct != nil {
		if acct.open--; acct.open <= 0 {
			delete(va.byID, id)
		}
	}
}

// reserve takes n bytes of the volume's room, or fails with ENOSPC past
// limit (0: none known); what the write did not take is given back with
// settle.
func (acct *volumeAccount) reserve(n, limit int64, name string) error {
	if acct.used.Add(n) > limit && limit > 0 {
		acct.used.Add(-n)
		return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	return nil
}

// newVolumeFS serves dir, counting its writes in acct (volumeAccounts.open
// measured it: the volume is walked once per session, not twice).
func newVolumeFS(dir string, sizeGiB int, gid int, acct *volumeAccount) (*volumeFS, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &volumeFS{root: root, gid: gid, limit: int64(sizeGiB) << 30, acct: acct}, nil
}

// serveVolume runs an SFTP server for volume id on rwc until the client
// goes away (for reading only, when readOnly).
func (a *Agent) serveVolume(rwc io.ReadWriteCloser, id int64, sizeGiB int, readOnly bool) error {
	dir, err := a.volumeDir(id)
	if err != nil {
		return err
	}
	if err := a.limitVolume(dir, id, sizeGiB); err != nil {
		return err
	}
	acct := a.volumeAccounts.open(id, dir)
	defer a.volumeAccounts.close(id)
	v, err := newVolumeFS(dir, sizeGiB, a.volumeHostGID(), acct)
	if err != nil {
		return err
	}
	defer v.root.Close()
	v.readOnly = readOnly
	srv := sftp.NewRequestServer(rwc, sftp.Handlers{FileGet: v, FilePut: v, FileCmd: v, FileList: v})
	defer srv.Close()
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// The SFTP handlers: every error a path leaving the volume causes reads
// as permission denied to the client.
func (v *volumeFS) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	f, err := v.fileread(r)
	return f, rootErr(err)
}

func (v *volumeFS) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	if v.readOnly {
		return nil, errReadOnly(r)
	}
	f, err := v.filewrite(r)
	return f, rootErr(err)
}

func (v *volumeFS) Filecmd(r *sftp.Request) error {
	if v.readOnly {
		return errReadOnly(r)
	}
	return rootErr(v.filecmd(r))
}

func (v *volumeFS) PosixRename(r *sftp.Request) error { return v.Filecmd(r) }

// errReadOnly refuses a write to a suspended volume.
func errReadOnly(r *sftp.Request) error {
	return &os.PathError{Op: strings.ToLower(r.Method), Path: r.Filepath, Err: syscall.EROFS}
}

func (v *volumeFS) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	l, err := v.filelist(r)
	return l, rootErr(err)
}

// rootErr turns os.Root's refusal of a path that leaves the volume
// (through ".." or a symbolic link pointing out; os has no exported
// error for it) into EPERM, which SFTP carries as permission denied.
func rootErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
		return &os.PathError{Op: pe.Op, Path: pe.Path, Err: syscall.EPERM}
	}
	return err
}

// rel is an SFTP path (absolute, from the volume's top) as a path inside
// the root.
func rel(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

func (v *volumeFS) fileread(r *sftp.Request) (io.ReaderAt, error) {
	return v.root.Open(rel(r.Filepath))
}

func (v *volumeFS) filewrite(r *sftp.Request) (io.WriterAt, error) {
	flags := r.Pflags()
	mode := os.O_WRONLY
	if flags.Creat {
		mode |= os.O_CREATE
	}
	if flags.Trunc {
		mode |= os.O_TRUNC
	}
	if flags.Excl {
		mode |= os.O_EXCL
	}
	if flags.Append {
		mode |= os.O_APPEND
	}
	name := rel(r.Filepath)
	f, err := v.root.OpenFile(name, mode, 0o664)
	if err != nil {
		return nil, err
	}
	_ = v.root.Lchown(name, -1, v.gid)
	allocated, err := allocatedBytes(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sizedWriter{f: f, fs: v, allocated: allocated}, nil
}

// allocatedBytes is what f takes on disk (its blocks).
func allocatedBytes(f *os.File) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512, nil
	}
	return info.Size(), nil
}

// blockSize rounds what a write may allocate.
const blockSize = 4096

// sizedWriter counts what a write adds to the volume against its size:
// before it writes, it reserves the most the write could allocate (its
// blocks, and one more for a partial one), so writers in parallel never
// pass the size together; after, what the file really took is counted.
type sizedWriter struct {
	mu        sync.Mutex
	f         *os.File
	fs        *volumeFS
	allocated int64 // bytes the file takes on disk, as last seen
}

func (w *sizedWriter) WriteAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	worst := (int64(len(p))+blockSize-1)/blockSize*blockSize + blockSize
	if err := w.fs.acct.reserve(worst, w.fs.limit, w.f.Name()); err != nil {
		return 0, err
	}
	n, err := w.f.WriteAt(p, off)
	now, statErr := allocatedBytes(w.f)
	if statErr != nil {
		now = w.allocated + worst // keep the reservation: never count less than it might be
	}
	w.fs.acct.used.Add(now - w.allocated - worst)
	w.allocated = now
	return n, err
}

func (w *sizedWriter) Close() error { return w.f.Close() }

func (v *volumeFS) filecmd(r *sftp.Request) error {
	name := rel(r.Filepath)
	switch r.Method {
	case "Setstat":
		attrs := r.AttrFlags()
		if attrs.Size {
			// No file grows past the volume's size, not even as a sparse
			// one; what a truncation frees (or takes) is counted.
			size := int64(r.Attributes().Size)
			if v.limit > 0 && size > v.limit {
				return &os.PathError{Op: "truncate", Path: name, Err: syscall.EFBIG}
			}
			f, err := v.root.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			before, err := allocatedBytes(f)
			if err != nil {
				return err
			}
			if err := f.Truncate(size); err != nil {
				return err
			}
			if after, err := allocatedBytes(f); err == nil {
				v.acct.used.Add(after - before)
			}
			return nil
		}
		if attrs.Permissions {
			return v.root.Chmod(name, r.Attributes().FileMode().Perm())
		}
		return nil // owners and times stay the agent's to set
	case "Rename", "PosixRename":
		return v.root.Rename(name, rel(r.Target))
	case "Rmdir":
		return v.root.Remove(name)
	case "Remove":
		var freed int64
		if info, err := v.root.Lstat(name); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink <= 1 {
				freed = st.Blocks * 512
			}
		}
		if err := v.root.Remove(name); err != nil {
			return err
		}
		v.acct.used.Add(-freed)
		return nil
	case "Mkdir":
		if err := v.root.Mkdir(name, 0o775); err != nil {
			return err
		}
		_ = v.root.Lchown(name, -1, v.gid)
		return v.root.Chmod(name, 0o775|fs.ModeSetgid)
	case "Symlink", "Link":
		// A link could name a place outside the volume for whoever
		// follows it later: refused.
		return &os.PathError{Op: strings.ToLower(r.Method), Path: name, Err: syscall.EPERM}
	}
	return sftp.ErrSSHFxOpUnsupported
}

// StatVFS tells clients (the portal's uploads) the volume's size and what
// is free of it.
func (v *volumeFS) StatVFS(*sftp.Request) (*sftp.StatVFS, error) {
	const bsize = 4096
	blocks := uint64(v.limit / bsize)
	used := uint64(max(v.acct.used.Load(), 0) / bsize)
	free := uint64(0)
	if blocks > used {
		free = blocks - used
	}
	return &sftp.StatVFS{Bsize: bsize, Frsize: bsize, Blocks: blocks, Bfree: free, Bavail: free, Namemax: 255}, nil
}

func (v *volumeFS) filelist(r *sftp.Request) (sftp.ListerAt, error) {
	name := rel(r.Filepath)
	switch r.Method {
	case "List":
		f, err := v.root.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		entries, err := f.ReadDir(-1)
		if err != nil {
			return nil, err
		}
		infos := make([]os.FileInfo, 0, len(entries))
		for _, e := range entries {
			if info, err := e.Info(); err == nil {
				infos = append(infos, info)
			}
		}
		slices.SortFunc(infos, func(a, b os.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
		return listerAt(infos), nil
	case "Stat":
		info, err := v.root.Stat(name)
		if err != nil {
			return nil, err
		}
		return listerAt{info}, nil
	case "Lstat":
		info, err := v.root.Lstat(name)
		if err != nil {
			return nil, err
		}
		return listerAt{info}, nil
	case "Readlink":
		return nil, &os.PathError{Op: "readlink", Path: name, Err: syscall.EPERM}
	}
	return nil, sftp.ErrSSHFxOpUnsupported
}

func (v *volumeFS) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	r.Method = "Lstat"
	l, err := v.filelist(r)
	return l, rootErr(err)
}

type listerAt []os.FileInfo

func (l listerAt) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if n < len(out) {
		return n, io.EOF
	}
	return n, nil
}
