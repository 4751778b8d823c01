package gpuportal

import (
	"fmt"
	"slices"
	"time"
)

// GPU health (DESIGN §6, GPU health and maintenance): what NVML tells of a
// GPU that fails, and what the portal does about it.

// CriticalXIDs are the XID errors that take a GPU out of service: it fell
// off the bus, its memory failed or it needs a reset (NVIDIA's XID
// catalogue; dstack and the k8s device plugin use the same list).
// Application XIDs (13, 31, 43, 45: a program's own fault) leave it
// healthy.
var CriticalXIDs = []uint64{48, 63, 64, 74, 79, 92, 94, 95}

// CriticalXID reports whether an XID takes a GPU out of service.
func CriticalXID(xid uint64) bool { return slices.Contains(CriticalXIDs, xid) }

// XIDText says what an XID means, for the fault's reason.
func XIDText(xid uint64) string {
	switch xid {
	case 48:
		return "XID 48: a double-bit ECC error"
	case 63:
		return "XID 63: ECC page retirement or row remapping"
	case 64:
		return "XID 64: ECC page retirement or row remapping failed"
	case 74:
		return "XID 74: an NVLink error"
	case 79:
		return "XID 79: the GPU fell off the bus"
	case 92:
		return "XID 92: a high single-bit ECC error rate"
	case 94:
		return "XID 94: a contained ECC error"
	case 95:
		return "XID 95: an uncontained ECC error"
	}
	return fmt.Sprintf("XID %d", xid)
}

// GPUHealth is a GPU's health as its agent reports it and the portal
// shows it: a fault, from when, and which XID raised it (0: another
// cause, such as uncorrectable ECC errors).
type GPUHealth struct {
	Healthy bool       `json:"healthy"`
	Reason  string     `json:"reason,omitempty"`
	XID     uint64     `json:"xid,omitempty"`
	At      *time.Time `json:"at,omitempty"`
}

// ReasonGPUFailure: the instance's GPU failed under it (an XID, an
// uncorrectable ECC error); never a spot interruption in the rates.
const ReasonGPUFailure InterruptReason = "gpu_failure"

// GPUFailuresToDrain failures of a node's GPUs within GPUFailureWindow
// drain the node, with a note saying why.
const (
	GPUFailuresToDrain = 3
	GPUFailureWindow   = 24 * time.Hour
)
