package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/scheduler"
)

// healthOf is a scheduler whose ticks went as told.
type healthOf scheduler.TickHealth

func (h *healthOf) Leading() bool { return true }
func (h *healthOf) Advance(context.Context, *gpuportal.ManualClock, time.Time) error {
	return nil
}
func (h *healthOf) Health() scheduler.TickHealth { return scheduler.TickHealth(*h) }

// (issue 44, item 1) /healthz and /metrics report a scheduler that keeps
// failing — before, /healthz said ok while no reservation started — and
// the decisions that failed alone.
func TestHealthzReportsFailingTicks(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	h := &healthOf{Ticks: 10, FailedTicks: 1, FailedDecisions: 3, LastSuccess: e.wall.Now()}
	e.with(func(c *Config) { c.Scheduler = h })
	if st, body := e.apiCall("GET", "/healthz", "", ""); st != http.StatusOK || !strings.Contains(body, `"scheduler":"leader"`) || !strings.Contains(body, `"failed_decisions_last_hour":0`) {
		t.Fatalf("healthy = %d %s", st, body)
	}
	// Ticks have failed for a minute: a passing fault, still ok.
	h.FailingSince, h.LastError = e.wall.Now().Add(-time.Minute), "database is locked"
	if st, _ := e.apiCall("GET", "/healthz", "", ""); st != http.StatusOK {
		t.Fatalf("a minute of failing ticks = %d, want still ok", st)
	}
	h.FailingSince = e.wall.Now().Add(-TicksFailingUnhealthy)
	if st, body := e.apiCall("GET", "/healthz", "", ""); st != http.StatusServiceUnavailable || !strings.Contains(body, "database is locked") {
		t.Fatalf("ticks failing for %v = %d %s", TicksFailingUnhealthy, st, body)
	}
	_, metrics := e.apiCall("GET", "/metrics", "", "")
	for _, want := range []string{"gpuportal_scheduler_ticks_total 10", "gpuportal_scheduler_tick_failures_total 1", "gpuportal_scheduler_failed_decisions_total 3", "gpuportal_scheduler_failing_seconds 180"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
