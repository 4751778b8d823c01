package agent

import (
	"context"

	"gpuportal"
)

// Device is a GPU as the node sees it: fixed facts.
type Device struct {
	UUID           string `json:"uuid"`
	Index          int    `json:"index"`
	Name           string `json:"name"`
	MemoryTotalMiB int    `json:"memory_total_mib"`
}

// GPUSource is where the agent learns about its GPUs: NVML on a real node,
// go-nvml's dgx mocks in the demo and tests (package agent/nvidia).
type GPUSource interface {
	Devices() []Device
	Sample() []gpuportal.GPUSample
	// Processes lists the PIDs of compute processes on a GPU.
	Processes(uuid string) ([]int, error)
	// Watch follows XID events until ctx ends, marking GPUs unhealthy on
	// critical errors.
	Watch(ctx context.Context)
	Close() error
}

// WorkloadObserver is implemented by simulated sources: the agent tells
// them which processes run on which GPUs so utilization, memory and the
// process list follow the workloads.
type WorkloadObserver interface {
	WorkloadStarted(uuids []string, pid int)
	WorkloadStopped(uuids []string, pid int)
}
