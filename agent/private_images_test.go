package agent

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTar writes a tar archive with the named (empty) files.
func writeTar(t *testing.T, path string, names ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// (issue 45) An image archive is taken from inside the customer's volume
// only, as a file within the size, and only when it is a docker save or
// OCI archive; nothing is left behind when it is not.
func TestImageArchiveComesOnlyFromInsideTheVolume(t *testing.T) {
	vol, images := t.TempDir(), t.TempDir()
	secret := filepath.Join(t.TempDir(), "node-secret.tar")
	writeTar(t, secret, "manifest.json")
	writeTar(t, filepath.Join(vol, "docker.tar"), "manifest.json", "abc/layer.tar")
	writeTar(t, filepath.Join(vol, "oci.tar"), "oci-layout", "index.json", "blobs/sha256/x")
	writeTar(t, filepath.Join(vol, "plain.tar"), "README")
	os.WriteFile(filepath.Join(vol, "notes.txt"), []byte(strings.Repeat("not a tar archive\n", 100)), 0o644)
	os.Symlink(secret, filepath.Join(vol, "escape.tar"))
	os.Mkdir(filepath.Join(vol, "dir"), 0o755)
	accept := func(string) error { return nil }
	dst := filepath.Join(images, "private", "img-1.tar")
	for _, tc := range []struct {
		path string
		max  int64
		want string // "" accepted
	}{
		{"docker.tar", 1 << 20, ""},
		{"oci.tar", 1 << 20, ""},
		{"plain.tar", 1 << 20, "holds no image"},
		{"notes.txt", 1 << 20, "not a tar archive"},
		{"escape.tar", 1 << 20, "cannot be opened inside the volume"},
		{"missing.tar", 1 << 20, "no file missing.tar"},
		{"dir", 1 << 20, "not a file"},
		{"docker.tar", 100, "more than the"},
	} {
		os.Remove(dst)
		_, err := copyOutOfVolume(vol, tc.path, dst, tc.max, func(tmp string) error {
			if err := checkImageArchive(tmp); err != nil {
				return err
			}
			return accept(tmp)
		})
		_, statErr := os.Stat(dst)
		switch {
		case tc.want == "" && (err != nil || statErr != nil):
			t.Errorf("%s: %v (archive there: %v)", tc.path, err, statErr == nil)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		case tc.want != "" && statErr == nil:
			t.Errorf("%s: refused, yet an archive was left at %s", tc.path, dst)
		}
		if left, _ := filepath.Glob(filepath.Join(images, "private", "*.new")); len(left) > 0 {
			t.Errorf("%s: temporary files left: %v", tc.path, left)
		}
	}
}
