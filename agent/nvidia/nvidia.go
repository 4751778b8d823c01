// Package nvidia reads GPUs through NVML (github.com/NVIDIA/go-nvml), the
// only package of gpuportal that imports it (it needs cgo). The same code
// drives the real library and go-nvml's dgxa100/dgxh100 mocks.
package nvidia

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"gpuportal"
	"gpuportal/agent"
)

// A GPU is unhealthy after a critical XID (gpuportal.CriticalXIDs), an
// uncorrectable ECC error, or memory pages waiting to be retired or
// remapped (a reset is due); other XIDs — a program's own faults among
// them (13, 31, 43, 45) — are counted and leave it healthy.

// Source is a GPUSource over an nvml.Interface.
type Source struct {
	lib     nvml.Interface
	log     *slog.Logger
	devices []nvml.Device
	info    []agent.Device

	mu      sync.Mutex
	faults  map[string]gpuportal.GPUHealth // uuid → what made it unhealthy, from when
	xids    map[string]uint64              // uuid → XID errors seen
	lastXID map[string]uint64
	// FaultsFile (mock backends): a JSON list of faults to raise, read at
	// every sample (--mock-faults).
	FaultsFile string
	faultsMu   sync.Mutex         // one reading of FaultsFile at a time
	raised     map[mockFault]bool // the file's faults already raised

	sim *simulation // set for the mock backends
}

// ErrNVMLUnavailable means the NVML library could not be loaded or
// initialised; no other NVML call may be made after it.
var ErrNVMLUnavailable = errors.New("NVML is not available")

// OpenReal initialises the machine's NVML library. If it cannot be loaded
// (no driver, no GPU) it returns ErrNVMLUnavailable and calls nothing else:
// after a failed Init any NVML call would crash the process.
func OpenReal(log *slog.Logger) (*Source, error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: nvmlInit: %s (is the NVIDIA driver installed and libnvidia-ml.so.1 on the library path? use --nvml mock:dgxa100 to simulate)", ErrNVMLUnavailable, nvml.ErrorString(ret))
	}
	s, err := newSource(lib, log)
	if err != nil {
		lib.Shutdown()
		return nil, err
	}
	return s, nil
}

func newSource(lib nvml.Interface, log *slog.Logger) (*Source, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Source{lib: lib, log: log, faults: map[string]gpuportal.GPUHealth{}, xids: map[string]uint64{}, lastXID: map[string]uint64{}, raised: map[mockFault]bool{}}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlDeviceGetCount: %s", nvml.ErrorString(ret))
	}
	for i := 0; i < n; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvmlDeviceGetHandleByIndex(%d): %s", i, nvml.ErrorString(ret))
		}
		uuid, ret := d.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d: nvmlDeviceGetUUID: %s", i, nvml.ErrorString(ret))
		}
		name, ret := d.GetName()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d: nvmlDeviceGetName: %s", i, nvml.ErrorString(ret))
		}
		mem, ret := d.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d: nvmlDeviceGetMemoryInfo: %s", i, nvml.ErrorString(ret))
		}
		s.devices = append(s.devices, d)
		s.info = append(s.info, agent.Device{UUID: uuid, Index: i, Name: name, MemoryTotalMiB: int(mem.Total >> 20)})
	}
	return s, nil
}

// Devices returns the node's GPUs.
func (s *Source) Devices() []agent.Device { return slices.Clone(s.info) }

// Sample reads every GPU's telemetry. A reading NVML cannot give is left at
// zero rather than failing the whole sample.
func (s *Source) Sample() []gpuportal.GPUSample {
	if s.FaultsFile != "" {
		s.readFaults()
	}
	out := make([]gpuportal.GPUSample, len(s.devices))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range s.devices {
		uuid := s.info[i].UUID
		smp := gpuportal.GPUSample{UUID: uuid, XIDErrors: s.xids[uuid], LastXID: s.lastXID[uuid]}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			smp.MemoryUsedMiB = int(mem.Used >> 20)
			smp.MemoryFreeMiB = int((mem.Total - mem.Used) >> 20)
		}
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			smp.UtilizationPercent = int(u.Gpu)
		}
		if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			smp.TemperatureC = int(t)
		}
		if c, ret := d.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
			smp.SMClockMHz = int(c)
		}
		if p, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			smp.PowerW = int(p / 1000) // NVML reports milliwatts
		}
		if c, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			smp.ECCCorrected = c
		}
		if c, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			smp.ECCUncorrected = c
			if c > 0 {
				s.faultLocked(uuid, gpuportal.GPUHealth{Reason: fmt.Sprintf("%d uncorrectable ECC errors since the driver loaded", c)})
			}
		}
		if s.sim == nil { // the mocks have no page retirement
			if pending, ret := d.GetRetiredPagesPendingStatus(); ret == nvml.SUCCESS && pending == nvml.FEATURE_ENABLED {
				s.faultLocked(uuid, gpuportal.GPUHealth{Reason: "memory pages wait to be retired: the GPU needs a reset"})
			}
			if _, _, pending, failed, ret := d.GetRemappedRows(); ret == nvml.SUCCESS && (pending || failed) {
				s.faultLocked(uuid, gpuportal.GPUHealth{Reason: "memory rows wait to be remapped (or remapping failed): the GPU needs a reset"})
			}
		}
		if f, ok := s.faults[uuid]; ok {
			f := f
			smp.Health = &f
		}
		smp.Healthy = smp.Health == nil
		out[i] = smp
	}
	return out
}

// Processes lists the PIDs of compute processes on the GPU.
func (s *Source) Processes(uuid string) ([]int, error) {
	for i, d := range s.devices {
		if s.info[i].UUID != uuid {
			continue
		}
		procs, ret := d.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %s: nvmlDeviceGetComputeRunningProcesses: %s", uuid, nvml.ErrorString(ret))
		}
		pids := make([]int, len(procs))
		for j, p := range procs {
			pids[j] = int(p.Pid)
		}
		return pids, nil
	}
	return nil, fmt.Errorf("no GPU %s on this node", uuid)
}

// Watch waits for XID events (nvmlEventSetWait) until ctx ends.
func (s *Source) Watch(ctx context.Context) {
	set, ret := s.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		s.log.Warn("XID events unavailable", "err", nvml.ErrorString(ret))
		return
	}
	defer set.Free()
	for i, d := range s.devices {
		supported, ret := d.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			s.log.Warn("XID events unavailable on GPU", "uuid", s.info[i].UUID, "err", nvml.ErrorString(ret))
			continue
		}
		if ret := d.RegisterEvents(supported&(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError), set); ret != nvml.SUCCESS {
			s.log.Warn("cannot watch XID events on GPU", "uuid", s.info[i].UUID, "err", nvml.ErrorString(ret))
		}
	}
	for ctx.Err() == nil {
		ev, ret := set.Wait(500) // ms: short, so stopping is prompt
		if ret == nvml.ERROR_TIMEOUT {
			continue
		}
		if ret != nvml.SUCCESS {
			s.log.Warn("nvmlEventSetWait failed", "err", nvml.ErrorString(ret))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		switch ev.EventType {
		case nvml.EventTypeXidCriticalError:
			s.recordXID(ev)
		case nvml.EventTypeDoubleBitEccError:
			s.recordECC(ev)
		}
	}
}

func (s *Source) recordXID(ev nvml.EventData) {
	uuid := ""
	if ev.Device != nil {
		uuid, _ = ev.Device.GetUUID()
	}
	xid := ev.EventData
	s.mu.Lock()
	defer s.mu.Unlock()
	targets := []string{uuid}
	if uuid == "" { // an event without a device concerns every GPU
		targets = targets[:0]
		for _, d := range s.info {
			targets = append(targets, d.UUID)
		}
	}
	for _, u := range targets {
		s.xids[u]++
		s.lastXID[u] = xid
		if !gpuportal.CriticalXID(xid) {
			s.log.Info("XID that leaves the GPU healthy", "uuid", u, "xid", xid)
			continue
		}
		s.log.Warn("critical XID: GPU marked unhealthy", "uuid", u, "xid", xid)
		s.faultLocked(u, gpuportal.GPUHealth{Reason: gpuportal.XIDText(xid), XID: xid})
	}
}

// recordECC marks a GPU unhealthy on an uncorrectable (double-bit) ECC
// error event.
func (s *Source) recordECC(ev nvml.EventData) {
	if ev.Device == nil {
		return
	}
	uuid, _ := ev.Device.GetUUID()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.Warn("uncorrectable ECC error: GPU marked unhealthy", "uuid", uuid)
	s.faultLocked(uuid, gpuportal.GPUHealth{Reason: "an uncorrectable (double-bit) ECC error"})
}

// faultLocked records a GPU's fault; the first one stays (a GPU that has
// failed keeps the reason it failed for, until it is reset).
func (s *Source) faultLocked(uuid string, h gpuportal.GPUHealth) {
	if _, ok := s.faults[uuid]; ok {
		return
	}
	now := time.Now().UTC()
	h.Healthy, h.At = false, &now
	s.faults[uuid] = h
}

// Close shuts NVML down.
func (s *Source) Close() error {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %s", nvml.ErrorString(ret))
	}
	return nil
}
