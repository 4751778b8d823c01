// Package scheduler decides what is due and does it: Tick(now) is
// level-triggered and idempotent (reservations start and end, spot notices,
// placement — see store.Tick); robfig/cron only calls it every minute, and
// anything that makes something due kicks it at once. A fleet monitor
// marks nodes offline after three missed heartbeats, in real time.
package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"gpuportal"
	"gpuportal/store"
)

// Scheduler runs the portal's scheduled work.
type Scheduler struct {
	DB    *store.DB
	Clock gpuportal.Clock // business time
	Wall  gpuportal.Clock // real time (node liveness)
	Log   *slog.Logger

	mu   sync.Mutex // one tick at a time
	kick chan struct{}
}

// New returns a scheduler over db.
func New(db *store.DB, clock, wall gpuportal.Clock, log *slog.Logger) *Scheduler {
	if log == nil {
		log = slog.Default()
	}
	return &Scheduler{DB: db, Clock: clock, Wall: wall, Log: log, kick: make(chan struct{}, 1)}
}

// Tick does everything due by now.
func (s *Scheduler) Tick(ctx context.Context, now time.Time) (store.TickResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.DB.Tick(ctx, now)
	if err != nil {
		s.Log.Error("scheduler tick failed", "err", err)
		return res, err
	}
	if res != (store.TickResult{}) {
		s.Log.Info("scheduler tick", "now", now.Format(time.RFC3339), "activated", res.Activated, "completed", res.Completed,
			"interrupted", res.Interrupted, "placed", res.Placed, "node_failures", res.NodeFailures)
	}
	return res, nil
}

// Kick asks for a tick now (a booking, launch or cancel made something due).
func (s *Scheduler) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run ticks every minute (cron job "tick") and on every kick, and watches
// node liveness every few seconds, until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	c := cron.New(cron.WithChain(cron.Recover(cron.DefaultLogger), cron.SkipIfStillRunning(cron.DefaultLogger)))
	if _, err := c.AddJob("@every 1m", namedJob{"tick", func() { _, _ = s.Tick(ctx, s.Clock.Now()) }}); err != nil {
		s.Log.Error("schedule tick", "err", err)
		return
	}
	c.Start()
	defer func() { <-c.Stop().Done() }()

	liveness := time.NewTicker(2 * time.Second)
	defer liveness.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			_, _ = s.Tick(ctx, s.Clock.Now())
		case <-liveness.C:
			ids, err := s.DB.MarkStaleNodesOffline(ctx, s.Wall.Now())
			if err != nil {
				s.Log.Error("fleet monitor", "err", err)
				continue
			}
			if len(ids) > 0 {
				s.Log.Warn("nodes offline: missed 3 heartbeats", "nodes", ids)
				_, _ = s.Tick(ctx, s.Clock.Now())
			}
		}
	}
}

// namedJob gives a cron job a name for logs.
type namedJob struct {
	name string
	run  func()
}

func (j namedJob) Run() { j.run() }

// Advance moves a manual clock to t minute by minute, ticking at every
// minute boundary passed (the test clock's POST /admin/clock).
func (s *Scheduler) Advance(ctx context.Context, clock *gpuportal.ManualClock, to time.Time) error {
	from := clock.Now()
	for t := from.Truncate(time.Minute).Add(time.Minute); !t.After(to); t = t.Add(time.Minute) {
		clock.Set(t)
		if _, err := s.Tick(ctx, t); err != nil {
			return err
		}
	}
	clock.Set(to)
	_, err := s.Tick(ctx, to)
	return err
}
