package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// sshClient runs the real OpenSSH tools against the portal's gateway with
// one key.
type sshClient struct {
	t    testing.TB
	host string
	port string
	key  string
}

// needOpenSSH skips (or, in CI, fails) without OpenSSH's client tools.
func needOpenSSH(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"ssh", "scp", "sftp", "ssh-keygen"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the gateway tests need %s; .ci/run installs openssh-client", bin)
			}
			t.Skipf("skipping: the gateway tests need %s (apt-get install -y openssh-client)", bin)
		}
	}
}

// newKey makes an ed25519 key pair in dir and returns its private key's
// path and its public line.
func newKey(t testing.TB, dir, name string) (string, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name+"@e2e", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.TrimSpace(string(pub))
}

func (p *portal) sshClient(t testing.TB, key string) *sshClient {
	host, port, _ := net.SplitHostPort(p.ssh)
	return &sshClient{t: t, host: host, port: port, key: key}
}

func (c *sshClient) opts() []string {
	return []string{"-i", c.key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20"}
}

// ssh runs `ssh -p PORT <args>` and returns its output and exit status.
func (c *sshClient) ssh(stdin string, args ...string) (string, int) {
	c.t.Helper()
	cmd := exec.Command("ssh", append(append([]string{"-p", c.port}, c.opts()...), args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			c.t.Fatalf("ssh: %v", err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

func (c *sshClient) target(id int64) string { return fmt.Sprintf("%d@%s", id, c.host) }

// (issue 23) The real OpenSSH client through the gateway into a podman
// container started by a real agent: a command's output and exit status,
// a shell on a pty, a 32 MiB file copied in intact with scp and read
// back with sftp, a forwarded port reaching a web server inside; another
// customer's key, a password and a stopped instance are refused.
func TestSSHIntoAContainer(t *testing.T) {
	t.Parallel()
	needPodman(t)
	needOpenSSH(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	startPodmanAgent(t, p, t.TempDir(), t.TempDir())
	dir := t.TempDir()

	aliceKey, alicePub := newKey(t, dir, "alice")
	body, _ := json.Marshal(map[string]string{"name": "laptop", "public_key": alicePub})
	if st := p.api("POST", "/api/v1/ssh-keys", p.user, string(body), nil); st != 201 {
		t.Fatalf("add key = %d", st)
	}
	malloryKey, malloryPub := newKey(t, dir, "mallory")
	mallory := p.token(mustUser(t, p, "mallory@example.com"))
	body, _ = json.Marshal(map[string]string{"name": "mallory", "public_key": malloryPub})
	if st := p.api("POST", "/api/v1/ssh-keys", mallory, string(body), nil); st != 201 {
		t.Fatalf("add mallory's key = %d", st)
	}
	var where struct {
		Host        string `json:"host"`
		Port        int    `json:"port"`
		Fingerprint string `json:"host_key_fingerprint"`
	}
	if st := p.api("GET", "/api/v1/ssh", p.user, "", &where); st != 200 || where.Port == 0 || !strings.HasPrefix(where.Fingerprint, "SHA256:") {
		t.Fatalf("GET /ssh = %d %+v", st, where)
	}

	// A web server inside the container, on its own loopback only.
	inst := launchIn(t, p, 1, "mkdir -p /tmp/www && echo served-from-inside > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8000 -h /tmp/www", false)
	eventually(t, 60*time.Second, "instance running", func() bool {
		i := p.instance(inst.ID)
		if i.Status == gpuportal.InstanceFailed {
			t.Fatalf("instance failed: %s %s", i.Error, i.LogTail)
		}
		return i.Status == gpuportal.InstanceRunning
	})
	alice := p.sshClient(t, aliceKey)

	// A command: its output and its exit status.
	out, code := alice.ssh("", alice.target(inst.ID), "echo hello from $(hostname); id -u; exit 7")
	if code != 7 || !strings.Contains(out, fmt.Sprintf("hello from instance-%d", inst.ID)) {
		t.Fatalf("ssh command: exit %d, output %q", code, out)
	}
	// The container's user: root inside its user namespace (issue 45).
	if lines := strings.Fields(out); len(lines) < 4 || lines[len(lines)-1] != "0" {
		t.Fatalf("the session does not run as the container's root: %q", out)
	}

	// (issue 45) The client's locale comes along (SetEnv, as sshd's
	// AcceptEnv LANG LC_*); nothing that changes what runs does.
	out, code = alice.ssh("", "-o", "SetEnv=LC_ALL=zh_CN.UTF-8 LD_PRELOAD=/tmp/x.so", alice.target(inst.ID), `echo "lc=$LC_ALL preload=$LD_PRELOAD"`)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "lc=zh_CN.UTF-8 preload=") {
		t.Errorf("SetEnv: exit %d, output %q", code, out)
	}

	// (issue 45) ssh -A: the client's own agent answers inside the
	// instance (SSH_AUTH_SOCK), and only when asked for.
	agentSock := filepath.Join(dir, "agent.sock")
	sshAgent := exec.Command("ssh-agent", "-D", "-a", agentSock)
	if err := sshAgent.Start(); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	defer func() { _ = sshAgent.Process.Kill(); _ = sshAgent.Wait() }()
	eventually(t, 10*time.Second, "ssh-agent's socket", func() bool { _, err := os.Stat(agentSock); return err == nil })
	add := exec.Command("ssh-add", aliceKey)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+agentSock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, out)
	}
	withAgent := func(args ...string) string {
		cmd := exec.Command("ssh", append(append([]string{"-p", alice.port}, alice.opts()...), args...)...)
		cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+agentSock)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := withAgent("-A", alice.target(inst.ID), "agentlist"); !strings.Contains(out, "SHA256:") || !strings.Contains(out, "alice@e2e") {
		t.Errorf("ssh -A: the instance does not reach the client's agent: %q", out)
	}
	if out := withAgent(alice.target(inst.ID), "agentlist"); !strings.Contains(out, "no agent") {
		t.Errorf("without -A the instance reached an agent: %q", out)
	}

	// A shell on a pty: the banner, then what was typed.
	out, code = alice.ssh("echo $((6*7)); tty; exit\n", "-tt", alice.target(inst.ID))
	if code != 0 || !strings.Contains(out, "42") || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, fmt.Sprintf("instance %d", inst.ID)) {
		t.Fatalf("pty shell: exit %d, output %q", code, out)
	}

	// A client that goes away hangs up its shell: what it ran inside the
	// container ends with it (podman exec alone would leave it running).
	gone := exec.Command("ssh", append(append([]string{"-p", alice.port, "-tt"}, alice.opts()...), alice.target(inst.ID), "sleep 7777")...)
	gone.Stdin = strings.NewReader("")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the session's sleep inside the container", func() bool { return hostPIDWith("sleep 7777") != 0 })
	_ = gone.Process.Kill()
	_ = gone.Wait()
	eventually(t, 30*time.Second, "the hung-up session's sleep to end", func() bool { return hostPIDWith("sleep 7777") == 0 })
	// (issue 44, item 5) So does a command whose input ended at once
	// (ssh -n): before, it and its node-side podman exec outlived the
	// client, outside the container's memory limit, and its session no
	// longer counted toward the cap.
	goneN := exec.Command("ssh", append(append([]string{"-p", alice.port, "-n"}, alice.opts()...), alice.target(inst.ID), "sleep 7778")...)
	if err := goneN.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the ssh -n session's sleep inside the container", func() bool { return hostPIDWith("sleep 7778") != 0 })
	_ = goneN.Process.Kill()
	_ = goneN.Wait()
	// Its podman exec names the command too: no process of it is left.
	eventually(t, 30*time.Second, "the ssh -n session's sleep and podman exec to end", func() bool {
		return hostPIDWith("sleep 7778") == 0 && hostPIDContaining("sleep 7778") == 0
	})

	// scp a 32 MiB file in, check it inside, sftp it back out.
	big := make([]byte, 32<<20)
	_, _ = rand.Read(big)
	sum := sha256.Sum256(big)
	local := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(local, big, 0o600); err != nil {
		t.Fatal(err)
	}
	scp := exec.Command("scp", append(append([]string{"-P", alice.port}, alice.opts()...), local, alice.target(inst.ID)+":/checkpoint/big.bin")...)
	if out, err := scp.CombinedOutput(); err != nil {
		t.Fatalf("scp: %v\n%s", err, out)
	}
	out, code = alice.ssh("", alice.target(inst.ID), "sha256sum /checkpoint/big.bin")
	if code != 0 || !strings.Contains(out, hex.EncodeToString(sum[:])) {
		t.Fatalf("the copied file is not intact: exit %d, %q", code, out)
	}
	batch := filepath.Join(dir, "batch")
	back := filepath.Join(dir, "back.bin")
	_ = os.WriteFile(batch, []byte("ls /checkpoint\nget /checkpoint/big.bin "+back+"\n"), 0o600)
	sftp := exec.Command("sftp", append(append([]string{"-P", alice.port, "-b", batch}, alice.opts()...), alice.target(inst.ID))...)
	if out, err := sftp.CombinedOutput(); err != nil || !strings.Contains(string(out), "big.bin") {
		t.Fatalf("sftp: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(back); !bytes.Equal(got, big) {
		t.Fatalf("sftp brought back %d bytes, not the file", len(got))
	}

	// (issue 45) rsync over the gateway, where the image has rsync: a
	// tree up into the instance's disk and back down, intact.
	if _, err := exec.LookPath("rsync"); err == nil {
		tree := filepath.Join(dir, "tree")
		os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
		os.WriteFile(filepath.Join(tree, "a.txt"), []byte("alpha\n"), 0o644)
		os.WriteFile(filepath.Join(tree, "sub", "big.bin"), big[:4<<20], 0o600)
		rsh := strings.Join(append([]string{"ssh", "-p", alice.port}, alice.opts()...), " ")
		up := exec.Command("rsync", "-a", "-e", rsh, tree+"/", alice.target(inst.ID)+":/root/tree/")
		if out, err := up.CombinedOutput(); err != nil {
			t.Fatalf("rsync up: %v\n%s", err, out)
		}
		down := filepath.Join(dir, "tree-back")
		if out, err := exec.Command("rsync", "-a", "-e", rsh, alice.target(inst.ID)+":/root/tree/", down+"/").CombinedOutput(); err != nil {
			t.Fatalf("rsync down: %v\n%s", err, out)
		}
		if got, _ := os.ReadFile(filepath.Join(down, "sub", "big.bin")); !bytes.Equal(got, big[:4<<20]) {
			t.Errorf("rsync brought back %d bytes, not the file", len(got))
		}
		if got, _ := os.ReadFile(filepath.Join(down, "a.txt")); string(got) != "alpha\n" {
			t.Errorf("rsync brought back %q", got)
		}
	} else if os.Getenv("CI") == "true" {
		t.Error("rsync is not installed; .ci/run installs it")
	}

	// -L: a local port reaching the web server inside the container.
	_, localPortText, _ := net.SplitHostPort(freeAddr(t))
	localPort, _ := strconv.Atoi(localPortText)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fwd := exec.CommandContext(ctx, "ssh", append(append([]string{"-p", alice.port, "-N", "-o", "ExitOnForwardFailure=yes",
		"-L", fmt.Sprintf("127.0.0.1:%d:localhost:8000", localPort)}, alice.opts()...), alice.target(inst.ID))...)
	var fwdLog bytes.Buffer
	fwd.Stderr = &fwdLog
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = fwd.Wait() }()
	page := ""
	eventually(t, 30*time.Second, "the forwarded port answers", func() bool {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(localPort) + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		page = string(raw)
		return resp.StatusCode == 200
	})
	if !strings.Contains(page, "served-from-inside") {
		t.Fatalf("forwarded port answered %q (ssh: %s)", page, fwdLog.String())
	}
	// (issue 45) -L to another host (and -D, which asks the same) goes
	// from inside the instance: its egress rules hold, so the node itself
	// is out of reach, and a name that is none is refused at once.
	nodeSide, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer nodeSide.Close()
	reached := make(chan struct{}, 1)
	go func() {
		if c, err := nodeSide.Accept(); err == nil {
			c.Close()
			reached <- struct{}{}
		}
	}()
	var nodeIP string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && nodeIP == "" {
			nodeIP = n.IP.String()
		}
	}
	if nodeIP != "" {
		_, otherPortText, _ := net.SplitHostPort(freeAddr(t))
		toNode := exec.CommandContext(ctx, "ssh", append(append([]string{"-p", alice.port, "-N", "-o", "ExitOnForwardFailure=yes",
			"-L", fmt.Sprintf("127.0.0.1:%s:%s:%d", otherPortText, nodeIP, nodeSide.Addr().(*net.TCPAddr).Port)}, alice.opts()...), alice.target(inst.ID))...)
		if err := toNode.Start(); err != nil {
			t.Fatal(err)
		}
		// The forwarded connection ends at once, unanswered.
		eventually(t, 30*time.Second, "a forward to the node to be refused", func() bool {
			c, err := net.Dial("tcp", "127.0.0.1:"+otherPortText)
			if err != nil {
				return false // ssh is not listening yet
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1))
			return err != nil
		})
		select {
		case <-reached:
			t.Error("a forward through the instance reached the node")
		default:
		}
		_ = toNode.Process.Kill()
		_ = toNode.Wait()
	}

	// A connection held open through the forward is a session the
	// instance's page lists.
	held, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(localPort))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the open session listed", func() bool {
		for _, s := range p.instance(inst.ID).Sessions {
			if s.Kind == gpuportal.SessionTCP && s.Port == 8000 {
				return true
			}
		}
		return false
	})
	held.Close()

	// Refused: another customer's key, a password, then a stopped instance.
	if out, code := p.sshClient(t, malloryKey).ssh("", alice.target(inst.ID), "true"); code != 255 || !strings.Contains(out, "Permission denied") {
		t.Fatalf("another customer's key: exit %d, %q", code, out)
	}
	pw := exec.Command("ssh", "-p", alice.port, "-o", "PubkeyAuthentication=no", "-o", "PreferredAuthentications=password,keyboard-interactive",
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", alice.target(inst.ID), "true")
	if out, err := pw.CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied (publickey)") {
		t.Fatalf("password login: %v %q", err, out)
	}
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", nil); st != 200 {
		t.Fatalf("stop = %d", st)
	}
	eventually(t, 60*time.Second, "instance stopped", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	if out, code := alice.ssh("", alice.target(inst.ID), "true"); code != 255 || !strings.Contains(out, "Permission denied") {
		t.Fatalf("a stopped instance: exit %d, %q", code, out)
	}
}

func mustUser(t *testing.T, p *portal, email string) *gpuportal.User {
	return storetest.MustCreateUser(t, p.db, email, gpuportal.RoleCustomer)
}

// addKey registers a new key of the test customer and returns its client.
func (p *portal) addKey(t testing.TB) *sshClient { return p.addKeyOf(t, p.user) }

// addKeyOf registers a new key of the customer with this API token.
func (p *portal) addKeyOf(t testing.TB, token string) *sshClient {
	t.Helper()
	key, pub := newKey(t, t.TempDir(), "key")
	body, _ := json.Marshal(map[string]string{"name": "laptop", "public_key": pub})
	if st := p.api("POST", "/api/v1/ssh-keys", token, string(body), nil); st != 201 {
		t.Fatalf("add key = %d", st)
	}
	return p.sshClient(t, key)
}

// (issue 23) A booking with a launch spec ("a machine to log into"): the
// clock moves to its start, and the customer logs in over SSH without
// launching anything by hand.
func TestBookedMachineTakesSSHAtItsStart(t *testing.T) {
	t.Parallel()
	needOpenSSH(t)
	p := startPortal(t, true) // 09:30 Shanghai
	p.startAgent(t, t.TempDir(), t.TempDir(), "mock:dgxa100", true)
	alice := p.addKey(t)
	body, _ := json.Marshal(map[string]any{"model": "a100-80g", "region": "cd-1", "count": 8,
		"start": "2026-12-01T10:00:00+08:00", "end": "2026-12-01T14:00:00+08:00", "launch": map[string]string{"command": gpuportal.MachineCommand}})
	var r gpuportal.Reservation
	if st := p.api("POST", "/api/v1/reservations", p.user, string(body), &r); st != 201 {
		t.Fatalf("book = %d", st)
	}
	advance(t, p, "30m") // 10:00: it starts, and so does its machine
	var inst gpuportal.Instance
	eventually(t, 90*time.Second, "the reservation's own instance running", func() bool {
		var list []gpuportal.Instance
		p.api("GET", "/api/v1/instances", p.user, "", &list)
		for _, i := range list {
			if i.ReservationID != nil && *i.ReservationID == r.ID && i.Status == gpuportal.InstanceRunning {
				inst = i
				return true
			}
		}
		return false
	})
	if inst.Count != 8 || inst.Kind != gpuportal.KindReserved {
		t.Fatalf("the reservation launched %+v", inst)
	}
	out, code := alice.ssh("", alice.target(inst.ID), "echo $CUDA_VISIBLE_DEVICES")
	if code != 0 || strings.Count(out, "GPU-") != 8 {
		t.Fatalf("ssh into the booked machine: exit %d, %q (want its 8 GPUs)", code, out)
	}
}

// (issue 23) A spot instance's open shell gets a line when its
// interruption notice comes.
func TestOpenShellSeesTheInterruptionNotice(t *testing.T) {
	t.Parallel()
	needOpenSSH(t)
	p := startPortal(t, false)
	p.startAgent(t, t.TempDir(), t.TempDir(), "mock:dgxa100", true)
	alice := p.addKey(t)
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1,"command":"sleep 3600"}`, &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	eventually(t, 30*time.Second, "instance running", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceRunning })
	cmd := exec.Command("ssh", append(append([]string{"-p", alice.port, "-tt"}, alice.opts()...), alice.target(inst.ID))...)
	stdin, _ := cmd.StdinPipe()
	var out processLog // safe to read while ssh writes it
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	// A line typed before the shell has set its terminal up can be
	// flushed unread (on a busy machine that happened): type it until it
	// runs. Only its output says shell-is-up; the echo of what was typed
	// has the quotes.
	var typed time.Time
	eventually(t, 30*time.Second, "the shell", func() bool {
		if strings.Contains(out.String(), "shell-is-up") {
			return true
		}
		if time.Since(typed) > 3*time.Second {
			fmt.Fprintln(stdin, `echo shell-is-""up`)
			typed = time.Now()
		}
		return false
	})
	if st := p.api("POST", fmt.Sprintf("/api/v1/admin/instances/%d/interrupt", inst.ID), p.admin, "", nil); st != 200 {
		t.Fatalf("interrupt = %d", st)
	}
	eventually(t, 30*time.Second, "the notice in the open shell", func() bool { return strings.Contains(out.String(), "this instance will be interrupted") })
	// The notice runs out, the instance ends, and its session with it.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("the shell outlived its interrupted instance:\n%s", out.String())
	}
	eventually(t, 30*time.Second, "the instance interrupted", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceInterrupted })
}

// (issue 23) The whole log as a download, from the node, after the
// instance ended: every line, not the tail the instance shows.
func TestFullLogDownload(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	p.startAgent(t, t.TempDir(), t.TempDir(), "mock:dgxa100", true)
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"i=0; while [ $i -lt 50000 ]; do i=$((i+1)); echo line $i; done"}`, &inst); st != 201 {
		t.Fatalf("launch = %d", st)
	}
	eventually(t, 60*time.Second, "the workload to end", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	if tail := p.instance(inst.ID).LogTail; strings.Contains(tail, "line 1\n") {
		t.Fatalf("the tail holds the whole log already; the test proves nothing")
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/instances/%d/log", p.url, inst.ID), nil)
	req.Header.Set("Authorization", "Bearer "+p.user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Disposition"), fmt.Sprintf("instance-%d.log", inst.ID)) {
		t.Fatalf("log = %d %v", resp.StatusCode, resp.Header)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 50000 || lines[0] != "line 1" || lines[49999] != "line 50000" {
		t.Fatalf("the log has %d lines (%q … %q)", len(lines), lines[0], lines[len(lines)-1])
	}
	// Another customer's instance is not found.
	bob := p.token(storetest.MustCreateUser(t, p.db, "bob@example.com", gpuportal.RoleCustomer))
	if st := p.api("GET", fmt.Sprintf("/api/v1/instances/%d/log", inst.ID), bob, "", nil); st != 404 {
		t.Fatalf("another customer's log = %d", st)
	}
}

// hostPIDContaining is a process of the node whose command line contains
// marker anywhere (a podman exec running it, say), or 0.
func hostPIDContaining(marker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(strings.ReplaceAll(string(raw), "\x00", " "), marker) {
			return pid
		}
	}
	return 0
}
