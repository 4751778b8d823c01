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
	t.Helper()
	v, err := newVolumeFS(dir, 1, os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	v.limit = limit
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
