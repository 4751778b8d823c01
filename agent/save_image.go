package agent

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"gpuportal"
)

// Saving an instance as an image: the agent writes its root filesystem —
// the image it runs in with everything written on its disk — straight
// into a `docker save` archive in the image root (one layer, the config
// carrying the environment of the image it ran in), in one pass over the
// disk; every node of the region loads it from there when a workload
// first needs it. A running instance's tree is mounted already; a
// stopped one's kept disk is mounted for the while over its image.

// saveInstanceImage makes private image o.ImageID of instance
// o.InstanceID's disk and returns its archive's size.
func (a *Agent) saveInstanceImage(rt *ContainerRuntime, o gpuportal.ImageImportOrder) (int64, error) {
	if !rt.Disks {
		return 0, fmt.Errorf("this node gives instances no disk of their own (%s)", rt.DiskNote)
	}
	a.mu.Lock()
	w := a.workloads[o.InstanceID]
	running := w != nil && !w.exited && w.proc != nil
	a.mu.Unlock()
	img, err := rt.inspectImage(o.BaseImage)
	if err != nil {
		return 0, fmt.Errorf("the instance's image: %v", err)
	}
	root := rt.rootfsLayout(o.InstanceID).root()
	if !running {
		if _, err := os.Stat(rt.diskFile(o.InstanceID)); err != nil {
			return 0, fmt.Errorf("instance %d's kept disk is not in the image root: %v", o.InstanceID, err)
		}
		spec := Spec{InstanceID: o.InstanceID, DiskGiB: o.DiskGiB, Image: o.BaseImage}
		if root, err = rt.mountRootfs(spec, img); err != nil {
			return 0, err
		}
		defer func() {
			if err := rt.releaseRootfs(o.InstanceID, true); err != nil {
				a.log.Warn("cannot unmount a saved disk", "instance", o.InstanceID, "err", err)
			}
		}()
	} else if !isMountPoint(root) {
		return 0, fmt.Errorf("instance %d runs without a disk of its own here", o.InstanceID)
	}
	dst := filepath.Join(rt.ImageRoot, gpuportal.PrivateImageArchive(o.ImageID))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return 0, err
	}
	tmp := dst + ".new"
	defer os.Remove(tmp)
	size, err := writeImageArchive(tmp, root, rt.UserNSBase, o.Reference, img, o.MaxBytes)
	if err != nil {
		return 0, err
	}
	return size, os.Rename(tmp, dst)
}

// writeImageArchive writes the tree at root as a one-layer `docker save`
// archive at path, tagged ref, with img's environment and working
// directory. The layer goes in first, streamed once: its entry's header,
// whose size is known only at its end, is written into the first block,
// kept free for it. An archive past limit bytes is refused.
func writeImageArchive(path, root string, base int, ref string, img imageLayout, limit int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	const layerName = "layer/layer.tar"
	if _, err := f.Write(make([]byte, 512)); err != nil { // the block the layer's header goes in
		return 0, err
	}
	digest := sha256.New()
	counted := &countingWriter{w: io.MultiWriter(f, digest), limit: limit}
	if err := writeTree(counted, root, base); err != nil {
		if counted.over {
			return 0, fmt.Errorf("the image is more than the %s an image may be", formatBytes(limit))
		}
		return 0, fmt.Errorf("read the instance's disk: %w", err)
	}
	layerSize := counted.n // a whole number of 512-byte blocks, as tar writes
	diffID := "sha256:" + hex.EncodeToString(digest.Sum(nil))
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux", "created": time.Now().UTC().Format(time.RFC3339),
		"config": map[string]any{"Env": img.Env, "WorkingDir": img.WorkDir},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return 0, err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{ref}, "Layers": []string{layerName}}})
	if err != nil {
		return 0, err
	}
	tw := tar.NewWriter(f) // after the layer: the config, the manifest
	for _, e := range []struct {
		name string
		body []byte
	}{{configName, config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			return 0, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	var header bytes.Buffer
	hw := tar.NewWriter(&header)
	if err := hw.WriteHeader(&tar.Header{Name: layerName, Mode: 0o644, Size: layerSize, Typeflag: tar.TypeReg, ModTime: time.Now(), Format: tar.FormatGNU}); err != nil {
		return 0, err
	}
	if header.Len() < 512 {
		return 0, errors.New("the layer's header came out short")
	}
	if _, err := f.WriteAt(header.Bytes()[:512], 0); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), f.Sync()
}

// countingWriter counts what goes through, and stops past limit.
type countingWriter struct {
	w     io.Writer
	n     int64
	limit int64
	over  bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		c.over = true
		return 0, errors.New("too large")
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeTree writes the regular files, directories and links under root
// as a tar (sockets, devices and pipes are the running system's, not the
// environment's), their owners shifted back by base.
func writeTree(w io.Writer, root string, base int) error {
	tw := tar.NewWriter(w)
	shift := func(id int) int {
		if base > 0 && id >= base && id < base+65536 {
			return id - base
		}
		return 0 // the node's own (root): root inside too
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone while it was read: a running instance's
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		mode := info.Mode()
		if !mode.IsRegular() && !mode.IsDir() && mode&fs.ModeSymlink == 0 {
			return nil
		}
		link := ""
		if mode&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return nil
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if mode.IsDir() {
			h.Name += "/"
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			h.Uid, h.Gid = shift(int(st.Uid)), shift(int(st.Gid))
		}
		h.Uname, h.Gname = "", ""
		if !mode.IsRegular() {
			return tw.WriteHeader(h)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil // gone while it was read
		}
		defer f.Close()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		// What a running instance writes meanwhile: exactly the size the
		// header says, no more, no less.
		n, err := io.Copy(tw, io.LimitReader(f, h.Size))
		if err == nil && n < h.Size {
			_, err = io.CopyN(tw, zeros{}, h.Size-n)
		}
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// zeros pads a file that shrank while it was read.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
