package gpuportal

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Maintenance windows (DESIGN §1, §6): hours a node (or a whole region)
// is out of service for work on it, planned so that nobody learns of it
// at the last minute. Its GPUs leave bookable capacity for those hours
// (the calendar greys them with the reason); bookings that no longer fit
// are cancelled with a full refund and their owners told why; spot
// instances on it get their notice before the start; others are told at
// once and stopped at the start; nothing new is placed on it meanwhile.

// MaintenanceRequest is POST /admin/maintenance's body: a region, or one
// node of it (node_id alone names its region too), the window, why;
// DryRun only lists the reservations that could not keep their GPUs.
type MaintenanceRequest struct {
	NodeID string    `json:"node_id,omitempty"`
	Region string    `json:"region,omitempty"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Reason string    `json:"reason"`
	DryRun bool      `json:"dry_run,omitempty"`
}

// Maintenance is a window as the admin pages and API show it.
type Maintenance struct {
	ID        int64      `json:"id"`
	NodeID    *string    `json:"node_id"`
	Region    string     `json:"region"`
	Start     time.Time  `json:"start"`
	End       time.Time  `json:"end"`
	Reason    string     `json:"reason"`
	CreatedAt time.Time  `json:"created_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"` // ended early (DELETE)
	// GPUs it takes out of service; Affected: the reservations it
	// cancelled (or, in a dry run, would cancel).
	GPUs     int     `json:"gpus"`
	Affected []int64 `json:"affected"`
	DryRun   bool    `json:"dry_run,omitempty"`
}

// ReasonMaintenance: the instance's node goes into a maintenance window
// (never counted in the spot rates).
const ReasonMaintenance InterruptReason = "maintenance"

// ValidateMaintenance checks a request's shape and times: one node or
// one region, a reason, an end after the start and not in the past.
func ValidateMaintenance(r *MaintenanceRequest, now time.Time) error {
	r.Reason = strings.TrimSpace(r.Reason)
	if r.NodeID == "" && r.Region == "" {
		return FieldErrorf(EINVALID, "region", "Name the region (and a node_id for one node of it).")
	}
	if r.Reason == "" || utf8.RuneCountInString(r.Reason) > 500 {
		return FieldErrorf(EINVALID, "reason", "Say why, in at most 500 characters: customers read it.")
	}
	if r.Start.IsZero() || r.End.IsZero() {
		return FieldErrorf(EINVALID, "start", "Give the window's start and end.")
	}
	if !r.End.After(r.Start) {
		return FieldErrorf(EPOLICY, "end", "The window must end after it starts.")
	}
	if !r.End.After(now) {
		return FieldErrorf(EPOLICY, "end", "The window is over already: plan one that ends in the future.")
	}
	if r.End.Sub(r.Start) > 30*24*time.Hour {
		return FieldErrorf(EPOLICY, "end", "A window is at most 30 days long.")
	}
	if r.Start.Before(now.Add(-time.Minute)) {
		r.Start = now // "from now on"
	}
	return nil
}
