package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gpuportal"
	"gpuportal/agent"
	"gpuportal/store"
)

// Demo logins, printed at start with --demo. They are well known on
// purpose: --demo is for trying the portal out, never for production.
// Each customer starts with a balance; Carol's is small, so that running
// out can be seen.
var demoAccounts = []struct {
	role, email, password, name string
	balance                     gpuportal.Fen
}{
	{gpuportal.RoleAdmin, "admin@gpuportal.demo", "demo-admin-pass", "Demo Admin", 0},
	{gpuportal.RoleCustomer, "alice@gpuportal.demo", "demo-alice-pass", "Alice Chen", 300_000_00},
	{gpuportal.RoleCustomer, "bob@gpuportal.demo", "demo-bob-pass", "Bob Li", 300_000_00},
	{gpuportal.RoleCustomer, "carol@gpuportal.demo", "demo-carol-pass", "Carol Wang", 5_00},
}

// demoNodes is the demo region's fleet: 4 × DGX A100 and 2 × DGX H100 in
// cd-1, each a real agent process with a simulated (go-nvml mock) DGX.
var demoNodes = []struct {
	prefix, backend string
	count           int
}{
	{"dgx-a100", "mock:dgxa100", 4},
	{"dgx-h100", "mock:dgxh100", 2},
}

// defaultAgentBinary finds the agent next to the portal's executable
// (bin/agent beside bin/portal), else on the PATH.
func defaultAgentBinary() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "agent")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("gpuportal-agent"); err == nil {
		return p
	}
	return ""
}

// startDemoAgents runs one agent process per demo node (enrolling each the
// first time), waits until their GPUs are in the fleet, and books a few
// upcoming reservations for Bob on a new demo so the calendar has texture.
func startDemoAgents(ctx context.Context, db *store.DB, portalURL, agentBin, dir string, log *slog.Logger) (func(), error) {
	if _, err := os.Stat(agentBin); err != nil {
		return nil, fmt.Errorf("agent binary %q: %w (run `make build`)", agentBin, err)
	}
	fresh, err := db.NodeCount(ctx)
	if err != nil {
		return nil, err
	}
	runtimeArgs := demoRuntime(ctx, db, log)
	var procs []*exec.Cmd
	stop := func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}
	for _, spec := range demoNodes {
		for i := 1; i <= spec.count; i++ {
			name := fmt.Sprintf("%s-%d", spec.prefix, i)
			state := filepath.Join(dir, name)
			args := []string{"--portal", portalURL, "--state-dir", state, "--checkpoint-root", filepath.Join(dir, "checkpoints"),
				"--volume-root", filepath.Join(dir, "volumes"), "--image-root", filepath.Join(dir, "images"), "--region", "cd-1", "--nvml", spec.backend, "--hostname", name + ".cd-1.demo"}
			args = append(args, runtimeArgs...)
			if _, err := os.Stat(filepath.Join(state, "node.json")); err != nil {
				tok, err := db.CreateEnrollmentToken(ctx, nil, "cd-1")
				if err != nil {
					stop()
					return nil, err
				}
				args = append(args, "--enroll-token", tok)
			}
			cmd := exec.Command(agentBin, args...)
			logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					stop()
					return nil, err
				}
				if logf, err = os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
					stop()
					return nil, err
				}
			}
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Start(); err != nil {
				stop()
				return nil, err
			}
			logf.Close()
			procs = append(procs, cmd)
		}
	}
	// Wait for the fleet to be there (48 GPUs), then seed bookings once —
	// beside the server, which the agents need to enrol (it starts
	// serving once this returns): six podman agents starting at once on a
	// small machine take a while, up to a minute.
	go func() {
		for range 600 {
			if ctx.Err() != nil {
				return
			}
			a, _ := db.HealthyGPUs(ctx, "a100-80g", "cd-1")
			h, _ := db.HealthyGPUs(ctx, "h100-80g", "cd-1")
			if a >= 32 && h >= 16 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		log.Info("demo fleet running", "agents", len(procs), "logs", dir)
		if fresh != 0 {
			return
		}
		var customers []*gpuportal.User
		for _, email := range []string{"alice@gpuportal.demo", "bob@gpuportal.demo"} {
			if u, err := db.UserByEmail(ctx, email); err == nil {
				customers = append(customers, u)
			}
		}
		if err := db.SeedDemoHistory(ctx, customers, db.Clock.Now()); err != nil {
			log.Warn("demo history", "err", err)
		}
		if bob, err := db.UserByEmail(ctx, "bob@gpuportal.demo"); err == nil {
			if err := seedDemoBookings(ctx, db, bob); err != nil {
				log.Warn("demo bookings", "err", err)
			}
		}
		if alice, err := db.UserByEmail(ctx, "alice@gpuportal.demo"); err == nil {
			if err := seedDemoVolume(ctx, db, alice, filepath.Join(dir, "volumes")); err != nil {
				log.Warn("demo volume", "err", err)
			}
		}
	}()
	return stop, nil
}

// seedDemoVolume gives Alice a volume with a small dataset (written into
// the demo's shared volume root, as an upload would land) and a spot
// instance that mounts it.
func seedDemoVolume(ctx context.Context, db *store.DB, alice *gpuportal.User, root string) error {
	v, err := db.CreateVolume(ctx, alice, gpuportal.VolumeRequest{Name: "datasets", Region: "cd-1", SizeGiB: 20})
	if err != nil {
		return err
	}
	dir := filepath.Join(root, gpuportal.VolumeDirName(v.ID), "cifar-mini")
	if err := os.MkdirAll(dir, 0o775); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("image,label\n")
	for i := range 1000 {
		fmt.Fprintf(&csv, "img_%04d.png,%s\n", i, []string{"airplane", "cat", "dog", "ship", "truck"}[i%5])
	}
	for name, body := range map[string]string{
		"labels.csv": csv.String(),
		"README.txt": "A small demo dataset: 1,000 labelled image names.\nMounted at /data/datasets in Alice's instances.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o664); err != nil {
			return err
		}
	}
	_, err = db.Launch(ctx, alice, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1,
		// /data/datasets in a container; the node's directory under exec.
		Command: `d="${GPUPORTAL_VOLUMES#datasets=}"; wc -l "$d/cifar-mini/labels.csv"; while :; do sleep 3600; done`, Volumes: []gpuportal.VolumeMount{{ID: v.ID}}})
	return err
}

// The demo's own image: busybox, built on the spot (nothing is pulled).
var demoImage = gpuportal.Image{ID: "demo-busybox", Name: "Demo shell (busybox)", Reference: "localhost/gpuportal-demo:busybox",
	Description: "A small shell image the demo builds on this machine; real nodes preload the catalog's images."}

// demoRuntime picks the demo agents' runtime: podman containers where
// podman is installed, the demo runs as root and a static busybox can make
// an image; else exec, which the agents warn about (a laptop demo, where
// workloads may run as whoever runs it).
func demoRuntime(ctx context.Context, db *store.DB, log *slog.Logger) []string {
	execArgs := []string{"--runtime", "exec", "--exec-allow-root"}
	busybox, ok := agent.StaticBusybox()
	if _, err := exec.LookPath("podman"); err != nil || os.Geteuid() != 0 || !ok {
		log.Info("demo nodes run workloads with --runtime exec (containers need podman, root and a static busybox)")
		return execArgs
	}
	app, err := writeDemoApp()
	if err != nil {
		log.Warn("cannot write the demo web app; demo nodes run workloads with --runtime exec", "err", err)
		return execArgs
	}
	defer os.Remove(app)
	if err := agent.ImportBusyboxImage("podman", demoImage.Reference, busybox, map[string]string{"/usr/local/bin/demo-app": app}); err != nil {
		log.Warn("cannot build the demo image; demo nodes run workloads with --runtime exec", "err", err)
		return execArgs
	}
	if err := db.EnsureDefaultImage(ctx, demoImage); err != nil {
		log.Warn("cannot add the demo image to the catalog; demo nodes run workloads with --runtime exec", "err", err)
		return execArgs
	}
	log.Info("demo nodes run workloads in podman containers", "image", demoImage.Reference)
	return []string{"--runtime", "podman", "--default-image", demoImage.Reference}
}

// seedDemo makes sure the demo accounts exist and prints the logins.
func seedDemo(ctx context.Context, db *store.DB, out io.Writer, url string) error {
	for _, a := range demoAccounts {
		var err error
		if a.role == gpuportal.RoleAdmin {
			_, err = db.EnsureAdmin(ctx, a.email, a.password, a.name, false)
		} else {
			_, err = db.CreateUser(ctx, gpuportal.SignUp{Email: a.email, Password: a.password, Name: a.name}, a.role, "")
			if gpuportal.ErrorCode(err) == gpuportal.ECONFLICT {
				err = nil
			}
		}
		if err != nil {
			return err
		}
		u, err := db.UserByEmail(ctx, a.email)
		if err != nil {
			return err
		}
		// The demo's addresses are made up: nothing is sent to verify them.
		if err := db.SetContactsVerified(ctx, u.ID); err != nil {
			return err
		}
		if a.balance > 0 {
			// Once: a demo restarted on the same database keeps its money.
			if sum, err := db.LedgerSum(ctx, u.ID); err != nil {
				return err
			} else if sum == 0 {
				if _, err := db.Credit(ctx, nil, u.ID, gpuportal.CreditRequest{Amount: a.balance, Note: "demo balance"}); err != nil {
					return err
				}
			}
		}
	}
	fmt.Fprintf(out, "\ngpuportal demo at %s\n", url)
	for _, a := range demoAccounts {
		fmt.Fprintf(out, "  %-9s %-22s password: %s\n", a.role, a.email, a.password)
	}
	fmt.Fprintln(out)
	return nil
}

// seedDemoBookings books some of the coming days for another customer.
func seedDemoBookings(ctx context.Context, db *store.DB, u *gpuportal.User) error {
	day := db.Clock.Now().In(db.Location)
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, db.Location)
	for _, b := range []struct {
		model             string
		count, days, hour int
		hours             int
	}{
		{"a100-80g", 16, 1, 9, 10}, {"a100-80g", 8, 2, 0, 24}, {"h100-80g", 8, 1, 20, 12},
		{"a100-80g", 24, 3, 10, 6}, {"h100-80g", 16, 4, 8, 8}, {"a100-80g", 32, 5, 12, 4},
	} {
		start := day.AddDate(0, 0, b.days).Add(time.Duration(b.hour) * time.Hour)
		req := gpuportal.BookingRequest{Model: b.model, Region: "cd-1", Count: b.count, Start: start, End: start.Add(time.Duration(b.hours) * time.Hour)}
		if _, err := db.Book(ctx, u, req); err != nil {
			return fmt.Errorf("demo booking: %w", err)
		}
	}
	return nil
}

// demoAppScript is the demo image's tiny web app, to try "Open port 8888"
// in `make run`: launch `demo-app`, then open port 8888 on its page.
const demoAppScript = `#!/bin/sh
# demo-app [PORT]: a one-page web app on 127.0.0.1:PORT (default 8888)
# inside the instance, for trying the portal's "Open port" in the demo.
port="${1:-8888}"
mkdir -p /tmp/demo-app
cat > /tmp/demo-app/index.html <<PAGE
<!doctype html><meta charset="utf-8"><title>demo app · instance $GPUPORTAL_INSTANCE_ID</title>
<h1>Hello from instance $GPUPORTAL_INSTANCE_ID</h1>
<p>busybox httpd on port $port inside the container, reached through the portal's app proxy on an origin of its own.</p>
<p>GPUs: $CUDA_VISIBLE_DEVICES</p>
PAGE
echo "demo-app: serving on 127.0.0.1:$port"
exec httpd -f -p "127.0.0.1:$port" -h /tmp/demo-app
`

// writeDemoApp writes demoAppScript to a file for the image build.
func writeDemoApp() (string, error) {
	f, err := os.CreateTemp("", "gpuportal-demo-app-*")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.WriteString(demoAppScript); err != nil {
		return "", err
	}
	return f.Name(), nil
}
