package gpuportal

import (
	"strings"
	"time"
)

// Node states as the admin API shows them.
const (
	NodeOnline   = "online"
	NodeOffline  = "offline"
	NodeDraining = "draining"
)

// Node is a GPU host running the agent.
type Node struct {
	ID              string     `json:"id"`
	Hostname        string     `json:"hostname"`
	Region          string     `json:"region"`
	State           string     `json:"state"`
	LastHeartbeatAt *time.Time `json:"last_heartbeat_at"`
	GPUs            []GPU      `json:"gpus"`
	// TokenState is the node token's: active, rotating (the agent was
	// asked to switch to a new one) or revoked (the node must enrol again).
	TokenState     string     `json:"token_state"`
	TokenRotatedAt *time.Time `json:"token_rotated_at,omitempty"`
	// DrainNote says why the portal drained it (its GPUs kept failing).
	DrainNote string `json:"drain_note,omitempty"`
}

// Node token states.
const (
	NodeTokenActive   = "active"
	NodeTokenRotating = "rotating"
	NodeTokenRevoked  = "revoked"
)

// GPU is one device on a node, identified by its NVML UUID.
type GPU struct {
	UUID               string `json:"uuid"`
	Index              int    `json:"index"`
	Model              string `json:"model"`
	Name               string `json:"name"`
	Healthy            bool   `json:"healthy"`
	MemoryTotalMiB     int    `json:"memory_total_mib"`
	MemoryUsedMiB      int    `json:"memory_used_mib"`
	UtilizationPercent int    `json:"utilization_percent"`
	TemperatureC       int    `json:"temperature_c"`
	PowerW             int    `json:"power_w"`
	// BusyAfterInstance names the ended instance whose processes the agent
	// still saw on this GPU; it is out of service until its node reports
	// it idle.
	BusyAfterInstance *int64 `json:"busy_after_instance,omitempty"`
	// Health: a failed GPU's fault (out of service until an admin returns
	// it), or healthy.
	Health GPUHealth `json:"health"`
}

// GPUUse is what a GPU does now, for the fleet view: the instance on it,
// or the active reservation that holds it, and whose it is.
type GPUUse struct {
	InstanceID    int64        `json:"instance_id,omitempty"`
	InstanceKind  InstanceKind `json:"instance_kind,omitempty"`
	ReservationID int64        `json:"reservation_id,omitempty"`
	UserID        int64        `json:"user_id,omitempty"`
	UserName      string       `json:"user_name,omitempty"`
	UserEmail     string       `json:"user_email,omitempty"`
}

// Busy says whether anything runs on or holds the GPU.
func (u GPUUse) Busy() bool { return u.InstanceID != 0 || u.ReservationID != 0 }

// What a GPU is doing, as the fleet view filters it (FleetGPUState).
const (
	GPUInUse     = "in_use"    // an instance runs on it, or an active reservation holds it
	GPUIdle      = "idle"      // healthy, on an online node, doing nothing
	GPUUnhealthy = "unhealthy" // out of service on an online node
	GPUDraining  = "draining"  // idle on a draining node: no new work comes
	GPUOffline   = "offline"   // its node sends no heartbeats
)

// FleetGPUStates are the states in the order the fleet view lists them.
var FleetGPUStates = []string{GPUInUse, GPUIdle, GPUUnhealthy, GPUDraining, GPUOffline}

// FleetGPUState is what a GPU is doing: an offline node's GPUs are
// offline whatever they last ran; otherwise use comes before health (an
// instance still on an unhealthy GPU is in use), and a draining node's
// idle GPUs are draining.
func FleetGPUState(nodeState string, g GPU, use GPUUse) string {
	switch {
	case nodeState == NodeOffline:
		return GPUOffline
	case use.Busy():
		return GPUInUse
	case !g.Healthy:
		return GPUUnhealthy
	case nodeState == NodeDraining:
		return GPUDraining
	}
	return GPUIdle
}

// CatalogModelFor maps a GPU as NVML names it to the catalog model it is
// rented as, or "" when the catalog has no such model (a 40 GB A100, say).
func CatalogModelFor(nvmlName string, memoryMiB int) string {
	name := strings.ToUpper(nvmlName)
	big := memoryMiB >= 78*1024 // "80GB" boards report a little less
	switch {
	case strings.Contains(name, "A100") && big:
		return "a100-80g"
	case strings.Contains(name, "H100") && big:
		return "h100-80g"
	}
	return ""
}
