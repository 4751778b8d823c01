package gpuportal

import (
	_ "time/tzdata" // the site time zone must work on machines without zoneinfo

	"sync"
	"time"
)

// Clock tells business time: bookings, prices, billing, notices, reminders
// and waitlist expiry all read it. Node liveness, sessions and rate limits
// use real time instead (see DESIGN §3), so moving a test clock a day ahead
// does not log everybody out or mark every node offline.
type Clock interface {
	Now() time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns the current wall-clock time in UTC.
func (RealClock) Now() time.Time { return time.Now().UTC() }

// ManualClock is a clock that only moves when told to: the portal's
// --test-clock and the tests use it.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock stopped at now.
func NewManualClock(now time.Time) *ManualClock {
	return &ManualClock{now: now.UTC()}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (forwards or backwards).
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC()
}

// Advance moves the clock forwards by d and returns the new time.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
