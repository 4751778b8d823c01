package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"gpuportal/agent"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512m": 512 << 20, "8g": 8 << 30, "8GiB": 8 << 30, "1.5g": 3 << 29, "1t": 1 << 40, "4096": 4096, "64M": 64 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "g", "-1g", "0", "8x", "1e3g", "ten"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

// Limits left to the node's size are shared out by GPU; bad ones are
// refused with the flag's name.
func TestSizeContainers(t *testing.T) {
	c := &agent.ContainerRuntime{Network: "none", PidsPerGPU: 4096}
	if err := sizeContainers(c, 8, "", ""); err != nil {
		t.Fatal(err)
	}
	if c.CPUsPerGPU <= 0 || c.MemoryPerGPU <= 0 || c.ShmPerGPU != c.MemoryPerGPU/4 || c.NoFile <= 0 {
		t.Errorf("defaults from the node's size: %+v", c)
	}
	c = &agent.ContainerRuntime{Network: "none", PidsPerGPU: 100}
	if err := sizeContainers(c, 8, "60g", "16g"); err != nil || c.MemoryPerGPU != 60<<30 || c.ShmPerGPU != 16<<30 {
		t.Errorf("explicit sizes: %+v, %v", c, err)
	}
	for _, tc := range []struct {
		c           agent.ContainerRuntime
		memory, shm string
		flag        string
	}{
		{agent.ContainerRuntime{Network: "host", PidsPerGPU: 1}, "", "", "--workload-network"},
		{agent.ContainerRuntime{Network: "none", PidsPerGPU: 1}, "lots", "", "--memory-per-gpu"},
		{agent.ContainerRuntime{Network: "none", PidsPerGPU: 1}, "1m", "", "--memory-per-gpu"},
		{agent.ContainerRuntime{Network: "none", PidsPerGPU: 1}, "1g", "big", "--shm-size"},
		{agent.ContainerRuntime{Network: "none", PidsPerGPU: 0}, "1g", "", "--pids-per-gpu"},
		{agent.ContainerRuntime{Network: "none", PidsPerGPU: 1, CPUsPerGPU: -1}, "1g", "", "--cpus-per-gpu"},
	} {
		if err := sizeContainers(&tc.c, 8, tc.memory, tc.shm); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v %q %q: %v; want an error naming %s", tc.c, tc.memory, tc.shm, err, tc.flag)
		}
	}
}

// An unknown runtime is refused before anything starts.
func TestUnknownRuntime(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"--portal", "http://127.0.0.1:1", "--state-dir", t.TempDir(), "--nvml", "mock:dgxa100", "--runtime", "lxc"},
		func(string) string { return "" }, &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "want podman, docker or exec") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := parseCIDRs(" 10.1.2.0/24, 192.168.7.9/16 ,,")
	if err != nil || len(got) != 2 || got[0].String() != "10.1.2.0/24" || got[1].String() != "192.168.0.0/16" {
		t.Fatalf("parseCIDRs = %v, %v", got, err)
	}
	for _, bad := range []string{"10.1.2.3", "fd00::/8", "10.0.0.0/33", "mirror.local"} {
		if _, err := parseCIDRs(bad); err == nil {
			t.Errorf("parseCIDRs(%q) accepted", bad)
		}
	}
}

// Allowed ranges are for bridge workloads only: without a network they
// would promise what nothing gives.
func TestEgressAllowNeedsBridge(t *testing.T) {
	err := run(context.Background(), []string{"--portal", "http://127.0.0.1:1", "--state-dir", t.TempDir(), "--nvml", "mock:dgxa100", "--workload-network", "none", "--workload-egress-allow", "10.1.0.0/16"},
		func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "only with --workload-network bridge") {
		t.Fatalf("err = %v", err)
	}
}
