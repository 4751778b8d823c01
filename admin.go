package gpuportal

import (
	"encoding/json"
	"time"
)

// AuditEntry is one line of the audit log: who changed what, old → new.
type AuditEntry struct {
	ID       int64           `json:"id"`
	At       time.Time       `json:"at"`
	ActorID  *int64          `json:"actor_id,omitempty"`
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	Subject  string          `json:"subject"`
	OldValue json.RawMessage `json:"old"`
	NewValue json.RawMessage `json:"new"`
}

// AuditFilter narrows the audit log; empty fields match everything.
type AuditFilter struct {
	Action  string // prefix, e.g. "policies" or "reservation.cancel"
	Actor   string // email
	Subject string // prefix, e.g. "node/"
	TeamID  int64  // a team's trail only (0: all)
	Limit   int
	Offset  int
	// Total, when set, receives how many entries match (the page aside).
	Total *int
}

// GPUStates counts a model's GPUs in a region by what they do now.
type GPUStates struct {
	Model, Region                                      string
	Reserved, OnDemand, Spot, Idle, Unhealthy, Offline int
}

// DayUse is how much of a day's bookable GPU-hours the book has taken.
type DayUse struct {
	Day      time.Time
	Reserved int // GPU-hours
	Capacity int // GPU-hours
}

// Overview is the admin's picture of the platform.
type Overview struct {
	States  []GPUStates
	Next14  map[string][]DayUse // by model
	Revenue map[string]Fen
}
