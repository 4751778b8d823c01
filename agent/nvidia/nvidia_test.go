package nvidia

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"gpuportal"
)

func TestDevicesFromTheDGXMocks(t *testing.T) {
	for _, tt := range []struct {
		name    string
		src     func() (*Source, error)
		gpuName string
		memMiB  int
	}{
		{"dgxa100.New", func() (*Source, error) { return Simulate(dgxa100.New(), nil) }, "A100-SXM4-40GB", 40960},
		{"dgxh100.New", func() (*Source, error) { return Simulate(dgxh100.New(), nil) }, "H100 80GB HBM3", 81920},
		{MockDGXA100, func() (*Source, error) { return OpenMock(MockDGXA100, "", nil) }, "A100-SXM4-80GB", 81920},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.src()
			if err != nil {
				t.Fatal(err)
			}
			devs := s.Devices()
			if len(devs) != 8 {
				t.Fatalf("%d devices", len(devs))
			}
			seen := map[string]bool{}
			for i, d := range devs {
				if d.Index != i || !strings.Contains(d.Name, tt.gpuName) || d.MemoryTotalMiB != tt.memMiB || !strings.HasPrefix(d.UUID, "GPU-") || seen[d.UUID] {
					t.Errorf("device %d = %+v", i, d)
				}
				seen[d.UUID] = true
			}
			for _, smp := range s.Sample() {
				if !smp.Healthy || smp.UtilizationPercent != 0 || smp.MemoryUsedMiB != 0 || smp.TemperatureC < 30 || smp.PowerW < 50 || smp.MemoryFreeMiB != tt.memMiB {
					t.Errorf("idle sample = %+v", smp)
				}
			}
		})
	}
}

// Utilization, memory and the process list follow a workload's process,
// and it leaves the GPU only when it has really exited.
func TestTelemetryFollowsWorkloads(t *testing.T) {
	s, err := Simulate(dgxh100.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	gpu := s.Devices()[3].UUID
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.WorkloadStarted([]string{gpu}, cmd.Process.Pid)
	smp := s.Sample()[3]
	if smp.UtilizationPercent < 80 || smp.MemoryUsedMiB == 0 || smp.PowerW < 300 || smp.TemperatureC < 60 {
		t.Fatalf("busy sample = %+v", smp)
	}
	if idle := s.Sample()[2]; idle.UtilizationPercent != 0 {
		t.Fatalf("another GPU is busy: %+v", idle)
	}
	pids, err := s.Processes(gpu)
	if err != nil || len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Fatalf("processes = %v, %v", pids, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if pids, _ := s.Processes(gpu); len(pids) != 0 {
		t.Fatalf("processes after exit = %v", pids)
	}
	if smp := s.Sample()[3]; smp.UtilizationPercent != 0 {
		t.Fatalf("sample after exit = %+v", smp)
	}
}

// An application XID (13) leaves the GPU healthy; XID 79 (fallen off the
// bus) marks it unhealthy. Both are counted.
func TestXIDEvents(t *testing.T) {
	s, err := Simulate(dgxa100.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Watch(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	g1, g5 := s.Devices()[1].UUID, s.Devices()[5].UUID
	if err := s.InjectXID(g1, 13); err != nil {
		t.Fatal(err)
	}
	if err := s.InjectXID(g5, 79); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		smp := s.Sample()
		if smp[1].XIDErrors == 1 && smp[5].XIDErrors == 1 {
			if !smp[1].Healthy || smp[1].LastXID != 13 {
				t.Fatalf("GPU after application XID 13 = %+v", smp[1])
			}
			if smp[5].Healthy || smp[5].LastXID != 79 {
				t.Fatalf("GPU after XID 79 = %+v", smp[5])
			}
			for i, o := range smp {
				if i != 1 && i != 5 && (!o.Healthy || o.XIDErrors != 0) {
					t.Fatalf("GPU %d affected: %+v", i, o)
				}
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("XID events were not seen")
}

func TestMockUUIDsAreStableAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenMock(MockDGXH100, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenMock(MockDGXH100, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Devices() {
		if a.Devices()[i].UUID != b.Devices()[i].UUID {
			t.Fatalf("GPU %d: %s then %s", i, a.Devices()[i].UUID, b.Devices()[i].UUID)
		}
	}
	c, _ := OpenMock(MockDGXH100, filepath.Join(dir, "other"), nil)
	if c.Devices()[0].UUID == a.Devices()[0].UUID {
		t.Fatal("another node got the same UUIDs")
	}
	if _, err := OpenMock("mock:dgx-v100", dir, nil); err == nil {
		t.Fatal("unknown backend accepted")
	}
}

// Without a driver, the real backend refuses cleanly (and calls nothing
// after the failed Init).
func TestRealNVMLUnavailable(t *testing.T) {
	s, err := OpenReal(nil)
	if err == nil {
		s.Close()
		t.Skip("this machine has NVML")
	}
	if !strings.Contains(err.Error(), "NVML is not available") || !strings.Contains(err.Error(), "mock:dgxa100") {
		t.Fatalf("error = %v", err)
	}
}

// (issue 49) --mock-faults: the file's faults are raised through NVML's
// event set, as the real backend's are — XID 79 and an uncorrectable ECC
// error make their GPUs unhealthy with the reason and the time, XID 13 and
// a non-critical XID 31 do not; a GPU whose faults leave the file was
// reset and is healthy again.
func TestMockFaultsFile(t *testing.T) {
	s, err := Simulate(dgxa100.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.FaultsFile = filepath.Join(t.TempDir(), "faults.json")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Watch(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	write := func(v string) {
		if err := os.WriteFile(s.FaultsFile, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	until := func(what string, ok func([]gpuportal.GPUSample) bool) []gpuportal.GPUSample {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if smp := s.Sample(); ok(smp) {
				return smp
			}
		}
		t.Fatalf("never: %s", what)
		return nil
	}
	if smp := s.Sample(); !smp[3].Healthy { // no file yet: no faults
		t.Fatalf("before any fault: %+v", smp[3])
	}
	write(`[{"gpu":3,"xid":79},{"gpu":1,"xid":13},{"gpu":2,"xid":31},{"gpu":6,"ecc_uncorrected":true}]`)
	smp := until("GPUs 3 and 6 unhealthy", func(smp []gpuportal.GPUSample) bool {
		return !smp[3].Healthy && !smp[6].Healthy && smp[1].XIDErrors == 1 && smp[2].XIDErrors == 1
	})
	if h := smp[3].Health; h == nil || h.XID != 79 || !strings.Contains(h.Reason, "fell off the bus") || h.At == nil {
		t.Fatalf("GPU 3's health = %+v", h)
	}
	if h := smp[6].Health; h == nil || !strings.Contains(h.Reason, "ECC") || smp[6].ECCUncorrected != 1 {
		t.Fatalf("GPU 6 = %+v %+v", smp[6], h)
	}
	for _, k := range []int{1, 2} {
		if !smp[k].Healthy || smp[k].Health != nil {
			t.Fatalf("GPU %d after XID %d = %+v", k, smp[k].LastXID, smp[k])
		}
	}
	// Read again: raised once, not at every sample.
	s.Sample()
	if smp := s.Sample(); smp[3].XIDErrors != 1 {
		t.Fatalf("XID 79 raised %d times", smp[3].XIDErrors)
	}
	// GPU 3's fault leaves the file: it was reset. GPU 6's stays.
	write(`[{"gpu":6,"ecc_uncorrected":true}]`)
	smp = until("GPU 3 healthy again", func(smp []gpuportal.GPUSample) bool { return smp[3].Healthy })
	if smp[6].Healthy {
		t.Fatal("GPU 6 was healed with its fault still listed")
	}
}
