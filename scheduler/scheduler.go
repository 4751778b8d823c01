// Package scheduler runs the ticks: Tick(now) is level-triggered and
// idempotent (reservations start and end, spot notices, placement — the
// decisions are package plan's, applied by the store); robfig/cron only
// calls it every minute, and
// every store change that makes something due kicks it at once. A fleet monitor
// marks nodes offline after three missed heartbeats, in real time.
//
// Several portals on one PostgreSQL run one scheduler between them: each
// portal's Run waits for the leader lock (store.DB.Lead) and schedules only
// while it holds it. A new leader ticks at once, and since Tick is
// level-triggered and its transactions run one at a time, whatever fell due
// during the hand-over is done then, once.
package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"gpuportal"
	"gpuportal/plan"
	"gpuportal/store"
)

// Store is what the scheduler needs of the store: a tick that loads a
// snapshot, plans over it (Plan) and applies the plan in one transaction;
// the leader lock; kicks; node liveness.
type Store interface {
	Tick(ctx context.Context, now time.Time) (plan.TickResult, error)
	Lead(ctx context.Context) (*Leadership, bool, error)
	Kicks() <-chan struct{}
	MarkStaleNodesOffline(ctx context.Context, now, listeningSince time.Time) ([]string, error)
	Dialect() string
}

// Leadership is this portal's turn at running the scheduler.
type Leadership = store.Leadership

// Scheduler runs the portal's scheduled work.
type Scheduler struct {
	DB    Store
	Clock gpuportal.Clock // business time
	Wall  gpuportal.Clock // real time (node liveness)
	Log   *slog.Logger
	// LivenessGrace is how long, on top of three heartbeats, a node has
	// after this portal starts leading before missed heartbeats take it
	// offline: heartbeats that came while no portal listened were never
	// missed by the node, and an agent that lost the portal retries only
	// every gpuportal.AgentBackoffCap. Default: that cap.
	LivenessGrace time.Duration

	mu sync.Mutex // one tick at a time
	// standby is set while Run waits for another portal's leadership to
	// end: this portal then neither ticks nor watches the fleet.
	standby atomic.Bool

	// health is how this portal's ticks have gone (/healthz, /metrics).
	health tickHealth
}

// TickHealth is how the ticks of this portal have gone since it started:
// what /healthz and /metrics report, so that a scheduler that keeps
// failing is seen (a portal that serves pages but starts no reservation
// is not healthy).
type TickHealth struct {
	Ticks, FailedTicks int64
	// FailingSince is the wall time of the first of the failed ticks in a
	// row (zero while the last tick succeeded); LastError is the last
	// failed tick's error.
	FailingSince time.Time
	LastError    string
	// FailedDecisions counts the decisions that failed alone (rolled back
	// and recorded; their ticks applied the rest).
	FailedDecisions int64
	LastSuccess     time.Time
}

// FailingFor is how long ticks have failed in a row at wall time now
// (zero while the last one succeeded).
func (h TickHealth) FailingFor(now time.Time) time.Duration {
	if h.FailingSince.IsZero() {
		return 0
	}
	return now.Sub(h.FailingSince)
}

type tickHealth struct {
	mu sync.Mutex
	h  TickHealth
}

func (t *tickHealth) record(now time.Time, res plan.TickResult, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.h.Ticks++
	t.h.FailedDecisions += int64(res.Failed)
	if err != nil {
		t.h.FailedTicks++
		t.h.LastError = err.Error()
		if t.h.FailingSince.IsZero() {
			t.h.FailingSince = now
		}
		return
	}
	t.h.FailingSince = time.Time{}
	t.h.LastSuccess = now
}

// Health reports how this portal's ticks have gone.
func (s *Scheduler) Health() TickHealth {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.h
}

// LeaderRetry is how often a standby portal tries to take the leadership.
var LeaderRetry = 5 * time.Second

// New returns a scheduler over db.
func New(db Store, clock, wall gpuportal.Clock, log *slog.Logger) *Scheduler {
	if log == nil {
		log = slog.Default()
	}
	s := &Scheduler{DB: db, Clock: clock, Wall: wall, Log: log, LivenessGrace: gpuportal.AgentBackoffCap}
	// On PostgreSQL a portal stands by until Run wins the leadership; on
	// SQLite it is the only portal and always leads.
	s.standby.Store(db.Dialect() == "postgres")
	return s
}

// Tick does everything due by now.
func (s *Scheduler) Tick(ctx context.Context, now time.Time) (plan.TickResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.DB.Tick(ctx, now)
	s.health.record(s.Wall.Now(), res, err)
	if err != nil {
		s.Log.Error("scheduler tick failed", "err", err)
		return res, err
	}
	if res.Failed > 0 {
		s.Log.Warn("scheduler tick: decisions failed and were skipped (see tick_failures)", "now", now.Format(time.RFC3339), "failed", res.Failed)
	}
	if res != (plan.TickResult{}) {
		s.Log.Info("scheduler tick", "now", now.Format(time.RFC3339), "activated", res.Activated, "completed", res.Completed,
			"interrupted", res.Interrupted, "placed", res.Placed, "node_failures", res.NodeFailures)
	}
	return res, nil
}

// Leading reports whether this portal runs the scheduler now.
func (s *Scheduler) Leading() bool { return !s.standby.Load() }

// Run schedules whenever this portal leads (always, on SQLite), until ctx
// ends; otherwise it stands by and tries for the leadership every
// LeaderRetry.
func (s *Scheduler) Run(ctx context.Context) {
	for ctx.Err() == nil {
		lead, ok, err := s.DB.Lead(ctx)
		if err != nil && ctx.Err() == nil {
			s.Log.Error("scheduler leadership", "err", err)
		}
		if !ok {
			s.standby.Store(true)
			select {
			case <-ctx.Done():
			case <-time.After(LeaderRetry):
			}
			continue
		}
		s.standby.Store(false)
		s.Log.Info("scheduler: this portal leads")
		s.lead(ctx, lead.Lost)
		s.standby.Store(true)
		lead.Release()
		if ctx.Err() == nil {
			s.Log.Warn("scheduler: lost the leadership (its database connection broke); standing by")
		}
	}
}

// lead ticks at once (catching up on whatever fell due while no portal
// led), then every minute (cron job "tick") and on every kick, and watches
// node liveness every few seconds, until ctx ends or the leadership is lost.
func (s *Scheduler) lead(ctx context.Context, lost <-chan struct{}) {
	// Node liveness counts from when this portal could hear heartbeats:
	// its own downtime (a restart, a leadership change) is no node's fault.
	listeningSince := s.Wall.Now().Add(s.LivenessGrace)
	_, _ = s.Tick(ctx, s.Clock.Now())
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
		case <-lost:
			return
		case <-s.DB.Kicks():
			s.kickedTick(ctx, lost)
		case <-liveness.C:
			ids, err := s.DB.MarkStaleNodesOffline(ctx, s.Wall.Now(), listeningSince)
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

// KickGap is the least time between two ticks asked for by kicks. The
// first kick ticks at once; under a stream of bookings the kicks that
// arrive meanwhile are served by one tick after the gap instead of one
// tick each (the tick is level-triggered, so one covers them all).
var KickGap = 100 * time.Millisecond

func (s *Scheduler) kickedTick(ctx context.Context, lost <-chan struct{}) {
	_, _ = s.Tick(ctx, s.Clock.Now())
	select {
	case <-ctx.Done():
	case <-lost:
	case <-time.After(KickGap):
	}
}

// namedJob gives a cron job a name for logs.
type namedJob struct {
	name string
	run  func()
}

func (j namedJob) Run() { j.run() }

// Advance moves a manual clock to t minute by minute, ticking at every
// minute boundary passed (the test clock's POST /admin/clock). A standby
// portal only moves its clock: the leader's clock is the one that ticks.
func (s *Scheduler) Advance(ctx context.Context, clock *gpuportal.ManualClock, to time.Time) error {
	if s.standby.Load() {
		clock.Set(to)
		return nil
	}
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
