package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/internal/browsertest"
)

// volumeFile is a volume's file through the API: its status and body.
func (p *portal) volumeFile(method string, id int64, path, token, body string) (int, string) {
	p.t.Helper()
	url := fmt.Sprintf("%s/api/v1/volumes/%d/files/content?path=%s", p.url, id, path)
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// (issue 24) Two real agents (podman) share one volume root, as the nodes
// of a region share its filesystem: a file uploaded through the API is
// read by an instance on one node; what that instance writes is read by
// an instance on the other node, and downloaded through the API and with
// the real OpenSSH sftp; paths that leave the volume and another
// customer's volume are refused through the API and SFTP, nothing read;
// deleting while mounted is 409. The test machine's storage cannot
// enforce sizes (no project quotas): the volume says so, with its usage
// measured.
func TestVolumesSharedAcrossNodes(t *testing.T) {
	t.Parallel()
	needPodman(t)
	needOpenSSH(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	root := filepath.Join(dir, "volumes")
	startPodmanAgent(t, p, filepath.Join(dir, "node-a"), filepath.Join(dir, "ckpt"), "--volume-root", root)
	startPodmanAgent(t, p, filepath.Join(dir, "node-b"), filepath.Join(dir, "ckpt"), "--volume-root", root)
	eventually(t, 30*time.Second, "both nodes online", func() bool { return len(p.nodes()) == 2 })

	var v gpuportal.Volume
	if st := p.api("POST", "/api/v1/volumes", p.user, `{"name":"data","region":"cd-1","size_gib":1}`, &v); st != 201 {
		t.Fatalf("create volume = %d", st)
	}
	if st := p.api("POST", "/api/v1/volumes", p.user, `{"name":"Bad Name","region":"cd-1","size_gib":0}`, nil); st != 400 {
		t.Errorf("a bad volume = %d, want 400", st)
	}
	if st, body := p.volumeFile("PUT", v.ID, "in/hello.txt", p.user, "hello from the API\n"); st != 201 {
		t.Fatalf("upload = %d %s", st, body)
	}

	// Paths that leave the volume, and another customer's volume.
	if err := os.Symlink("/etc", filepath.Join(root, gpuportal.VolumeDirName(v.ID), "escape")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../vol-1/x", "/etc/passwd", "in/../../x", "escape/passwd", "escape"} {
		if st, body := p.volumeFile("GET", v.ID, bad, p.user, ""); st != 400 || strings.Contains(body, "root:") {
			t.Errorf("download %q = %d %.80s, want 400 and nothing read", bad, st, body)
		}
	}
	if st := p.api("GET", fmt.Sprintf("/api/v1/volumes/%d/files?path=escape", v.ID), p.user, "", nil); st != 400 {
		t.Errorf("listing through a symlink out = %d, want 400", st)
	}
	bob := p.token(mustUser(t, p, "bob@example.com"))
	if st, _ := p.volumeFile("GET", v.ID, "in/hello.txt", bob, ""); st != 404 {
		t.Errorf("another customer's download = %d, want 404", st)
	}
	if st := p.api("GET", fmt.Sprintf("/api/v1/volumes/%d", v.ID), bob, "", nil); st != 404 {
		t.Errorf("another customer's volume = %d, want 404", st)
	}

	// Node A reads the upload and writes; node B reads what A wrote.
	launch := func(command string) gpuportal.Instance {
		body, _ := json.Marshal(map[string]any{"kind": "spot", "model": "a100-80g", "region": "cd-1", "count": 8, "command": command,
			"image": "e2e-busybox", "volumes": []map[string]any{{"id": v.ID}}})
		var inst gpuportal.Instance
		if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
			t.Fatalf("launch = %d", st)
		}
		return inst
	}
	a := launch(`cat /data/data/in/hello.txt > /data/data/a-read.txt && id -G >> /data/data/a-read.txt && echo from-node-a > /data/data/out.txt; ` + untilTERM("sleep 3600"))
	eventually(t, 60*time.Second, "instance A running", func() bool { return p.instance(a.ID).Status == gpuportal.InstanceRunning })
	b := launch(`while [ ! -s /data/data/out.txt ]; do sleep 0.2; done; cat /data/data/out.txt > /data/data/b-read.txt; ` + untilTERM("sleep 3600"))
	eventually(t, 60*time.Second, "instance B running", func() bool { return p.instance(b.ID).Status == gpuportal.InstanceRunning })
	if na, nb := p.instance(a.ID).Node, p.instance(b.ID).Node; na == nb {
		t.Fatalf("both instances on node %s", na)
	}
	if got := p.instance(a.ID).Volumes; len(got) != 1 || got[0].MountPath != "/data/data" {
		t.Errorf("instance volumes = %+v", got)
	}
	var read string
	eventually(t, 60*time.Second, "node B's instance to read what node A's wrote", func() bool {
		st, body := p.volumeFile("GET", v.ID, "b-read.txt", p.user, "")
		read = body
		return st == 200 && body != ""
	})
	if read != "from-node-a\n" {
		t.Errorf("node B read %q", read)
	}
	if st, body := p.volumeFile("GET", v.ID, "a-read.txt", p.user, ""); st != 200 || !strings.HasPrefix(body, "hello from the API\n") {
		t.Errorf("node A read %d %q", st, body)
	}
	var files []gpuportal.VolumeFile
	if st := p.api("GET", fmt.Sprintf("/api/v1/volumes/%d/files", v.ID), p.user, "", &files); st != 200 || len(files) < 4 || !files[0].IsDir {
		t.Errorf("files = %d %+v", st, files)
	}

	// The real OpenSSH sftp on the gateway, no instance needed for it.
	alice := p.addKey(t)
	local := filepath.Join(t.TempDir(), "out.txt")
	batch := filepath.Join(t.TempDir(), "batch")
	os.WriteFile(batch, []byte("get out.txt "+local+"\nput "+batch+" from-sftp.txt\nls\n"), 0o600)
	target := fmt.Sprintf("volume-%d@%s", v.ID, alice.host)
	out, err := exec.Command("sftp", append(append([]string{"-P", alice.port}, alice.opts()...), "-b", batch, target)...).CombinedOutput()
	if err != nil {
		t.Fatalf("sftp: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(local); string(got) != "from-node-a\n" {
		t.Errorf("sftp got %q", got)
	}
	if st, body := p.volumeFile("GET", v.ID, "from-sftp.txt", p.user, ""); st != 200 || !strings.Contains(body, "get out.txt") {
		t.Errorf("the file put with sftp = %d %q", st, body)
	}
	os.WriteFile(batch, []byte("get escape/passwd "+local+".passwd\n"), 0o600)
	if out, err := exec.Command("sftp", append(append([]string{"-P", alice.port}, alice.opts()...), "-b", batch, target)...).CombinedOutput(); err == nil {
		t.Errorf("sftp read through a symlink out:\n%s", out)
	}
	if _, err := os.Stat(local + ".passwd"); err == nil {
		t.Error("sftp wrote what a symlink out pointed to")
	}
	bobKey := p.addKeyOf(t, bob)
	os.WriteFile(batch, []byte("ls\n"), 0o600)
	if out, err := exec.Command("sftp", append(append([]string{"-P", bobKey.port}, bobKey.opts()...), "-b", batch, target)...).CombinedOutput(); err == nil {
		t.Errorf("another customer's key got into the volume:\n%s", out)
	}

	// Not enforced here: said so, and usage measured.
	eventually(t, 30*time.Second, "the volume's usage measured", func() bool {
		var got gpuportal.Volume
		p.api("GET", fmt.Sprintf("/api/v1/volumes/%d", v.ID), p.user, "", &got)
		return got.UsedBytes > 0 && got.UsedAt != nil
	})
	var got gpuportal.Volume
	p.api("GET", fmt.Sprintf("/api/v1/volumes/%d", v.ID), p.user, "", &got)
	if got.Enforced || got.EnforceNote == "" || got.Status != gpuportal.VolumeInUse || len(got.MountedBy) != 2 {
		t.Errorf("volume = %+v", got)
	}

	if st := p.api("DELETE", fmt.Sprintf("/api/v1/volumes/%d", v.ID), p.user, "", nil); st != 409 {
		t.Errorf("delete while mounted = %d, want 409", st)
	}
	for _, i := range []gpuportal.Instance{a, b} {
		p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", i.ID), p.user, "", nil)
	}
	eventually(t, 60*time.Second, "both instances stopped", func() bool {
		return p.instance(a.ID).Status == gpuportal.InstanceStopped && p.instance(b.ID).Status == gpuportal.InstanceStopped
	})
	if st := p.api("DELETE", fmt.Sprintf("/api/v1/volumes/%d", v.ID), p.user, "", nil); st != 204 {
		t.Fatalf("delete = %d, want 204", st)
	}
	eventually(t, 90*time.Second, "the deleted volume's files removed by an agent", func() bool {
		_, err := os.Stat(filepath.Join(root, gpuportal.VolumeDirName(v.ID)))
		return os.IsNotExist(err)
	})
}

// (issue 24) The file manager in Chromium: a file chosen on /volumes/{id}
// is uploaded (with its progress), listed, and downloaded with the same
// bytes; a path leaving the volume shows an error on the page.
func TestVolumeFileManagerInTheBrowser(t *testing.T) {
	t.Parallel()
	ctx := browsertest.Chromium(t)
	p := startPortal(t, false)
	root := filepath.Join(t.TempDir(), "volumes")
	p.startAgentArgsVolumes(t, root)
	var v gpuportal.Volume
	if st := p.api("POST", "/api/v1/volumes", p.user, `{"name":"notebooks","region":"cd-1","size_gib":5}`, &v); st != 201 {
		t.Fatalf("create volume = %d", st)
	}
	local := filepath.Join(t.TempDir(), "results.csv")
	want := strings.Repeat("epoch,loss\n1,0.42\n", 20000) // 360 KB
	os.WriteFile(local, []byte(want), 0o644)

	browserLogIn(t, ctx, p, "alice@example.com")
	var listed string
	if err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/volumes", p.url)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="volume-notebooks"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="volume-notebooks"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-files"]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`[data-testid="upload-input"]`), []string{local}),
		chromedp.Click(chromedp.CSS(`[data-testid="upload"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="file-results.csv"]`)),
	); err != nil {
		t.Fatalf("upload: %v", err)
	}
	listed, _ = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="file-results.csv"]`)))
	if !strings.Contains(listed, "results.csv") || !strings.Contains(listed, "KiB") {
		t.Errorf("listed as %q", listed)
	}
	// The download link, fetched as the page would follow it.
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const a = document.querySelector('[data-testid="file-results.csv"] a[data-testid="download"]');
		const r = await fetch(a.href);
		return r.status + ":" + (r.headers.get("content-disposition") || "") + ":" + await r.text();
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "200:attachment") || !strings.HasSuffix(got, ":"+want) {
		t.Errorf("download = %.120q…", got)
	}
	if b, _ := os.ReadFile(filepath.Join(root, gpuportal.VolumeDirName(v.ID), "results.csv")); string(b) != want {
		t.Errorf("the stored file differs (%d bytes)", len(b))
	}
	// A path out of the volume: an error on the page, no listing.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/volumes/%d?path=..%%2F..", p.url, v.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="files-error"]`)),
	); err != nil {
		t.Errorf("a path out of the volume: %v", err)
	}
}

// startAgentArgsVolumes starts an exec agent with its volumes under root.
func (p *portal) startAgentArgsVolumes(t *testing.T, root string) *agentProc {
	t.Helper()
	var out struct{ Token string }
	if st := p.api("POST", "/api/v1/admin/enrollment-tokens", p.admin, `{"region":"cd-1"}`, &out); st != 201 {
		t.Fatalf("enrollment token: %d", st)
	}
	a := startAgentProcArgs(t, p.url, out.Token, t.TempDir(), t.TempDir(), "mock:dgxa100", testHeartbeat, "", "--volume-root", root)
	t.Cleanup(a.kill)
	eventually(t, 30*time.Second, "the node online", func() bool { return len(p.nodes()) == 1 })
	return a
}

// (issue 24) An upload larger than what the volume has free is 413 and
// leaves nothing behind; within it, it is stored.
func TestVolumeUploadPastTheFreeSpace(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	root := filepath.Join(t.TempDir(), "volumes")
	p.startAgentArgsVolumes(t, root)
	var v gpuportal.Volume
	if st := p.api("POST", "/api/v1/volumes", p.user, `{"name":"small","region":"cd-1","size_gib":1}`, &v); st != 201 {
		t.Fatalf("create volume = %d", st)
	}
	// Fill it to 1 MiB short of its size (blocks allocated, nothing written).
	dir := filepath.Join(root, gpuportal.VolumeDirName(v.ID))
	os.MkdirAll(dir, 0o775)
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, 1<<30-1<<20); err != nil {
		f.Close()
		t.Skipf("this filesystem cannot allocate blocks ahead (%v)", err)
	}
	f.Close()
	big := strings.Repeat("x", 2<<20)
	if st, body := p.volumeFile("PUT", v.ID, "too-big.bin", p.user, big); st != http.StatusRequestEntityTooLarge || !strings.Contains(body, "too_large") {
		t.Errorf("an upload past the free space = %d %s, want 413", st, body)
	}
	if _, err := os.Stat(filepath.Join(dir, "too-big.bin")); err == nil {
		t.Error("the refused upload left a file")
	}
	if st, body := p.volumeFile("PUT", v.ID, "fits.bin", p.user, big[:512<<10]); st != http.StatusCreated {
		t.Errorf("an upload that fits = %d %s", st, body)
	}

	// The customers' CLI copies in and out of the volume.
	gpu := build(t.TempDir(), "gpuportal/cmd/gpu", "CGO_ENABLED=0")
	local := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(local, []byte("copied by gpu cp\n"), 0o644)
	env := append(os.Environ(), "GPU_PORTAL_URL="+p.url, "GPU_TOKEN="+p.user, "LANG=C")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(gpu, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("cp", "--progress", local, fmt.Sprintf("vol:%d:docs/", v.ID)); err != nil || !strings.Contains(out, "docs/notes.txt") || !strings.Contains(out, "100 %") {
		t.Fatalf("gpu cp up: %v %s", err, out)
	}
	back := filepath.Join(t.TempDir(), "back.txt")
	// --progress: how far it is, on stderr (by itself on a terminal).
	if out, err := run("cp", "--progress", fmt.Sprintf("vol:%d:docs/notes.txt", v.ID), back); err != nil || !strings.Contains(out, "100 %") {
		t.Fatalf("gpu cp down: %v %s", err, out)
	}
	if b, _ := os.ReadFile(back); string(b) != "copied by gpu cp\n" {
		t.Errorf("gpu cp round trip = %q", b)
	}
	if out, err := run("volumes", "ls", fmt.Sprint(v.ID), "docs"); err != nil || !strings.Contains(out, "notes.txt") {
		t.Errorf("gpu volumes ls: %v %s", err, out)
	}
	if out, err := run("cp", local, fmt.Sprintf("vol:%d:../escape.txt", v.ID)); err == nil || !strings.Contains(out, "400") {
		t.Errorf("gpu cp out of the volume: %v %s", err, out)
	}
}
