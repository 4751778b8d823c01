package agent

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	v, err := newVolumeFS(dir, 1, os.Getgid(), new(volumeAccounts).open(1, dir))
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

// (issue 44, item 2) Every session writing into a volume shares one
// account of it, counted in blocks: parallel uploads cannot pass its size
// together (3 × 450 MB went into 1 GiB before), and a file extended by
// truncation and then written inside is counted as it fills (2 GiB went
// into 1 GiB); no file is truncated past the size.
func TestVolumeSessionsShareOneAccount(t *testing.T) {
	dir := t.TempDir()
	const limit = 4 << 20
	var accounts volumeAccounts
	client := func() *sftp.Client {
		v, err := newVolumeFS(dir, 1, os.Getgid(), accounts.open(1, dir))
		if err != nil {
			t.Fatal(err)
		}
		v.limit = limit
		server, client := net.Pipe()
		srv := sftp.NewRequestServer(server, sftp.Handlers{FileGet: v, FilePut: v, FileCmd: v, FileList: v})
		go func() { _ = srv.Serve(); v.root.Close(); accounts.close(1) }()
		c, err := sftp.NewClientPipe(client, client)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); srv.Close() })
		return c
	}
	// Three sessions upload 1.5 MiB each at once into 4 MiB.
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := 0
	for k := range 3 {
		c := client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := c.Create(fmt.Sprintf("/part-%d", k))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			block := make([]byte, 64<<10)
			for range 24 { // 1.5 MiB
				if _, err := f.Write(block); err != nil {
					return // no space: expected for one of them
				}
				mu.Lock()
				written += len(block)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if used := diskUsage(dir); used > limit {
		t.Errorf("parallel sessions stored %d bytes in a %d-byte volume", used, limit)
	}
	if written == 3*24*(64<<10) {
		t.Error("every parallel upload was taken whole")
	}

	// Extend by truncation, then write inside: counted as it fills.
	c := client()
	if err := c.Truncate("/part-0", 2*limit); err == nil {
		t.Error("a file was truncated past the volume's size")
	}
	if err := c.Remove("/part-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove("/part-2"); err != nil {
		t.Fatal(err)
	}
	f, err := c.Create("/sparse")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Truncate("/sparse", limit); err != nil {
		t.Fatalf("a sparse file of the volume's size: %v", err)
	}
	block := make([]byte, 64<<10)
	var failed bool
	for off := int64(0); off < limit; off += int64(len(block)) {
		if _, err := f.WriteAt(block, off); err != nil {
			failed = true
			break
		}
	}
	f.Close()
	if !failed {
		t.Error("writing inside a truncated file filled it past what the volume has room for")
	}
	if used := diskUsage(dir); used > limit {
		t.Errorf("the volume holds %d bytes, past its %d", used, limit)
	}
}
