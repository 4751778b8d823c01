package gpuportal

import (
	"slices"
	"time"
)

// Capacity: how many GPUs can be booked, how many are free in an hour,
// whether an on-demand start fits beside the bookings, and why a
// reservation came up short. The store and the planner count; these
// rules say what the counts allow.

// FreeInHour is how many more GPUs an hour can take: its capacity less
// what is booked, never below zero (a pool that lost GPUs may be
// booked over its capacity until the bookings end).
func FreeInHour(capacity, reserved int) int {
	return max(0, capacity-reserved)
}

// FitsInHour reports whether count more GPUs fit in an hour. The store's
// conditional UPDATE of the hour's row (takeCapacity) is the same test
// written in SQL, so that two bookings cannot both pass it.
func FitsInHour(capacity, reserved, count int) bool {
	return reserved+count <= capacity
}

// BookableGPUs is the capacity reservations may use: healthy GPUs on online,
// non-draining nodes × the reservable share, rounded down.
func BookableGPUs(healthy, reservablePercent int) int {
	return healthy * reservablePercent / 100
}

// OnDemandFits is the one rule for every on-demand start — a launch, a
// pending launch placed, a hybrid job's on-demand worker: on-demand
// instances run until stopped, so count more GPUs must fit beside every
// booked hour ahead, not only the next day's. bookable is BookableGPUs,
// onDemand what on-demand instances hold or wait for (not counting these
// count), mostBookedAhead the most GPUs booked in any hour from now on.
func OnDemandFits(bookable, onDemand, count, mostBookedAhead int) bool {
	return bookable-onDemand-count >= mostBookedAhead
}

// Why a reservation could not get all its GPUs (its refund says so).
const (
	ShortNodeFailure     = "node_failure"    // a node it ran on failed
	ShortOutOfService    = "out_of_service"  // fewer healthy GPUs than were booked
	ShortStillInUse      = "still_in_use"    // GPUs still held by instances that are not spot
	ShortCauseUnknownGPU = "no_gpus_in_pool" // the model/region has no GPUs any more
)

// ShortfallCauseText is a shortfall cause in words, for the ledger.
func ShortfallCauseText(cause string) string {
	switch cause {
	case ShortNodeFailure:
		return "node failure"
	case ShortOutOfService:
		return "GPUs out of service"
	case ShortStillInUse:
		return "GPUs still in use by other instances"
	}
	return "no GPUs of this model in the region"
}

// Slot is one hour of availability for a model in a region.
type Slot struct {
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	Capacity        int       `json:"capacity"`
	Reserved        int       `json:"reserved"`
	Free            int       `json:"free"`
	PricePerGPU     Fen       `json:"price_per_gpu_hour_fen"`
	DiscountPercent int       `json:"discount_percent"`
	OffPeak         bool      `json:"off_peak"`
	// Bookable is false for hours that cannot be booked now (too soon, too
	// far ahead), whatever their free count.
	Bookable bool `json:"bookable"`
	// MaintenanceGPUs are out of service for a maintenance window this
	// hour (not in Reserved; not free), MaintenanceReason says why.
	MaintenanceGPUs   int    `json:"maintenance_gpus,omitempty"`
	MaintenanceReason string `json:"maintenance_reason,omitempty"`
}

// MaxAvailabilityHours bounds one availability query (31 days).
const MaxAvailabilityHours = 31 * 24

// MostFree is the most GPUs free in every one of the hours: what could
// still be booked across a window that is full for the count asked.
func MostFree(free []int) int {
	if len(free) == 0 {
		return 0
	}
	return slices.Min(free)
}
