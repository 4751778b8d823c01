package agent

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// DockerRuntime runs each workload in a container with its GPUs passed by
// UUID (--gpus "device=UUID,…"), the same environment as the exec runtime,
// and the checkpoint directory mounted at the same path. It needs a Docker
// engine with the NVIDIA container toolkit.
type DockerRuntime struct {
	Image string
}

func (d DockerRuntime) Name() string { return "docker" }

// DockerArgs builds the `docker run` argv for a workload.
func DockerArgs(image string, spec Spec) []string {
	args := []string{"run", "--detach", "--init",
		"--name", fmt.Sprintf("gpuportal-%d", spec.InstanceID),
		"--label", fmt.Sprintf("gpuportal.instance=%d", spec.InstanceID),
		"--gpus", `"device=` + strings.Join(spec.GPUs, ",") + `"`,
		"--network", "host", // the metadata endpoint listens on the node's loopback
		"--volume", spec.CheckpointDir + ":" + spec.CheckpointDir,
		"--workdir", spec.CheckpointDir,
	}
	for _, kv := range spec.Env {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=") {
			continue // the image's own
		}
		args = append(args, "--env", kv)
	}
	return append(args, image, "/bin/sh", "-c", spec.Command)
}

func (d DockerRuntime) Start(spec Spec) (Process, error) {
	image := d.Image
	if spec.Image != "" {
		image = spec.Image // the catalog image the customer chose
	}
	out, err := exec.Command("docker", DockerArgs(image, spec)...).Output()
	if err != nil {
		return nil, fmt.Errorf("docker run: %w", err)
	}
	return newContainer(strings.TrimSpace(string(out))), nil
}

func (d DockerRuntime) Adopt(id string, _ uint64) (Process, bool) {
	out, err := exec.Command("docker", "inspect", "--format", "{{.State.Running}}", id).Output()
	if err != nil || strings.TrimSpace(string(out)) != "true" {
		return nil, false
	}
	return newContainer(id), true
}

type container struct {
	id   string
	done chan struct{}
	code *int
}

func newContainer(id string) *container {
	c := &container{id: id, done: make(chan struct{})}
	go func() {
		out, err := exec.Command("docker", "wait", id).Output()
		if err == nil {
			if code, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
				c.code = &code
			}
		}
		_ = exec.Command("docker", "rm", id).Run()
		close(c.done)
	}()
	return c
}

func (c *container) ID() string { return c.id }

func (c *container) Signal(sig syscall.Signal) error {
	name := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGKILL: "KILL"}[sig]
	if name == "" {
		name = strconv.Itoa(int(sig))
	}
	return exec.Command("docker", "kill", "--signal", name, c.id).Run()
}

func (c *container) Wait() *int {
	<-c.done
	return c.code
}

// Belongs: a container's processes are in its cgroup, named after its id.
func (c *container) Belongs(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && strings.Contains(string(raw), c.id)
}
