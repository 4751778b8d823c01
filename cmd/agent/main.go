// Command agent runs on every GPU node: it enrols with the portal, reports
// GPU state through NVML (or go-nvml's DGX mocks), starts the workloads the
// portal assigns and carries out spot interruptions.
//
// This file is wiring only: flags and environment → components → run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	osuser "os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gpuportal/agent"
	"gpuportal/agent/nvidia"
)

func main() {
	// The agent binary is also the PID 1 of isolated exec workloads.
	if len(os.Args) > 1 && os.Args[1] == agent.WorkloadInitArg {
		os.Exit(agent.RunWorkloadInit(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "agent:", err)
		}
		os.Exit(1)
	}
}

func envOr(getenv func(string) string, key, fallback string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return fallback
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	portal := fs.String("portal", envOr(getenv, "AGENT_PORTAL", ""), "portal URL, e.g. http://127.0.0.1:8080 (env AGENT_PORTAL)")
	enroll := fs.String("enroll-token", getenv("AGENT_ENROLL_TOKEN"), "one-time enrollment token (env AGENT_ENROLL_TOKEN); needed only the first time")
	stateDir := fs.String("state-dir", envOr(getenv, "AGENT_STATE_DIR", "/var/lib/gpuportal-agent"), "node credentials, workload state and logs")
	checkpointRoot := fs.String("checkpoint-root", getenv("AGENT_CHECKPOINT_ROOT"), "where instances' checkpoint directories live (default <state-dir>/checkpoints; share it between nodes so auto-restarted instances find their checkpoints)")
	region := fs.String("region", envOr(getenv, "AGENT_REGION", ""), "the node's region, e.g. cd-1 (must match the enrollment token)")
	nvmlBackend := fs.String("nvml", "real", "GPU source: real, "+nvidia.MockDGXA100+" or "+nvidia.MockDGXH100)
	runtimeName := fs.String("runtime", "exec", "workload runtime: exec or docker")
	execUser := fs.String("exec-user", "", "with --runtime exec: the user workloads run as (name or UID[:GID]; default the agent's own)")
	execAllowRoot := fs.Bool("exec-allow-root", false, "with --runtime exec: allow workloads to run as root (a trusted single-tenant node or a laptop demo only)")
	dockerImage := fs.String("docker-image", "nvidia/cuda:12.4.1-base-ubuntu22.04", "with --runtime docker: the image workloads run in")
	metadataAddr := fs.String("metadata-addr", "127.0.0.1:0", "HOST:0 where each instance's own EC2-style metadata endpoint listens, on a port of its own (each bound address is logged)")
	heartbeat := fs.Duration("heartbeat", 10*time.Second, "heartbeat interval")
	metricsAddr := fs.String("metrics-addr", "", "listen address for Prometheus metrics (dcgm-exporter names); empty: none")
	hostname := fs.String("hostname", "", "the node's name in the portal (default: the machine's hostname)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var gpus *nvidia.Source
	var err error
	if *nvmlBackend == "real" {
		gpus, err = nvidia.OpenReal(log)
	} else {
		gpus, err = nvidia.OpenMock(*nvmlBackend, *stateDir, log)
	}
	if err != nil {
		return err
	}
	defer gpus.Close()

	var rt agent.Runtime
	switch *runtimeName {
	case "exec":
		if rt, err = execRuntime(*execUser, *execAllowRoot, log); err != nil {
			return err
		}
	case "docker":
		rt = agent.DockerRuntime{Image: *dockerImage}
	default:
		return fmt.Errorf("--runtime %q: want exec or docker", *runtimeName)
	}
	a, err := agent.New(agent.Config{
		Portal: *portal, EnrollToken: *enroll, StateDir: *stateDir, CheckpointRoot: *checkpointRoot,
		Region: *region, Hostname: *hostname, Heartbeat: *heartbeat, MetadataAddr: *metadataAddr,
		MetricsAddr: *metricsAddr, GPUs: gpus, Runtime: rt, Log: log, Out: stdout,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// execRuntime sets up --runtime exec: as root, each workload gets its own
// PID and mount namespaces with this binary as its init, and runs as
// --exec-user; root workloads only with --exec-allow-root.
func execRuntime(user string, allowRoot bool, log *slog.Logger) (agent.Runtime, error) {
	log.Warn("runtime exec: workloads are processes of this machine, not containers — only for a trusted single-tenant node or a laptop demo")
	uid, gid := os.Geteuid(), os.Getegid()
	if user != "" {
		var err error
		if uid, gid, err = lookupUser(user); err != nil {
			return nil, fmt.Errorf("--exec-user: %w", err)
		}
	}
	if uid == 0 && !allowRoot {
		return nil, errors.New("refusing to run workloads as root: pass --exec-user (e.g. nobody), or --exec-allow-root on a trusted single-tenant node")
	}
	if os.Geteuid() != 0 {
		if uid != os.Geteuid() {
			return nil, errors.New("--exec-user needs the agent to run as root")
		}
		log.Warn("runtime exec without root: workloads share this machine's process namespace and run as the agent's user")
		return agent.ExecRuntime{}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the agent binary (the workloads' init): %w", err)
	}
	return agent.ExecRuntime{Init: self, UID: uid, GID: gid}, nil
}

// lookupUser reads a user name or UID[:GID].
func lookupUser(s string) (uid, gid int, err error) {
	idPart, gidPart, hasGID := strings.Cut(s, ":")
	if n, err := strconv.Atoi(idPart); err == nil {
		uid, gid = n, n
	} else {
		u, err := osuser.Lookup(idPart)
		if err != nil {
			return 0, 0, err
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	if hasGID {
		if gid, err = strconv.Atoi(gidPart); err != nil {
			return 0, 0, fmt.Errorf("GID %q is not a number", gidPart)
		}
	}
	if uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("%q: negative ids", s)
	}
	return uid, gid, nil
}
