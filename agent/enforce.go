package agent

import (
	"context"
	"syscall"
	"time"
)

// enforceLoop sends SIGTERM at each deadline and SIGKILL after the grace,
// in this machine's clock, whether or not the portal can be reached.
func (a *Agent) enforceLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := a.enforce(a.clock.Now())
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.wake:
		}
	}
}

// enforce sends the signals that are due and returns when the next one is.
func (a *Agent) enforce(now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var next time.Time
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	dirty := false
	for _, w := range a.workloads {
		if w.exited || w.proc == nil || w.rec.Deadline.IsZero() || w.rec.Drill {
			continue // a drill's notice is never signalled
		}
		killAt := w.rec.Deadline.Add(time.Duration(w.rec.Grace * float64(time.Second)))
		switch {
		case !w.rec.TermSent && !now.Before(w.rec.Deadline):
			a.log.Info("deadline: SIGTERM", "instance", w.rec.InstanceID)
			_ = w.proc.Signal(syscall.SIGTERM)
			w.rec.TermSent, w.signal, dirty = true, "SIGTERM", true
			soonest(killAt)
		case !w.rec.TermSent:
			soonest(w.rec.Deadline)
		case !w.rec.KillSent && !now.Before(killAt):
			a.log.Info("grace over: SIGKILL", "instance", w.rec.InstanceID)
			_ = w.proc.Signal(syscall.SIGKILL)
			w.rec.KillSent, w.signal, dirty = true, "SIGKILL", true
		case !w.rec.KillSent:
			soonest(killAt)
		}
	}
	if dirty {
		a.persistLocked()
	}
	return next
}
