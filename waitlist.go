package gpuportal

import "time"

// WaitStatus is where a waitlist entry is: waiting → offered → claimed,
// or expired or cancelled.
type WaitStatus string

// Waitlist entry statuses.
const (
	WaitWaiting   WaitStatus = "waiting"
	WaitOffered   WaitStatus = "offered"
	WaitClaimed   WaitStatus = "claimed"
	WaitExpired   WaitStatus = "expired"
	WaitCancelled WaitStatus = "cancelled"
)

// WaitlistEntry asks for a full window; it is offered the capacity when it
// frees, in order of joining (first fit).
type WaitlistEntry struct {
	ID             int64      `json:"id"`
	UserID         int64      `json:"user_id"`
	Model          string     `json:"model"`
	Region         string     `json:"region"`
	Count          int        `json:"count"`
	Start          time.Time  `json:"start"`
	End            time.Time  `json:"end"`
	AutoBook       bool       `json:"auto_book"`
	Status         WaitStatus `json:"status"`
	Position       int        `json:"position,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	OfferExpiresAt *time.Time `json:"offer_expires_at,omitempty"`
	ReservationID  *int64     `json:"reservation_id,omitempty"`
	Note           string     `json:"note,omitempty"`
	// A flexible entry asks for DurationHours anywhere in [Start, End)
	// (Earliest and LatestEnd say the same for scripts) and books the
	// earliest window that frees, by itself.
	Flexible      bool       `json:"flexible"`
	DurationHours int        `json:"duration_hours,omitempty"`
	Earliest      *time.Time `json:"earliest,omitempty"`
	LatestEnd     *time.Time `json:"latest_end,omitempty"`
	// EarliestPossible is, for a waiting flexible entry, the earliest a
	// window of its length could start given the book today, inside its
	// range or not (nil: none within the lead time).
	EarliestPossible *time.Time `json:"earliest_possible_start,omitempty"`
}

// OfferExpiry is when a waitlist offer made at now lapses: after the
// policy's claim window, but never past the window's start.
func OfferExpiry(now, start time.Time, claimMinutes int) time.Time {
	expires := now.Add(time.Duration(claimMinutes) * time.Minute)
	if start.Before(expires) {
		return start
	}
	return expires
}
