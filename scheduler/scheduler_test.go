package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/plan"
	"gpuportal/store"
)

// fakeStore ticks as told.
type fakeStore struct {
	res plan.TickResult
	err error
}

func (f *fakeStore) Tick(context.Context, time.Time) (plan.TickResult, error) { return f.res, f.err }
func (f *fakeStore) Lead(context.Context) (*store.Leadership, bool, error)    { return nil, false, nil }
func (f *fakeStore) Kicks() <-chan struct{}                                   { return nil }
func (f *fakeStore) MarkStaleNodesOffline(context.Context, time.Time, time.Time) ([]string, error) {
	return nil, nil
}
func (f *fakeStore) Dialect() string { return "sqlite" }

// (issue 44, item 1) How the ticks go is kept for /healthz and /metrics:
// failing ticks in a row (since when, why), decisions that failed alone,
// the last success; a success ends the failing run.
func TestTickHealth(t *testing.T) {
	db := &fakeStore{}
	wall := gpuportal.NewManualClock(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	s := New(db, wall, wall, nil)
	ctx := context.Background()
	db.res = plan.TickResult{Failed: 2}
	_, _ = s.Tick(ctx, wall.Now())
	if h := s.Health(); h.Ticks != 1 || h.FailedDecisions != 2 || !h.LastSuccess.Equal(wall.Now()) || h.FailingFor(wall.Now()) != 0 {
		t.Fatalf("after a tick with two failed decisions: %+v", h)
	}
	db.res, db.err = plan.TickResult{}, errors.New("database is locked")
	start := wall.Now().Add(time.Minute)
	wall.Set(start)
	_, _ = s.Tick(ctx, wall.Now())
	wall.Set(start.Add(4 * time.Minute))
	_, _ = s.Tick(ctx, wall.Now())
	h := s.Health()
	if h.FailedTicks != 2 || h.LastError != "database is locked" || h.FailingFor(wall.Now()) != 4*time.Minute {
		t.Fatalf("after two failing ticks: %+v (failing for %v)", h, h.FailingFor(wall.Now()))
	}
	db.err = nil
	_, _ = s.Tick(ctx, wall.Now())
	if h := s.Health(); h.FailingFor(wall.Now()) != 0 || h.Ticks != 4 {
		t.Fatalf("after a success: %+v", h)
	}
}
