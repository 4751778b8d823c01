package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpuportal"
)

func TestMetadataEndpoint(t *testing.T) {
	views := map[int64]metadataView{
		41: {instanceID: "41", lifecycle: "spot"},
		42: {instanceID: "42", lifecycle: "on-demand"},
	}
	var reports []string
	m := newMetadataServer(func(id int64) (metadataView, bool) { v, ok := views[id]; return v, ok },
		func(id int64, kind string) (int, string) {
			reports = append(reports, fmt.Sprintf("%d %s", id, kind))
			return 200, "recorded"
		})
	// One endpoint per instance, each at the root path.
	srv1 := httptest.NewServer(m.forInstance(41))
	defer srv1.Close()
	srv2 := httptest.NewServer(m.forInstance(42))
	defer srv2.Close()
	gone := httptest.NewServer(m.forInstance(43))
	defer gone.Close()
	do := func(srv *httptest.Server, method, path string, hdr map[string]string) (int, string, http.Header) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	if st, body, _ := do(srv1, "GET", "/latest/meta-data/instance-id", nil); st != 200 || body != "41" {
		t.Fatalf("instance-id = %d %q", st, body)
	}
	if st, body, _ := do(srv2, "GET", "/latest/meta-data/instance-life-cycle", nil); st != 200 || body != "on-demand" {
		t.Fatalf("life cycle = %d %q", st, body)
	}
	// No interruption yet: 404, as on EC2.
	if st, _, _ := do(srv1, "GET", "/latest/meta-data/spot/instance-action", nil); st != 404 {
		t.Fatalf("instance-action before notice = %d", st)
	}
	// IMDSv2 token: PUT with a TTL, echoed; then GETs with it work, a wrong
	// one is 401, and another instance's token is refused.
	st, tok, h := do(srv1, "PUT", "/latest/api/token", map[string]string{tokenTTLHeader: "21600"})
	if st != 200 || tok == "" || h.Get(tokenTTLHeader) != "21600" {
		t.Fatalf("token = %d %q %v", st, tok, h)
	}
	if st, _, _ := do(srv1, "PUT", "/latest/api/token", nil); st != 400 {
		t.Fatalf("token without TTL = %d", st)
	}
	if st, _, _ := do(srv1, "GET", "/latest/meta-data/instance-id", map[string]string{tokenHeader: tok}); st != 200 {
		t.Fatalf("GET with token = %d", st)
	}
	if st, _, _ := do(srv1, "GET", "/latest/meta-data/instance-id", map[string]string{tokenHeader: "bogus"}); st != 401 {
		t.Fatalf("GET with bad token = %d", st)
	}
	if st, _, _ := do(srv2, "GET", "/latest/meta-data/instance-id", map[string]string{tokenHeader: tok}); st != 401 {
		t.Fatalf("another instance's token = %d", st)
	}
	// (issue 26) The workload's own reports reach the agent, for its own
	// instance only; a bad token or a GET is refused.
	if st, _, _ := do(srv1, "PUT", "/gpuportal/checkpoint", map[string]string{tokenHeader: tok}); st != 200 {
		t.Fatalf("checkpoint report = %d", st)
	}
	if st, _, _ := do(srv1, "PUT", "/gpuportal/ready", nil); st != 200 {
		t.Fatalf("ready report = %d", st)
	}
	if st, _, _ := do(srv2, "PUT", "/gpuportal/checkpoint", map[string]string{tokenHeader: tok}); st != 401 {
		t.Fatalf("checkpoint with another instance's token = %d", st)
	}
	if st, _, _ := do(srv1, "GET", "/gpuportal/checkpoint", nil); st != 405 {
		t.Fatalf("GET checkpoint = %d", st)
	}
	if want := []string{"41 checkpoint", "41 ready"}; !slices.Equal(reports, want) {
		t.Fatalf("reports = %v; want %v", reports, want)
	}
	// (issue 22, item 19) A token request through a proxy is refused, as
	// on EC2.
	if st, _, _ := do(srv1, "PUT", "/latest/api/token", map[string]string{tokenTTLHeader: "60", "X-Forwarded-For": "10.1.2.3"}); st != 403 {
		t.Fatalf("token through a proxy = %d", st)
	}
	// A token past its TTL is refused; a forged expiry breaks the signature.
	short := newMetadataServer(m.lookup, m.report)
	at := time.Now()
	short.now = func() time.Time { return at }
	shortSrv := httptest.NewServer(short.forInstance(41))
	defer shortSrv.Close()
	_, tok1, _ := do(shortSrv, "PUT", "/latest/api/token", map[string]string{tokenTTLHeader: "1"})
	if st, _, _ := do(shortSrv, "GET", "/latest/meta-data/instance-id", map[string]string{tokenHeader: tok1}); st != 200 {
		t.Fatalf("fresh token = %d", st)
	}
	exp, sig, _ := strings.Cut(tok1, ".")
	n, _ := strconv.ParseInt(exp, 10, 64)
	if st, _, _ := do(shortSrv, "GET", "/latest/meta-data/instance-id", map[string]string{tokenHeader: strconv.FormatInt(n+3600, 10) + "." + sig}); st != 401 {
		t.Fatalf("token with a forged expiry = %d", st)
	}
	at = at.Add(2 * time.Second)
	if st, _, _ := do(shortSrv, "GET", "/latest/meta-data/instance-id", map[string]string{tokenHeader: tok1}); st != 401 {
		t.Fatalf("expired token = %d", st)
	}
	// After the notice: JSON with the deadline in UTC, seconds precision.
	views[41] = metadataView{instanceID: "41", lifecycle: "spot", deadline: time.Date(2026, 12, 1, 16, 22, 0, 500, time.FixedZone("CST", 8*3600))}
	st, body, _ := do(srv1, "GET", "/latest/meta-data/spot/instance-action", nil)
	var action map[string]string
	_ = json.Unmarshal([]byte(body), &action)
	if st != 200 || action["action"] != "terminate" || action["time"] != "2026-12-01T08:22:00Z" {
		t.Fatalf("instance-action = %d %s", st, body)
	}
	if st, body, _ := do(srv1, "GET", "/latest/meta-data/spot/termination-time", nil); st != 200 || body != "2026-12-01T08:22:00Z" {
		t.Fatalf("termination-time = %d %q", st, body)
	}
	// Each instance sees only its own answers; a finished one sees nothing.
	if st, _, _ := do(srv2, "GET", "/latest/meta-data/spot/instance-action", nil); st != 404 {
		t.Fatalf("42 sees 41's notice: %d", st)
	}
	for _, p := range []string{"/w/x/latest/meta-data/instance-id", "/meta-data/instance-id"} {
		if st, _, _ := do(srv1, "GET", p, nil); st != 404 {
			t.Errorf("GET %s = %d", p, st)
		}
	}
	if st, _, _ := do(gone, "GET", "/latest/meta-data/instance-id", nil); st != 404 {
		t.Errorf("an instance no longer on the node = %d", st)
	}
}

func TestBackoffGrowsWithJitterAndCaps(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: 2 * time.Second}
	prevMax := time.Duration(0)
	for i := 0; i < 12; i++ {
		d := b.next()
		ceiling := min(100*time.Millisecond<<i, 2*time.Second)
		if d < ceiling/2 || d > ceiling {
			t.Fatalf("attempt %d: %v outside [%v, %v]", i, d, ceiling/2, ceiling)
		}
		prevMax = max(prevMax, d)
	}
	b.reset()
	if d := b.next(); d > 100*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}

// A re-adopted process is recognised by pid and start time; a reused pid
// is not mistaken for it.
func TestExecRuntimeAdopt(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := strconv.Itoa(cmd.Process.Pid)
	ticks, ok := processStartTicks(cmd.Process.Pid)
	if !ok {
		t.Fatal("no start time")
	}
	p, ok := ExecRuntime{}.Adopt(workloadRecord{ProcessID: pid, StartTicks: ticks}, "n1")
	if !ok || !p.Belongs(cmd.Process.Pid) {
		t.Fatal("live workload not adopted")
	}
	if _, ok := (ExecRuntime{}).Adopt(workloadRecord{ProcessID: pid, StartTicks: ticks + 1}, "n1"); ok {
		t.Fatal("adopted a process with another start time")
	}
	_ = p.Signal(syscall.SIGKILL)
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	_ = cmd.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("adopted process's end not seen")
	}
}

// noGPUs is a GPU source with no devices, for tests of the agent's setup.
type noGPUs struct{}

func (noGPUs) Devices() []Device               { return nil }
func (noGPUs) Sample() []gpuportal.GPUSample   { return nil }
func (noGPUs) Processes(string) ([]int, error) { return nil, nil }
func (noGPUs) Watch(ctx context.Context)       { <-ctx.Done() }
func (noGPUs) Close() error                    { return nil }

// The state dir (node token, workload logs) is the agent's alone, also
// when it existed with looser permissions; a metadata address with a fixed
// port is refused (every instance gets a port of its own).
func TestStateDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Portal: "http://127.0.0.1:1", StateDir: dir, GPUs: noGPUs{}, Runtime: ExecRuntime{}}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode %v, %v", fi.Mode().Perm(), err)
	}
	if _, err := New(Config{Portal: "http://127.0.0.1:1", StateDir: dir, GPUs: noGPUs{}, Runtime: ExecRuntime{}, MetadataAddr: "127.0.0.1:8169"}); err == nil {
		t.Fatal("a fixed metadata port was accepted")
	}
}

// A workload's start and end are the agent clock's times (the node's real
// time in production; a manual clock here).
func TestWorkloadTimesComeFromTheAgentClock(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := gpuportal.NewManualClock(at)
	a, err := New(Config{Portal: "http://127.0.0.1:1", StateDir: t.TempDir(), GPUs: noGPUs{}, Runtime: ExecRuntime{}, Clock: clock,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	a.reconcile(gpuportal.AgentDesired{Revision: 1, Workloads: []gpuportal.DesiredWorkload{{InstanceID: 7, Attempt: 1, Lifecycle: gpuportal.LifecycleOnDemand,
		Command: "exit 0", CheckpointKey: "instance-7"}}})
	var st []gpuportal.WorkloadStatus
	for range 200 {
		a.mu.Lock()
		st = a.statusesLocked()
		a.mu.Unlock()
		if len(st) == 1 && st[0].State == gpuportal.WorkloadExited {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(st) != 1 || st[0].State != gpuportal.WorkloadExited {
		t.Fatalf("statuses %+v, want the workload exited", st)
	}
	if !st[0].StartedAt.Equal(at) || !st[0].EndedAt.Equal(at) {
		t.Fatalf("started %s, ended %s; want the agent clock's %s", st[0].StartedAt, st[0].EndedAt, at)
	}
}
