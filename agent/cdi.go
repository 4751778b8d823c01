package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// WriteMockCDISpec gives simulated GPUs what `nvidia-ctk cdi generate`
// gives real ones: a CDI spec in specDir naming each GPU by UUID
// (kind=UUID), each with a device node that appears in the container as
// /dev/nvidia<index>. The nodes are character devices like /dev/null,
// made under the state dir, so the whole path from the portal's GPU
// assignment to the device a workload sees is exercised without a GPU.
// They are bind-mounted (CDI mounts), as a runtime does for every device
// of a container in a user namespace, where it cannot make device nodes:
// a real GPU's deviceNodes entry has its node at the same path on the
// host, a simulated one does not. It returns the spec's path.
func WriteMockCDISpec(specDir, stateDir, kind string, devices []Device) (string, error) {
	devDir := filepath.Join(stateDir, "mock-dev")
	if err := os.MkdirAll(devDir, 0o700); err != nil {
		return "", err
	}
	type mount struct {
		HostPath      string   `json:"hostPath"`
		ContainerPath string   `json:"containerPath"`
		Options       []string `json:"options"`
	}
	type device struct {
		Name           string `json:"name"`
		ContainerEdits struct {
			Mounts []mount `json:"mounts"`
		} `json:"containerEdits"`
	}
	spec := struct {
		CDIVersion     string   `json:"cdiVersion"`
		Kind           string   `json:"kind"`
		Devices        []device `json:"devices"`
		ContainerEdits struct {
			Env []string `json:"env"`
		} `json:"containerEdits"`
	}{CDIVersion: "0.5.0", Kind: kind}
	spec.ContainerEdits.Env = []string{"GPUPORTAL_SIMULATED_GPUS=1"}
	for _, d := range devices {
		node := filepath.Join(devDir, fmt.Sprintf("nvidia%d", d.Index))
		if _, err := os.Stat(node); os.IsNotExist(err) {
			if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				return "", fmt.Errorf("make the simulated GPU's device node (needs root): %w", err)
			}
		}
		dev := device{Name: d.UUID}
		dev.ContainerEdits.Mounts = []mount{{HostPath: node, ContainerPath: fmt.Sprintf("/dev/nvidia%d", d.Index), Options: []string{"bind", "rw"}}}
		spec.Devices = append(spec.Devices, dev)
	}
	raw, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(specDir, 0o755); err != nil {
		return "", err
	}
	path := MockCDISpecPath(specDir, stateDir)
	removeStaleMockSpecs(specDir, path, devices)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// MockCDISpecPath is where WriteMockCDISpec puts the spec of the node
// with stateDir: one file per node, as several simulated nodes may share
// a machine.
func MockCDISpecPath(specDir, stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join(specDir, "gpuportal-mock-"+hex.EncodeToString(sum[:6])+".json")
}

// removeStaleMockSpecs deletes other mock specs that name this node's
// GPUs (the node's state dir was moved): CDI refuses a device that two
// specs define.
func removeStaleMockSpecs(specDir, keep string, devices []Device) {
	ours := map[string]bool{}
	for _, d := range devices {
		ours[d.UUID] = true
	}
	paths, _ := filepath.Glob(filepath.Join(specDir, "gpuportal-mock-*.json"))
	for _, p := range paths {
		if p == keep {
			continue
		}
		var spec struct {
			Devices []struct {
				Name string `json:"name"`
			} `json:"devices"`
		}
		raw, err := os.ReadFile(p)
		if err != nil || json.Unmarshal(raw, &spec) != nil {
			continue
		}
		for _, d := range spec.Devices {
			if ours[d.Name] {
				_ = os.Remove(p)
				break
			}
		}
	}
}
