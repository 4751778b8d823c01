// Package e2e runs real agent processes (go-nvml mocks) against a real
// portal over HTTP: enrollment, liveness, preemption on the node, and the
// auto-restart of a spot workload from its checkpoint.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/agent"
	"gpuportal/internal/browsertest"
	"gpuportal/scheduler"
	"gpuportal/sessions"
	"gpuportal/store"
	"gpuportal/store/storetest"
	"gpuportal/web"
)

var agentBin, imdsWorkloadBin, sftpHelperBin, agentListBin string

// e2eParallel is how many of these tests run at once (unless -parallel
// says otherwise): they spend most of their time waiting on real agents,
// notices and workloads, not on the CPU, and one after another they took
// over ten minutes.
const e2eParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(e2eParallel))
	}
	dir, err := os.MkdirTemp("", "gpuportal-e2e")
	if err != nil {
		panic(err)
	}
	agentBin = build(dir, "gpuportal/cmd/agent", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	// A static workload that uses the stock AWS SDK for Go v2 IMDS client.
	imdsWorkloadBin = build(dir, "gpuportal/e2e/imdsworkload", "CGO_ENABLED=0")
	// A static `ssh-add -l` for inside the busybox image (ssh -A).
	agentListBin = build(dir, "gpuportal/e2e/agentlist", "CGO_ENABLED=0")
	// The agents' static SFTP helper (for sftp and scp sessions).
	sftpHelperBin = build(dir, "gpuportal/cmd/gpuportal-sftp", "CGO_ENABLED=0")
	code := m.Run()
	browsertest.Close()
	killLeftoverWorkloads(agentBin)
	os.RemoveAll(dir)
	os.Exit(code)
}

// killLeftoverWorkloads ends the workloads the tests' agents left running.
// An agent's workloads outlive it on purpose (a restarted agent takes them
// up again), so a test that ends its agent leaves them behind: three
// `sleep 3600` workloads were still running after a suite. Each is the
// init of a PID namespace of its own, which ends with it.
func killLeftoverWorkloads(agentBin string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[0] == agentBin && args[1] == agent.WorkloadInitArg {
			syscall.Kill(-pid, syscall.SIGKILL) // its process group
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// build compiles pkg into dir (with env added) and returns the binary's
// path; the run stops if it does not build.
func build(dir, pkg, env string) string {
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), env)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
		os.Exit(1)
	}
	return bin
}

// portal is a real portal (web server + scheduler) on a real SQLite file,
// over real HTTP.
type portal struct {
	t     testing.TB
	url   string
	ssh   string // the SSH gateway's host:port
	db    *store.DB
	clock *gpuportal.ManualClock // nil: real time
	admin string                 // an admin's API token
	user  string                 // a customer's API token
}

func startPortal(t *testing.T, testClock bool) *portal { return startPortalTB(t, testClock) }

func startPortalB(b *testing.B) *portal { return startPortalTB(b, false) }

func startPortalTB(t testing.TB, testClock bool) *portal {
	t.Helper()
	db, manual := storetest.Open(t)
	var clock gpuportal.Clock = gpuportal.RealClock{}
	if testClock {
		manual.Set(time.Date(2026, 12, 1, 1, 30, 0, 0, time.UTC)) // 09:30 in Shanghai
		clock = manual
	} else {
		manual = nil
		db.Clock = clock
	}
	// The portal's log is kept (echoed with E2E_VERBOSE) and its gist
	// printed when the test fails: a failure on a busy CI machine is
	// often explained by a warning (a node taken offline, a tick failed).
	portalLog := &processLog{}
	log := slog.New(slog.NewTextHandler(portalLog, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("portal log (warnings, then the last lines):\n%s", portalLog.gist())
		}
	})
	sched := scheduler.New(db, clock, gpuportal.RealClock{}, log)
	// These portals never restart: node-failure tests need not wait out
	// the grace a restarted portal gives its nodes (see restart_test.go).
	sched.LivenessGrace = 0
	ctx, cancel := context.WithCancel(context.Background())
	hub := sessions.NewHub(db, "", log)
	gateway, err := sessions.NewGateway(ctx, hub, db, log)
	if err != nil {
		t.Fatal(err)
	}
	sshListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gateway.Serve(sshListener) }()
	sshAddr := sshListener.Addr().(*net.TCPAddr)
	s, err := web.New(ctx, web.Config{DB: db, Logger: log, Clock: clock, TestClock: manual, Location: storetest.Shanghai, Scheduler: sched,
		Hub: hub, SSH: web.SSHEndpoint{Host: "127.0.0.1", Port: sshAddr.Port, Fingerprint: gateway.Fingerprint}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	done := make(chan struct{})
	go func() { sched.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = gateway.Close(); hub.Close(); srv.Close() })
	p := &portal{t: t, url: srv.URL, ssh: sshAddr.String(), db: db, clock: manual}
	p.admin = p.token(storetest.MustCreateUser(t, db, "admin@example.com", gpuportal.RoleAdmin))
	p.user = p.token(storetest.MustCreateUser(t, db, "alice@example.com", gpuportal.RoleCustomer))
	// Short notices so the test does not wait two minutes.
	pol := gpuportal.DefaultPolicies()
	pol.Global.SpotNoticeSeconds, pol.Global.SpotGraceSeconds = 10, 5
	if err := db.SetPolicies(context.Background(), &gpuportal.User{ID: 1, Role: gpuportal.RoleAdmin}, pol); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *portal) token(u *gpuportal.User) string {
	_, secret, err := p.db.CreateAPIToken(context.Background(), u.ID, "e2e")
	if err != nil {
		p.t.Fatal(err)
	}
	return secret
}

// api calls the JSON API and decodes the answer into out (if not nil).
func (p *portal) api(method, path, token, body string, out any) int {
	p.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, p.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			p.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	if resp.StatusCode >= 400 && out == nil {
		p.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

func (p *portal) nodes() []gpuportal.Node {
	var nodes []gpuportal.Node
	p.api("GET", "/api/v1/admin/nodes", p.admin, "", &nodes)
	return nodes
}

func (p *portal) instance(id int64) gpuportal.Instance {
	var i gpuportal.Instance
	if st := p.api("GET", fmt.Sprintf("/api/v1/instances/%d", id), p.user, "", &i); st != 200 {
		p.t.Fatalf("GET instance %d = %d", id, st)
	}
	return i
}

// busyFactor stretches every wait of eventually: the deadlines are what
// an idle machine needs, and the suite must pass on a busy one too (it
// returns as soon as the condition holds, so only a failure takes longer).
const busyFactor = 3

// eventually polls cond for up to d (times busyFactor).
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d *= busyFactor
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

// agentProc is a real agent process.
type agentProc struct {
	cmd     *exec.Cmd
	nodeID  string
	log     processLog
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // its exit, once exited is closed
}

var readyLine = regexp.MustCompile(`agent ready node=(\S+) gpus=(\d+)`)

// testHeartbeat is the agents' heartbeat in these tests. The portal takes
// a node offline after three missed heartbeats; at 1 s a CI machine busy
// with other packages' race-detector runs sometimes stalled a healthy
// agent that long, and the test saw a node failure it did not stage.
// (Desired state still reaches an agent at once: a heartbeat is a long
// poll that returns when something changes.)
const testHeartbeat = "2s"

// startAgent runs the agent binary with a simulated DGX and waits for its
// "agent ready" line.
func (p *portal) startAgent(t *testing.T, stateDir, checkpoints, backend string, enroll bool) *agentProc {
	t.Helper()
	return p.runAgent(t, stateDir, checkpoints, backend, enroll, testHeartbeat, "")
}

// startAgentArgs enrols an agent with a given heartbeat and metrics address.
func (p *portal) startAgentArgs(t testing.TB, stateDir, checkpoints, backend, heartbeat, metrics string) *agentProc {
	return p.runAgent(t, stateDir, checkpoints, backend, true, heartbeat, metrics)
}

func (p *portal) runAgent(t testing.TB, stateDir, checkpoints, backend string, enroll bool, heartbeat, metrics string) *agentProc {
	t.Helper()
	token := ""
	if enroll {
		var out struct{ Token string }
		if st := p.api("POST", "/api/v1/admin/enrollment-tokens", p.admin, `{"region":"cd-1"}`, &out); st != 201 {
			t.Fatalf("enrollment token: %d", st)
		}
		token = out.Token
	}
	return startAgentProc(t, p.url, token, stateDir, checkpoints, backend, heartbeat, metrics)
}

// startAgentProc runs the agent binary against a portal (enrolling with
// enrollToken unless it is empty) and waits for its "agent ready" line.
func startAgentProc(t testing.TB, portalURL, enrollToken, stateDir, checkpoints, backend, heartbeat, metrics string) *agentProc {
	t.Helper()
	return startAgentProcArgs(t, portalURL, enrollToken, stateDir, checkpoints, backend, heartbeat, metrics)
}

// startAgentProcArgs is startAgentProc with more agent flags.
func startAgentProcArgs(t testing.TB, portalURL, enrollToken, stateDir, checkpoints, backend, heartbeat, metrics string, extra ...string) *agentProc {
	t.Helper()
	args := []string{"--portal", portalURL, "--state-dir", stateDir, "--checkpoint-root", checkpoints, "--region", "cd-1",
		"--nvml", backend, "--heartbeat", heartbeat, "--hostname", filepath.Base(stateDir),
		// exec unless the test asks for a container runtime (a later flag wins).
		"--runtime", "exec", "--exec-allow-root", "--sftp-helper", sftpHelperBin}
	if metrics != "" {
		args = append(args, "--metrics-addr", metrics)
	}
	if enrollToken != "" {
		args = append(args, "--enroll-token", enrollToken)
	}
	args = append(args, extra...)
	a := &agentProc{cmd: exec.Command(agentBin, args...), exited: make(chan struct{})}
	stdout, _ := a.cmd.StdoutPipe()
	a.cmd.Stderr = &a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Reading stdout to its end before Wait, as os/exec asks.
	stdoutDone := make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		defer close(stdoutDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m[1]
			}
		}
	}()
	go func() {
		<-stdoutDone
		a.waitErr = a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		a.kill()
		if t.Failed() {
			t.Logf("agent %s log (warnings, then the last lines):\n%s", filepath.Base(stateDir), a.log.gist())
		}
	})
	select {
	case a.nodeID = <-ready:
	case <-time.After(20 * time.Second):
		t.Fatalf("agent did not get ready:\n%s", a.output())
	}
	return a
}

// processLog collects a child process's output (echoed with E2E_VERBOSE).
type processLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *processLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if os.Getenv("E2E_VERBOSE") != "" {
		os.Stderr.Write(b)
	}
	return l.b.Write(b)
}

func (l *processLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gist is what explains a failure without the whole log: every warning
// and error line (the first 50), then the last 30 lines.
func (l *processLog) gist() string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	var warnings []string
	for _, line := range lines {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			warnings = append(warnings, line)
		}
	}
	warnings = warnings[:min(len(warnings), 50)]
	last := lines[max(0, len(lines)-30):]
	return strings.Join(warnings, "\n") + "\n…\n" + strings.Join(last, "\n")
}

func (a *agentProc) output() string { return a.log.String() }

func (a *agentProc) kill() {
	select {
	case <-a.exited:
	default:
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
		<-a.exited
	}
}

// waitExit waits up to d for the agent to exit on its own.
func (a *agentProc) waitExit(d time.Duration) (exited bool, err error) {
	select {
	case <-a.exited:
		return true, a.waitErr
	case <-time.After(d):
		return false, nil
	}
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
