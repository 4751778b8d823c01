package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gpuportal"
)

// Private images. The portal gives one node of the volume's region each
// import (AgentDesired.ImportImages): the agent copies the archive out of
// the customer's volume (never following a path out of it) into the image
// root (--image-root, the region's shared storage), checks that it is a
// docker save or OCI archive within the size, loads it under the image's
// own reference and reports ready or failed with the reason. Every other
// node loads it from the image root when a workload first needs it.

// imageImports tracks the imports this agent was given: running, or done
// and reported until the portal stops listing them.
type imageImports struct {
	mu      sync.Mutex
	running map[int64]bool
	done    map[int64]gpuportal.ImageReport
	removed map[int64]bool // deletions carried out
}

// reports are the finished imports to tell the portal.
func (ii *imageImports) reports() []gpuportal.ImageReport {
	ii.mu.Lock()
	defer ii.mu.Unlock()
	var out []gpuportal.ImageReport
	for _, r := range ii.done {
		out = append(out, r)
	}
	return out
}

// importImages starts the imports the portal lists that are neither
// running nor done, and forgets the done ones it no longer lists.
func (a *Agent) importImages(orders []gpuportal.ImageImportOrder) {
	ii := &a.images
	ii.mu.Lock()
	defer ii.mu.Unlock()
	if ii.running == nil {
		ii.running, ii.done = map[int64]bool{}, map[int64]gpuportal.ImageReport{}
	}
	listed := map[int64]bool{}
	for _, o := range orders {
		listed[o.ImageID] = true
		if ii.running[o.ImageID] {
			continue
		}
		if _, done := ii.done[o.ImageID]; done {
			continue
		}
		ii.running[o.ImageID] = true
		go func() {
			report := a.importImage(o)
			if report.Status == gpuportal.ImageFailed {
				a.log.Warn("image import failed", "image", o.ImageID, "err", report.Error)
			} else {
				a.log.Info("image imported", "image", o.ImageID, "bytes", report.SizeBytes)
			}
			ii.mu.Lock()
			delete(ii.running, o.ImageID)
			ii.done[o.ImageID] = report
			ii.mu.Unlock()
			a.pushNow()
		}()
	}
	for id := range ii.done {
		if !listed[id] {
			delete(ii.done, id)
		}
	}
}

// importImage carries out one import.
func (a *Agent) importImage(o gpuportal.ImageImportOrder) gpuportal.ImageReport {
	failed := func(format string, args ...any) gpuportal.ImageReport {
		return gpuportal.ImageReport{ImageID: o.ImageID, Status: gpuportal.ImageFailed, Error: fmt.Sprintf(format, args...)}
	}
	rt, ok := a.cfg.Runtime.(*ContainerRuntime)
	if !ok {
		return failed("this node runs workloads without a container engine, so it cannot load images")
	}
	if o.InstanceID != 0 {
		size, err := a.saveInstanceImage(rt, o)
		if err != nil {
			return failed("%v", err)
		}
		return gpuportal.ImageReport{ImageID: o.ImageID, Status: gpuportal.ImageReady, SizeBytes: size}
	}
	path, err := gpuportal.CleanVolumePath(o.Path)
	if err != nil || path == "." {
		return failed("the archive's path %q is not a file in the volume", o.Path)
	}
	dir, err := a.volumeDir(o.VolumeID)
	if err != nil {
		return failed("the volume cannot be read: %v", err)
	}
	size, err := copyOutOfVolume(dir, path, filepath.Join(rt.ImageRoot, gpuportal.PrivateImageArchive(o.ImageID)), o.MaxBytes, func(tmp string) error {
		if err := checkImageArchive(tmp); err != nil {
			return err
		}
		return rt.loadImage(tmp, o.Reference)
	})
	if err != nil {
		return failed("%v", err)
	}
	return gpuportal.ImageReport{ImageID: o.ImageID, Status: gpuportal.ImageReady, SizeBytes: size}
}

// copyOutOfVolume copies the file at path inside the volume directory dir
// to dst (through a temporary file that check sees first), refusing a
// path that leaves the volume (a symlink out included), what is not a
// regular file, and more than max bytes. Nothing is left at dst unless
// all of it succeeded.
func copyOutOfVolume(dir, path, dst string, limit int64, check func(tmp string) error) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("the volume cannot be read: %v", err)
	}
	defer root.Close()
	src, err := root.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("there is no file %s in the volume", path)
	} else if err != nil {
		return 0, fmt.Errorf("%s cannot be opened inside the volume: %v", path, err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a file", path)
	}
	if st.Size() > limit {
		return 0, fmt.Errorf("the archive is %s, more than the %s an image may be", formatBytes(st.Size()), formatBytes(limit))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return 0, err
	}
	tmp := dst + ".new"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp) // gone once renamed
	n, err := io.Copy(out, io.LimitReader(src, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("copy the archive: %v", err)
	}
	if n > limit {
		return 0, fmt.Errorf("the archive grew past the %s an image may be while it was copied", formatBytes(limit))
	}
	if err := check(tmp); err != nil {
		return 0, err
	}
	return n, os.Rename(tmp, dst)
}

// checkImageArchive says whether path is a tar archive an engine loads as
// an image: `docker save` (manifest.json) or OCI (oci-layout and
// index.json).
func checkImageArchive(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errors.New("the file is not a tar archive (make one with docker save -o image.tar IMAGE)")
		}
		seen[strings.TrimPrefix(h.Name, "./")] = true
	}
	if seen["manifest.json"] || (seen["oci-layout"] && seen["index.json"]) {
		return nil
	}
	return errors.New("the archive holds no image: a docker save archive has manifest.json, an OCI one oci-layout and index.json")
}

// loadImage loads an image archive and names it ref.
func (r *ContainerRuntime) loadImage(archive, ref string) error {
	out, err := r.cli("load", "--input", archive)
	if err != nil {
		return fmt.Errorf("the engine could not load the archive: %v", err)
	}
	var loaded string
	for line := range strings.SplitSeq(out, "\n") {
		for _, prefix := range []string{"Loaded image(s):", "Loaded image:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok && loaded == "" {
				loaded, _, _ = strings.Cut(strings.TrimSpace(rest), ",")
			}
		}
	}
	if loaded == "" {
		return fmt.Errorf("the engine loaded the archive but named no image: %s", out)
	}
	if _, err := r.cli("tag", loaded, ref); err != nil {
		return fmt.Errorf("name the loaded image: %v", err)
	}
	return nil
}

// ensureImage loads a private image from the image root when this node
// does not have it yet.
func (r *ContainerRuntime) ensureImage(spec Spec) error {
	if spec.ImageArchive == "" || spec.Image == "" {
		return nil
	}
	if _, err := r.cli("image", "exists", spec.Image); err == nil {
		return nil
	}
	archive := filepath.Join(r.ImageRoot, filepath.Clean("/" + spec.ImageArchive)[1:])
	if err := r.loadImage(archive, spec.Image); err != nil {
		return fmt.Errorf("image %s: %w", spec.Image, err)
	}
	return nil
}

// removeImages removes the copies of deleted private images: the loaded
// image and, once, the archive in the shared image root.
func (a *Agent) removeImages(ids []int64) {
	rt, ok := a.cfg.Runtime.(*ContainerRuntime)
	if !ok || len(ids) == 0 {
		return
	}
	ii := &a.images
	ii.mu.Lock()
	if ii.removed == nil {
		ii.removed = map[int64]bool{}
	}
	var fresh []int64
	listed := map[int64]bool{}
	for _, id := range ids {
		listed[id] = true
		if !ii.removed[id] {
			ii.removed[id] = true
			fresh = append(fresh, id)
		}
	}
	for id := range ii.removed {
		if !listed[id] {
			delete(ii.removed, id)
		}
	}
	ii.mu.Unlock()
	for _, id := range fresh {
		// Every tag of it (each is its own, whatever its token).
		out, _ := rt.cli("images", "--quiet", "--filter", "reference="+gpuportal.PrivateImageRepository(id))
		for _, img := range strings.Fields(out) {
			_, _ = rt.cli("rmi", "--force", img)
		}
		if err := os.Remove(filepath.Join(rt.ImageRoot, gpuportal.PrivateImageArchive(id))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("cannot remove a deleted image's archive", "image", id, "err", err)
		}
	}
}

// releaseDisks removes the files of kept disks the portal released (in
// the shared image root, so any node of the region may), but never the
// disk of an instance this node runs.
func (a *Agent) releaseDisks(ids []int64) {
	rt, ok := a.cfg.Runtime.(*ContainerRuntime)
	if !ok || len(ids) == 0 {
		return
	}
	for _, id := range ids {
		a.mu.Lock()
		w := a.workloads[id]
		running := w != nil && !w.exited
		a.mu.Unlock()
		if running {
			continue
		}
		if err := os.Remove(DiskFile(rt.ImageRoot, id)); err == nil {
			a.log.Info("released a kept disk", "instance", id)
		} else if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("cannot remove a released disk", "instance", id, "err", err)
		}
	}
}
