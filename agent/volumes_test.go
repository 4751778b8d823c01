package agent

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"
)

// volumeClient serves dir as a volume of sizeGiB over an in-memory pipe
// and returns an SFTP client of it.
func volumeClient(t *testing.T, dir string, limit int64) *sftp.Client {
	return volumeClientOf(t, dir, limit, false)
}

func volumeClientOf(t *testing.T, dir string, limit int64, readOnly bool) *sftp.Client {
	t.Helper()
	v, err := newVolumeFS(dir, 1, os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	v.limit, v.readOnly = limit, readOnly
	server, client := net.Pipe()
	srv := sftp.NewRequestServer(server, sftp.Handlers{FileGet: v, FilePut: v, FileCmd: v, FileList: v})
	go func() { _ = srv.Serve(); v.root.Close() }()
	c, err := sftp.NewClientPipe(client, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c
}

// (issue 24) The agent's volume file server keeps every path inside the
// volume — "..", absolute paths and symbolic links pointing out read
// nothing outside — refuses to make links, and fails writes past the
// volume's size with "no space left on device".
func TestVolumeFileServerStaysInsideAndWithinSize(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "vol-1")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(base, "secret"), []byte("not yours"), 0o644)
	os.Symlink(filepath.Join(base, "secret"), filepath.Join(dir, "link-out"))
	os.Symlink(base, filepath.Join(dir, "dir-out"))
	c := volumeClient(t, dir, 1<<20)

	for _, p := range []string{"/../secret", "../secret", "/link-out", "/dir-out/secret"} {
		f, err := c.Open(p)
		if err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			if strings.Contains(string(b), "not yours") {
				t.Errorf("read %s outside the volume: %q", p, b)
			}
		}
	}
	if _, err := c.ReadDir("/dir-out"); err == nil {
		t.Error("listed a directory outside the volume")
	}
	if err := c.Symlink("/etc/passwd", "/mine"); err == nil {
		t.Error("made a symbolic link")
	}
	if f, err := c.Create("/dir-out/planted"); err == nil {
		f.Close()
		t.Error("created a file through a link out")
	}
	if _, err := os.Stat(filepath.Join(base, "planted")); err == nil {
		t.Error("a file was written outside the volume")
	}

	// Within size: fine; past it: ENOSPC, and what fits is kept.
	if err := c.MkdirAll("/a/b"); err != nil {
		t.Fatal(err)
	}
	f, err := c.Create("/a/b/small")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 512<<10)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f, err = c.Create("/a/big")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(make([]byte, 1<<20))
	f.Close()
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("a write past the size: %v, want no space left on device", err)
	}
	if vfs, err := c.StatVFS("/"); err != nil || vfs.TotalSpace() != 1<<20 || vfs.FreeSpace() >= 1<<19 {
		t.Errorf("statvfs = %+v, %v", vfs, err)
	}
}

// (issue 44, item 7) A suspended volume's files are served for reading
// only: uploads, truncation, renames, deletions and new folders are all
// refused; what is there still downloads.
func TestSuspendedVolumeIsReadOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kept.txt"), []byte("still yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := volumeClientOf(t, dir, 1<<30, true)
	f, err := c.Open("/kept.txt")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(f); string(b) != "still yours" {
		t.Errorf("read %q", b)
	}
	f.Close()
	if f, err := c.Create("/new.bin"); err == nil {
		_, err = f.Write([]byte("x"))
		f.Close()
		if err == nil {
			t.Error("wrote a new file into a suspended volume")
		}
	}
	for name, err := range map[string]error{
		"truncate": c.Truncate("/kept.txt", 1<<20),
		"rename":   c.Rename("/kept.txt", "/moved.txt"),
		"remove":   c.Remove("/kept.txt"),
		"mkdir":    c.Mkdir("/folder"),
	} {
		if err == nil {
			t.Errorf("%s in a suspended volume succeeded", name)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "kept.txt")); string(b) != "still yours" {
		t.Errorf("the file is now %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.bin")); err == nil {
		t.Error("a file was made")
	}
}
