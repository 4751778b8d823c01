package simulate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gpuportal"
	"gpuportal/store"
)

// Options are what to simulate.
type Options struct {
	Scenario Scenario
	Days     int
	// Policies to run under; nil: the defaults.
	Policies *gpuportal.Policies
	// Reference is the policies the scenario's demand was seen under: spot
	// demand follows the run's spot prices against these (see
	// Scenario.SpotPriceElasticity). nil: the run's own, so the demand is
	// exactly as written.
	Reference *gpuportal.Policies
	// Start is the first hour simulated (default: the next Monday 00:00
	// of the site time zone after 2026-01-01, so runs compare).
	Start    time.Time
	Location *time.Location
	// Progress, when set, is told the fraction done now and then.
	Progress func(done float64)
}

// MaxDays is the longest simulation.
const MaxDays = 90

// Run simulates the scenario and reports.
func Run(ctx context.Context, opt Options) (*Report, error) {
	if err := opt.Scenario.Validate(); err != nil {
		return nil, err
	}
	if opt.Days < 1 || opt.Days > MaxDays {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "days", "Simulate 1 to %d days.", MaxDays)
	}
	if opt.Location == nil {
		opt.Location = time.UTC
	}
	if opt.Start.IsZero() {
		opt.Start = firstMonday(opt.Location)
	}
	s, err := newSim(ctx, opt)
	if err != nil {
		return nil, err
	}
	defer s.db.Close()
	if err := s.run(ctx); err != nil {
		return nil, err
	}
	return s.report(ctx)
}

func firstMonday(loc *time.Location) time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
	for t.Weekday() != time.Monday {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

// sim is one simulation in progress.
type sim struct {
	opt       Options
	db        *store.DB
	clock     *gpuportal.ManualClock
	admin     *gpuportal.User
	customers []*gpuportal.User
	fleet     *fleet
	events    []event
	policies  gpuportal.Policies
	end       time.Time
	// spotFactors scale each model's spot demand to the run's spot prices.
	spotFactors map[string]float64

	// what customers asked for and got
	bookings, booked, waitlisted, cancelled int
	// flexible customers whose window was full: booked at once from the
	// offerings, or put on a flexible waitlist entry
	flexibleFull, flexibleOffered, flexibleWaitlisted int
	spotAsked, spotRefused                            int
	spotWorkAsked                                     int64 // GPU-seconds
	onDemandAsked, onDemandRefused                    int
	jobs, jobsRefused                                 int
	reservationsStarted, onTime                       int
	refusals                                          map[string]int // by error code
	checkedStarts                                     map[int64]bool
	reservationOf                                     map[int]int64 // booking event seq → reservation, for cancellations
}

func newSim(ctx context.Context, opt Options) (*sim, error) {
	clock := gpuportal.NewManualClock(opt.Start.Add(-time.Hour))
	db, err := store.OpenScratch(ctx, clock)
	if err != nil {
		return nil, err
	}
	db.Location = opt.Location
	db.Wall = clock // notices count in business time here: there is no real agent
	db.VictimRule = opt.Scenario.Victims
	fl := newFleet(db)
	fl.checkpointEvery = time.Duration(opt.Scenario.CheckpointMinutes) * time.Minute
	fl.checkpointShare = opt.Scenario.CheckpointShare
	if fl.checkpointShare == 0 {
		fl.checkpointShare = 1
	}
	s := &sim{opt: opt, db: db, clock: clock, fleet: fl, refusals: map[string]int{}, checkedStarts: map[int64]bool{}, reservationOf: map[int]int64{},
		end: opt.Start.Add(time.Duration(opt.Days) * 24 * time.Hour)}
	if err := s.setUp(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("simulate: set up: %w", err)
	}
	reference := s.policies
	if opt.Reference != nil {
		reference = *opt.Reference
	}
	s.spotFactors = SpotDemandFactors(opt.Scenario, s.policies, reference)
	s.events = generate(opt.Scenario, opt.Start, opt.Days, opt.Location, s.spotFactors)
	return s, nil
}

// setUp migrates the store, sets the policies, adds the fleet and the
// customers (with money and quotas enough for the scenario).
func (s *sim) setUp(ctx context.Context) error {
	if _, err := s.db.Migrate(ctx); err != nil {
		return err
	}
	admin, err := s.db.CreateLoginlessUser(ctx, "admin@simulate.invalid", "Simulator", gpuportal.RoleAdmin)
	if err != nil {
		return err
	}
	s.admin = admin
	s.policies = gpuportal.DefaultPolicies()
	if s.opt.Policies != nil {
		s.policies = *s.opt.Policies
	}
	if err := s.db.SetPolicies(ctx, admin, s.policies); err != nil {
		return err
	}
	models, err := s.db.Models(ctx)
	if err != nil {
		return err
	}
	for k, part := range s.opt.Scenario.Fleet {
		if listPrice(models, part.Model) == 0 {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "fleet", "Unknown GPU model %q.", part.Model)
		}
		for n := 1; n <= part.Nodes; n++ {
			node := gpuportal.Node{ID: fmt.Sprintf("sim-%d-%d", k, n), Hostname: fmt.Sprintf("sim-%d-%d.simulate", k, n), Region: part.Region, State: gpuportal.NodeOnline}
			for g := range part.GPUsPerNode {
				node.GPUs = append(node.GPUs, gpuportal.GPU{UUID: fmt.Sprintf("GPU-sim-%d-%d-%d", k, n, g), Index: g, Model: part.Model, Name: part.Model, Healthy: true, MemoryTotalMiB: 81920})
			}
			if err := s.db.AddNode(ctx, node); err != nil {
				return fmt.Errorf("add node %s: %w", node.ID, err)
			}
		}
	}
	quotas := gpuportal.Quotas{MaxRunningGPUs: 100_000, MaxBookedGPUHours: 100_000_000, MaxWaitlistEntries: 10_000, MaxQueuedTasks: 1_000_000}
	for c := range s.opt.Scenario.Customers {
		u, err := s.db.CreateLoginlessUser(ctx, fmt.Sprintf("customer-%d@simulate.invalid", c+1), fmt.Sprintf("Customer %d", c+1), gpuportal.RoleCustomer)
		if err != nil {
			return err
		}
		if _, err := s.db.UpdateAccount(ctx, admin, u.ID, store.AccountUpdate{Quotas: &quotas}); err != nil {
			return err
		}
		if _, err := s.db.Credit(ctx, admin, u.ID, gpuportal.CreditRequest{Amount: gpuportal.MaxCredit, Note: "simulation"}); err != nil {
			return err
		}
		s.customers = append(s.customers, u)
	}
	return nil
}

// run steps through the period: at every step, the customers' actions
// due, a tick, and the nodes doing what they are told (and a tick again
// when that freed GPUs, as the portal's kick would).
//
// A step that only a workload's end or deadline brought (no customer
// acted, no checkpoint was reported, no hour or notice minute is due)
// starts with the nodes instead: its first tick would see what the last
// one saw and decide nothing, so only the kick's tick after the nodes
// runs.
func (s *sim) run(ctx context.Context) error {
	now := s.opt.Start
	next := 0
	workloadsOnly := false
	for now.Before(s.end) {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.clock.Set(now)
		for next < len(s.events) && !s.events[next].at.After(now) {
			if err := s.act(ctx, s.events[next]); err != nil {
				return err
			}
			next++
		}
		checkpointed, err := s.fleet.checkpoint(ctx, s.clock, now)
		if err != nil {
			return err
		}
		quiet := workloadsOnly && !checkpointed
		for round := 0; round < 5; round++ {
			if round > 0 || !quiet {
				if _, err := s.db.Tick(ctx, now); err != nil {
					return err
				}
			}
			freed, err := s.fleet.reconcile(ctx, now)
			if err != nil {
				return err
			}
			// The portal's kick would tick again; when nothing in their
			// pools waits for the freed GPUs that tick places nothing (its
			// time's decisions are made), so the simulation skips it.
			waits, err := s.db.WaitsForGPUs(ctx, freed)
			if err != nil {
				return err
			}
			if !waits {
				break
			}
		}
		if now.Minute() == 0 && now.Second() == 0 {
			if err := s.checkStarts(ctx, now); err != nil {
				return err
			}
			if s.opt.Progress != nil {
				s.opt.Progress(now.Sub(s.opt.Start).Hours() / s.end.Sub(s.opt.Start).Hours())
			}
		}
		now, workloadsOnly = s.nextStep(now, next)
	}
	s.clock.Set(s.end)
	if _, err := s.db.Tick(ctx, s.end); err != nil {
		return err
	}
	s.fleet.finish(s.end)
	return nil
}

// nextStep is the next time anything can happen: a customer's action, a
// workload finishing or reaching its deadline, a whole hour (bookings
// start and end), or the minute a notice for the next hour falls due
// (the first minute within notice + grace + a minute of it, as the
// portal's minute-by-minute cron would find it). workloadsOnly says that
// nothing but a workload's end or deadline falls at it.
func (s *sim) nextStep(now time.Time, next int) (at time.Time, workloadsOnly bool) {
	candidates := []time.Time{now.Truncate(time.Hour).Add(time.Hour), s.end}
	if next < len(s.events) {
		candidates = append(candidates, s.events[next].at)
	}
	for _, p := range s.noticeLeads() {
		for _, hour := range []time.Time{now.Truncate(time.Hour).Add(time.Hour), now.Truncate(time.Hour).Add(2 * time.Hour)} {
			at := hour.Add(-p)
			if at.Truncate(time.Minute) != at {
				at = at.Truncate(time.Minute).Add(time.Minute)
			}
			candidates = append(candidates, at)
		}
	}
	out := s.end
	for _, t := range candidates {
		if t.After(now) && t.Before(out) {
			out = t
		}
	}
	if t := s.fleet.next(now); !t.IsZero() && t.Before(out) {
		return t, true
	}
	return out, false
}

// noticeLeads lists the distinct spot horizons of the policies in force.
func (s *sim) noticeLeads() []time.Duration {
	leads := []time.Duration{horizon(s.policies.Global)}
	for model := range s.policies.Models {
		if d := horizon(s.policies.For(model)); !slices.Contains(leads, d) {
			leads = append(leads, d)
		}
	}
	return leads
}

func horizon(p gpuportal.Policy) time.Duration {
	return time.Duration(p.SpotNoticeSeconds+p.SpotGraceSeconds+60) * time.Second
}

// bookFlexibly is a flexible customer's answer to a full window: the
// earliest offering of the same shape up to their latest end, booked; or,
// when none fits now, a flexible waitlist entry over that range (waiting;
// its booking, if one frees, is counted at the end).
func (s *sim) bookFlexibly(ctx context.Context, u *gpuportal.User, e event) (r *gpuportal.Reservation, waiting bool, err error) {
	hours := int(e.end.Sub(e.start) / time.Hour)
	search := gpuportal.OfferingRequest{Model: e.model, Region: e.region, Count: e.count, DurationHours: hours,
		Earliest: e.start, LatestEnd: e.latestEnd, Sort: gpuportal.OfferingsByStart, Limit: 1}
	found, err := s.db.Offerings(ctx, search)
	if err != nil {
		return nil, false, err
	}
	if len(found) > 0 {
		r, err := s.db.Book(ctx, u, found[0].Booking(e.model, e.region))
		if err == nil {
			s.flexibleOffered++
			return r, false, nil
		}
		if gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
			return nil, false, err
		}
	}
	if _, err := s.db.JoinFlexibleWaitlist(ctx, u, search); err != nil {
		return nil, false, err
	}
	s.flexibleWaitlisted++
	s.waitlisted++
	return nil, true, nil
}

// act carries out one customer action through the same store calls the
// API makes. A refusal (4xx) is counted, not an error.
func (s *sim) act(ctx context.Context, e event) error {
	u := s.customers[e.customer]
	var err error
	switch e.kind {
	case eventBook:
		s.bookings++
		req := gpuportal.BookingRequest{Model: e.model, Region: e.region, Count: e.count, Start: e.start, End: e.end}
		var r *gpuportal.Reservation
		r, err = s.db.Book(ctx, u, req)
		if gpuportal.ErrorCode(err) == gpuportal.ECAPACITY && !e.latestEnd.IsZero() {
			s.flexibleFull++
			var waiting bool
			if r, waiting, err = s.bookFlexibly(ctx, u, e); waiting {
				break
			}
		}
		if gpuportal.ErrorCode(err) == gpuportal.ECAPACITY && e.waitlist {
			if _, err = s.db.JoinWaitlist(ctx, u, req, true); err == nil {
				s.waitlisted++
			}
		} else if err == nil {
			s.booked++
			if !e.cancelAt.IsZero() {
				s.scheduleCancel(e, r.ID)
			}
		}
	case "cancel":
		if _, err = s.db.Cancel(ctx, u, s.reservationOf[e.seq]); err == nil {
			s.cancelled++
		}
	case eventSpot, eventOnDemand:
		kind := gpuportal.KindSpot
		if e.kind == eventOnDemand {
			kind = gpuportal.KindOnDemand
			s.onDemandAsked++
		} else {
			s.spotAsked++
			s.spotWorkAsked += int64(e.work/time.Second) * int64(e.count)
		}
		var in *gpuportal.Instance
		in, err = s.db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: kind, Model: e.model, Region: e.region, Count: e.count, Command: "simulated work", AutoRestart: e.autoRestart})
		if err == nil {
			s.fleet.left[fmt.Sprintf("instance-%d", in.ID)] = e.work
		} else if kind == gpuportal.KindSpot {
			s.spotRefused++
		} else {
			s.onDemandRefused++
		}
	case eventJob:
		s.jobs++
		var j *gpuportal.Job
		j, err = s.db.CreateJob(ctx, u, gpuportal.JobRequest{Name: fmt.Sprintf("simulated job %d", e.seq), Model: e.model, Region: e.region, GPUsPerTask: e.count,
			Tasks: len(e.taskWork), Command: "simulated task", MaxParallel: e.maxParallel, Kind: gpuportal.JobSpot})
		if err == nil {
			for k, w := range e.taskWork {
				s.fleet.left[fmt.Sprintf("job-%d-task-%d", j.ID, k)] = w
			}
		} else {
			s.jobsRefused++
		}
	}
	if err != nil {
		code := gpuportal.ErrorCode(err)
		if code == gpuportal.EINTERNAL {
			return fmt.Errorf("simulate %s at %s: %w", e.kind, e.at.Format(time.RFC3339), err)
		}
		s.refusals[code]++
	}
	return nil
}

// scheduleCancel puts the cancellation of a booking among the events,
// in time order.
func (s *sim) scheduleCancel(e event, reservationID int64) {
	c := event{at: e.cancelAt, seq: len(s.events) + 1_000_000, kind: "cancel", customer: e.customer}
	s.reservationOf[c.seq] = reservationID
	k, _ := slices.BinarySearchFunc(s.events, c, func(a, b event) int {
		if a.at.Equal(b.at) {
			return -1 // after those already at the same time
		}
		return a.at.Compare(b.at)
	})
	s.events = slices.Insert(s.events, k, c)
}

// checkStarts looks at the reservations starting now: on time when they
// are active with all their GPUs and nobody else's work is on them. (Of
// the upcoming ones: that list is read by status and start, where every
// reservation's start was read to find the few starting now.)
func (s *sim) checkStarts(ctx context.Context, now time.Time) error {
	list, err := s.db.Reservations(ctx, s.admin, store.ReservationFilter{StartAt: now, Tab: store.TabUpcoming, Limit: 1000})
	if err != nil {
		return err
	}
	for _, r := range list {
		if r.Status == gpuportal.ReservationCancelled || s.checkedStarts[r.ID] {
			continue
		}
		s.checkedStarts[r.ID] = true
		s.reservationsStarted++
		if r.Status == gpuportal.ReservationActive && len(r.GPUs) == r.Count && !s.fleet.busy(r.GPUs) {
			s.onTime++
		}
	}
	return nil
}
