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

// applicationXIDs are errors caused by the application, not the GPU
// (as in NVIDIA's k8s-device-plugin): they leave the GPU healthy.
var applicationXIDs = []uint64{13, 31, 43, 45, 68, 109}

// Source is a GPUSource over an nvml.Interface.
type Source struct {
	lib     nvml.Interface
	log     *slog.Logger
	devices []nvml.Device
	info    []agent.Device

	mu        sync.Mutex
	unhealthy map[string]uint64 // uuid → the XID that made it unhealthy
	xids      map[string]uint64 // uuid → XID errors seen
	lastXID   map[string]uint64

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
	s := &Source{lib: lib, log: log, unhealthy: map[string]uint64{}, xids: map[string]uint64{}, lastXID: map[string]uint64{}}
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
	out := make([]gpuportal.GPUSample, len(s.devices))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range s.devices {
		uuid := s.info[i].UUID
		smp := gpuportal.GPUSample{UUID: uuid, Healthy: s.unhealthy[uuid] == 0, XIDErrors: s.xids[uuid], LastXID: s.lastXID[uuid]}
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
		if p, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			smp.PowerW = int(p / 1000) // NVML reports milliwatts
		}
		if c, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			smp.ECCCorrected = c
		}
		if c, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			smp.ECCUncorrected = c
		}
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
		if ret := d.RegisterEvents(supported&nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
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
		if ev.EventType != nvml.EventTypeXidCriticalError {
			continue
		}
		s.recordXID(ev)
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
		if slices.Contains(applicationXIDs, xid) {
			s.log.Info("application XID: GPU stays healthy", "uuid", u, "xid", xid)
			continue
		}
		if s.unhealthy[u] == 0 {
			s.log.Warn("critical XID: GPU marked unhealthy", "uuid", u, "xid", xid)
		}
		s.unhealthy[u] = xid
	}
}

// Close shuts NVML down.
func (s *Source) Close() error {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %s", nvml.ErrorString(ret))
	}
	return nil
}
