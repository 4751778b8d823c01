package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"gpuportal"
	"gpuportal/store/storetest"
)

// sessionBench is a portal, an exec agent (simulated DGX A100) and one
// running instance per customer, each customer with a key.
type sessionBench struct {
	p       *portal
	tokens  []string
	clients []*sshClient
	insts   []gpuportal.Instance
}

func startSessionBench(b *testing.B, customers int) *sessionBench {
	return startSessionBenchOn(b, customers, false)
}

// startSessionBenchOn runs the instances in containers (podman, the
// agent's defaults: root in a user namespace on a disk of its own) when
// containers is set, else with the exec runtime.
func startSessionBenchOn(b *testing.B, customers int, containers bool) *sessionBench {
	b.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		b.Skip("needs OpenSSH's client (apt-get install -y openssh-client)")
	}
	sb := &sessionBench{p: startPortalB(b)}
	launch := `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"sleep 36000"}`
	if containers {
		needPodman(b)
		addTestImage(b, sb.p)
		dir := b.TempDir()
		startPodmanAgent(b, sb.p, filepath.Join(dir, "node"), filepath.Join(dir, "ckpt"))
		launch = `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"sleep 36000","image":"e2e-busybox"}`
	} else {
		sb.p.runAgent(b, b.TempDir(), b.TempDir(), "mock:dgxa100", true, "1s", "")
	}
	for k := range customers {
		token := sb.p.user
		if k > 0 {
			token = sb.p.token(storetest.MustCreateUser(b, sb.p.db, fmt.Sprintf("c%d@example.com", k), gpuportal.RoleCustomer))
		}
		var inst gpuportal.Instance
		if st := sb.p.api("POST", "/api/v1/instances", token, launch, &inst); st != 201 {
			b.Fatalf("launch = %d", st)
		}
		sb.tokens = append(sb.tokens, token)
		sb.clients = append(sb.clients, sb.p.addKeyOf(b, token))
		sb.insts = append(sb.insts, inst)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, inst := range sb.insts {
		for {
			got, err := sb.p.db.Instance(context.Background(), nil, inst.ID)
			if err != nil {
				b.Fatal(err)
			}
			if got.Status == gpuportal.InstanceRunning {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("instances did not start")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return sb
}

// BenchmarkSessions prints DESIGN §7's session figures through the real
// gateway, a real agent and the real OpenSSH client: `ssh … true` round
// trip (median), scp throughput, 100 sessions open at once on one portal,
// and the web terminal's keystroke echo (99th percentile).
func BenchmarkSessions(b *testing.B) {
	b.Run("ssh_true", func(b *testing.B) {
		sb := startSessionBench(b, 1)
		c, id := sb.clients[0], sb.insts[0].ID
		var took []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if out, code := c.ssh("", c.target(id), "true"); code != 0 {
				b.Fatalf("ssh true: %d %s", code, out)
			}
			took = append(took, time.Since(t0))
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50_ms")
	})
	for _, run := range []struct {
		name       string
		containers bool
	}{{"scp_1GiB", false}, {"scp_1GiB_podman", true}} {
		b.Run(run.name, func(b *testing.B) { benchSCP(b, run.containers) })
	}
	b.Run("open_100", func(b *testing.B) {
		sb := startSessionBench(b, 5) // 20 sessions per customer at most
		for b.Loop() {
			var wg sync.WaitGroup
			ready := make(chan time.Duration, 100)
			var cmds []*exec.Cmd
			var mu sync.Mutex
			t0 := time.Now()
			for k := range 100 {
				c, id := sb.clients[k%5], sb.insts[k%5].ID
				cmd := exec.Command("ssh", append(append([]string{"-p", c.port}, c.opts()...), c.target(id), "echo ready; cat")...)
				_, _ = cmd.StdinPipe() // held open: cat waits on it
				stdout, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				mu.Lock()
				cmds = append(cmds, cmd)
				mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					line, _ := bufio.NewReader(stdout).ReadString('\n')
					if strings.TrimSpace(line) == "ready" {
						ready <- time.Since(t0)
					}
				}()
			}
			wg.Wait()
			close(ready)
			var all []time.Duration
			for d := range ready {
				all = append(all, d)
			}
			if len(all) != 100 {
				b.Fatalf("%d of 100 sessions opened", len(all))
			}
			listed := 0
			for _, inst := range sb.insts {
				open, err := sb.p.db.OpenSessions(context.Background(), inst.ID)
				if err != nil {
					b.Fatal(err)
				}
				listed += len(open)
			}
			if listed != 100 {
				b.Fatalf("%d sessions listed open, want 100", listed)
			}
			slices.Sort(all)
			b.ReportMetric(all[len(all)-1].Seconds(), "all_open_s")
			b.ReportMetric(float64(len(all)), "sessions")
			for _, cmd := range cmds {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
	})
	b.Run("terminal_echo", func(b *testing.B) {
		sb := startSessionBench(b, 1)
		id := sb.insts[0].ID
		ctx := context.Background()
		ws, _, err := websocket.Dial(ctx, strings.Replace(sb.p.url, "http", "ws", 1)+fmt.Sprintf("/instances/%d/terminal/ws?cols=80&rows=24", id),
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + sb.p.user}}})
		if err != nil {
			b.Fatal(err)
		}
		defer ws.CloseNow()
		var screen strings.Builder
		readUntil := func(want string) {
			for !strings.Contains(screen.String(), want) {
				typ, msg, err := ws.Read(ctx)
				if err != nil {
					b.Fatalf("terminal: %v after %q", err, screen.String())
				}
				if typ == websocket.MessageBinary {
					screen.Write(msg)
				}
			}
		}
		// cat echoes nothing itself: what comes back is the pty's echo.
		_ = ws.Write(ctx, websocket.MessageBinary, []byte("stty -icanon; cat\r"))
		readUntil("cat\r\n")
		var took []time.Duration
		for b.Loop() {
			screen.Reset()
			t0 := time.Now()
			_ = ws.Write(ctx, websocket.MessageBinary, []byte("x"))
			readUntil("x")
			took = append(took, time.Since(t0))
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "echo_p99_ms")
	})
}

// benchSCP copies 1 GiB into an instance with the real scp.
func benchSCP(b *testing.B, containers bool) {
	// The file first (1 GiB of a random MiB over and over: ssh does
	// not compress), before the portal and its node run: writing it
	// would stall their database.
	local := filepath.Join(b.TempDir(), "data.bin")
	const size = 1 << 30
	block := make([]byte, 1<<20)
	_, _ = rand.Read(block)
	f, err := os.Create(local)
	if err != nil {
		b.Fatal(err)
	}
	for range size / len(block) {
		if _, err := f.Write(block); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	sb := startSessionBenchOn(b, 1, containers)
	c, id := sb.clients[0], sb.insts[0].ID
	// Into /dev/null: the throughput of the session path, not of a
	// disk (a 1 GiB checkpoint would also meet the node's disk guard).
	b.SetBytes(size)
	for b.Loop() {
		scp := exec.Command("scp", append(append([]string{"-P", c.port}, c.opts()...), local, c.target(id)+":/dev/null")...)
		if out, err := scp.CombinedOutput(); err != nil {
			b.Fatalf("scp: %v %s", err, out)
		}
	}
}
