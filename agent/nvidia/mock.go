package nvidia

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Mock backends: go-nvml's own DGX server mocks. They simulate 8 GPUs with
// real names and memory but no live telemetry, processes or events; the
// simulation below fills those ...Func fields so utilization, memory,
// temperature and power follow the workloads the agent runs, and XID
// events can be injected.
const (
	MockDGXA100 = "mock:dgxa100" // 8 × A100-SXM4-80GB (DGX A100 640GB)
	MockDGXH100 = "mock:dgxh100" // 8 × H100 80GB HBM3
)

// OpenMock builds a simulated DGX. With a stateDir, the GPU UUIDs are kept
// there so a restarted agent reports the same GPUs.
func OpenMock(backend, stateDir string, log *slog.Logger) (*Source, error) {
	var srv *server.Server
	switch backend {
	case MockDGXA100:
		// The catalog rents 80 GB A100s; dgxa100.New() is the 40 GB board.
		srv = dgxa100.NewWithGPUs(gpus.Multiple(8, gpus.A100_SXM4_80GB)...)
	case MockDGXH100:
		srv = dgxh100.New()
	default:
		return nil, fmt.Errorf("unknown NVML backend %q (want real, %s or %s)", backend, MockDGXA100, MockDGXH100)
	}
	if stateDir != "" {
		if err := stableUUIDs(srv, filepath.Join(stateDir, "mock-gpus.json")); err != nil {
			return nil, err
		}
	}
	return Simulate(srv, log)
}

// Simulate wraps a go-nvml mock server (dgxa100.New(), dgxh100.New()…) in
// a Source with simulated telemetry.
func Simulate(srv *server.Server, log *slog.Logger) (*Source, error) {
	sim := newSimulation(srv)
	s, err := newSource(srv, log)
	if err != nil {
		return nil, err
	}
	s.sim = sim
	return s, nil
}

// stableUUIDs gives the mock's devices the UUIDs saved in path, or saves
// the ones it has.
func stableUUIDs(srv *server.Server, path string) error {
	var saved []string
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &saved); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if len(saved) == len(srv.Devices) {
		for i, d := range srv.Devices {
			d.(*server.Device).UUID = saved[i]
		}
		return nil
	}
	saved = saved[:0]
	for _, d := range srv.Devices {
		saved = append(saved, d.(*server.Device).UUID)
	}
	raw, _ = json.Marshal(saved)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

// simulation is the live state the mocks do not have.
type simulation struct {
	mu     sync.Mutex
	procs  map[string]map[int]bool // uuid → pids running on it
	events chan nvml.EventData
	rng    *rand.Rand
	ecc    map[string]uint64 // uuid → uncorrectable ECC errors raised
}

func newSimulation(srv *server.Server) *simulation {
	sim := &simulation{procs: map[string]map[int]bool{}, events: make(chan nvml.EventData, 64), rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		ecc: map[string]uint64{}}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(timeoutms uint32) (nvml.EventData, nvml.Return) {
				select {
				case ev := <-sim.events:
					return ev, nvml.SUCCESS
				case <-timeAfterMs(timeoutms):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	for _, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError, nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			var out []nvml.ProcessInfo
			for _, pid := range sim.alive(dev.UUID) {
				out = append(out, nvml.ProcessInfo{Pid: uint32(pid), UsedGpuMemory: dev.MemoryInfo.Total * 7 / 10})
			}
			return out, nvml.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			if sim.busy(dev.UUID) {
				return nvml.Utilization{Gpu: uint32(88 + sim.intn(12)), Memory: uint32(40 + sim.intn(20))}, nvml.SUCCESS
			}
			return nvml.Utilization{}, nvml.SUCCESS
		}
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			m := dev.MemoryInfo
			m.Used = 0
			if sim.busy(dev.UUID) {
				m.Used = m.Total * 7 / 10
			}
			m.Free = m.Total - m.Used
			return m, nvml.SUCCESS
		}
		dev.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			if sim.busy(dev.UUID) {
				return uint32(66 + sim.intn(8)), nvml.SUCCESS
			}
			return uint32(33 + sim.intn(4)), nvml.SUCCESS
		}
		dev.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) {
			if sim.busy(dev.UUID) {
				return uint32(1755 + sim.intn(225)), nvml.SUCCESS // boost under load
			}
			return 345, nvml.SUCCESS
		}
		dev.GetPowerUsageFunc = func() (uint32, nvml.Return) {
			if sim.busy(dev.UUID) {
				return uint32(330_000 + sim.intn(60_000)), nvml.SUCCESS
			}
			return uint32(58_000 + sim.intn(6_000)), nvml.SUCCESS
		}
		dev.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
			if t != nvml.MEMORY_ERROR_TYPE_UNCORRECTED {
				return 0, nvml.SUCCESS
			}
			sim.mu.Lock()
			defer sim.mu.Unlock()
			return sim.ecc[dev.UUID], nvml.SUCCESS
		}
	}
	return sim
}

func (sim *simulation) intn(n int) int {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	return sim.rng.IntN(n)
}

// alive lists the pids started on a GPU that still exist, as NVML would
// list a process until it has really gone.
func (sim *simulation) alive(uuid string) []int {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	var out []int
	for pid := range sim.procs[uuid] {
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			out = append(out, pid)
		} else {
			delete(sim.procs[uuid], pid)
		}
	}
	return out
}

func (sim *simulation) busy(uuid string) bool { return len(sim.alive(uuid)) > 0 }

// WorkloadStarted records a workload's process on its GPUs.
func (s *Source) WorkloadStarted(uuids []string, pid int) {
	if s.sim == nil {
		return
	}
	s.sim.mu.Lock()
	defer s.sim.mu.Unlock()
	for _, u := range uuids {
		if s.sim.procs[u] == nil {
			s.sim.procs[u] = map[int]bool{}
		}
		s.sim.procs[u][pid] = true
	}
}

// WorkloadStopped is a no-op: a process leaves the simulated GPU when it
// really exits, so the agent's "nothing left on the GPU" check means what
// it says.
func (s *Source) WorkloadStopped([]string, int) {}

// InjectXID simulates an XID error on a GPU (tests and demos).
func (s *Source) InjectXID(uuid string, xid uint64) error {
	if s.sim == nil {
		return errors.New("XIDs can only be injected into a simulated GPU")
	}
	for i, d := range s.devices {
		if s.info[i].UUID == uuid {
			s.sim.events <- nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: xid}
			return nil
		}
	}
	return fmt.Errorf("no GPU %s", uuid)
}

// mockFault is one entry of --mock-faults: a GPU (its index) raising an
// XID, or an uncorrectable ECC error.
type mockFault struct {
	GPU            int    `json:"gpu"`
	XID            uint64 `json:"xid,omitempty"`
	ECCUncorrected bool   `json:"ecc_uncorrected,omitempty"`
}

// readFaults applies FaultsFile, read again at every sample: a fault it
// lists is raised once, as an NVML event through the event set the real
// backend waits on; a GPU none of whose faults it lists any more was
// reset (repaired) and reports healthy again. No file: no faults.
func (s *Source) readFaults() {
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	var listed []mockFault
	raw, err := os.ReadFile(s.FaultsFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("--mock-faults", "err", err)
		return
	}
	if err == nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, &listed); err != nil {
			s.log.Warn("--mock-faults: not a JSON list of faults", "file", s.FaultsFile, "err", err)
			return
		}
	}
	now := map[mockFault]bool{}
	for _, f := range listed {
		if f.GPU < 0 || f.GPU >= len(s.devices) {
			s.log.Warn("--mock-faults: no such GPU", "gpu", f.GPU)
			continue
		}
		now[f] = true
		if s.raised[f] {
			continue
		}
		s.raised[f] = true
		d, uuid := s.devices[f.GPU], s.info[f.GPU].UUID
		if f.ECCUncorrected {
			s.sim.mu.Lock()
			s.sim.ecc[uuid]++
			s.sim.mu.Unlock()
			s.sim.events <- nvml.EventData{Device: d, EventType: nvml.EventTypeDoubleBitEccError}
		}
		if f.XID != 0 {
			s.sim.events <- nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: f.XID}
		}
	}
	for f := range s.raised {
		if now[f] {
			continue
		}
		delete(s.raised, f)
		still := false
		for g := range now {
			still = still || g.GPU == f.GPU
		}
		if !still {
			uuid := s.info[f.GPU].UUID
			s.sim.mu.Lock()
			s.sim.ecc[uuid] = 0
			s.sim.mu.Unlock()
			s.mu.Lock()
			delete(s.faults, uuid)
			s.mu.Unlock()
			s.log.Info("--mock-faults: the GPU's faults are gone; it was reset", "uuid", uuid)
		}
	}
}

func timeAfterMs(ms uint32) <-chan time.Time { return time.After(time.Duration(ms) * time.Millisecond) }
