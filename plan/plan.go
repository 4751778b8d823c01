package plan

import (
	"cmp"
	"slices"
	"time"

	"gpuportal"
)

// Decisions is what one tick decides (a plan); the store applies it in
// one transaction, in the order of its fields.
type Decisions struct {
	Complete   []int64      // reservations whose end has come
	Activate   []Assignment // reservations whose start has come, with their GPUs
	LostWork   []Outcome    // instances on failed nodes and how they end
	Replace    []Assignment // active reservations' replacement GPUs for failed ones
	Balance    []BalanceAction
	Interrupt  []Interruption // spot instances given notice (activation, preemption, fair share)
	Rebalance  []Recommendation
	Place      []Placement
	Tasks      []TaskStart
	UnpaidJobs []int64 // jobs whose owner is told that the balance holds their tasks back
	Waitlist   []WaitlistAction
	Reminders  []Reminder
	// The watch over customers' own settings (books.go).
	IdleMarks     []IdleMark
	IdleStops     []IdleInstance
	BudgetNotices []BudgetNotice
	LimitNotices  []LimitNotice
}

// Empty reports whether the plan does nothing.
func (p Decisions) Empty() bool {
	return len(p.Complete)+len(p.Activate)+len(p.LostWork)+len(p.Replace)+len(p.Balance)+len(p.Interrupt)+len(p.Rebalance)+len(p.Place)+
		len(p.Tasks)+len(p.UnpaidJobs)+len(p.Waitlist)+len(p.Reminders)+len(p.IdleMarks)+len(p.IdleStops)+len(p.BudgetNotices)+len(p.LimitNotices) == 0
}

// Assignment gives a reservation concrete GPUs; Missing is how many could
// not be found (refunded pro rata).
type Assignment struct {
	ReservationID int64
	GPUs          []string
	Missing       int
	Cause         string // why some are missing: gpuportal.Short*
}

// Outcome is how an instance on a failed node ends.
type Outcome struct {
	InstanceID int64
	Status     gpuportal.InstanceStatus // interrupted (spot) or failed
	Notice     bool                     // a spot instance that had no notice yet gets one, for the rates
}

// BalanceVerb is what the balance rule does for a user.
type BalanceVerb string

// Balance actions.
const (
	BalanceStop    BalanceVerb = "stop"     // at zero: spot and on-demand instances get the stop notice
	BalanceWarn    BalanceVerb = "warn"     // runs out within LowBalanceWarning: told once
	BalanceClear   BalanceVerb = "clear"    // topped up well clear: a later run-down is told again
	BalanceCallOff BalanceVerb = "call_off" // money again: stops for lack of it are called off
)

// BalanceAction is what the balance rule decides for one user.
type BalanceAction struct {
	UserID int64
	Action BalanceVerb
}

// Interruption gives a spot instance its notice.
type Interruption struct {
	InstanceID int64
	Node       string
	Reason     gpuportal.InterruptReason
	Deadline   time.Time
	Grace      int // seconds
}

// Placement puts a pending instance on GPUs of one node.
type Placement struct {
	InstanceID int64
	Node       string
	GPUs       []string
	Restarted  bool // an auto-restarted spot instance: its owner is told
}

// TaskStart starts a job's queued task as a new instance attempt.
type TaskStart struct {
	JobID     int64
	TaskIndex int
	Kind      gpuportal.InstanceKind
	Node      string
	GPUs      []string
	Price     gpuportal.Fen // per GPU-hour
}

// WaitlistVerb is what the waitlist rule does with an entry.
type WaitlistVerb string

// Waitlist actions.
const (
	WaitlistExpireOffer WaitlistVerb = "expire_offer" // the claim window passed
	WaitlistExpireEntry WaitlistVerb = "expire_entry" // the window started while it waited (a flexible entry: its last possible start passed)
	WaitlistOffer       WaitlistVerb = "offer"        // capacity freed: held for the claim window
	WaitlistBook        WaitlistVerb = "book"         // capacity freed for an auto_book (or flexible) entry
	WaitlistUnpaid      WaitlistVerb = "unpaid"       // capacity freed for an auto_book entry its owner cannot pay: told once, nothing held
)

// WaitlistAction is one decision about a waitlist entry.
type WaitlistAction struct {
	EntryID int64
	Action  WaitlistVerb
	Expires time.Time // of an offer
	// Start and End are the window a flexible entry books (zero for an
	// exact entry: its own window).
	Start, End time.Time
}

// Recommendation is a rebalance recommendation for a spot instance: the
// book will want its GPUs within the policy's lead.
type Recommendation struct {
	InstanceID int64
	Node       string
}

// Reminder is a notification due about a reservation.
type Reminder struct {
	ReservationID int64
	Kind          string // gpuportal.NoteReservationStarts or NoteReservationEnds
}

// Reminder lead times: owners are told an hour before their reservation
// starts and 40 minutes before it ends, once each.
const (
	StartReminderLead = time.Hour
	EndReminderLead   = 40 * time.Minute
)

// TickResult counts what one tick did.
type TickResult struct {
	Activated, Completed, Interrupted, Placed, NodeFailures, Offers, TasksStarted int
	// Launched counts the instances reservations started by themselves
	// (their launch specs); the next tick places them.
	Launched int
	// Failed counts the decisions that could not be carried out: each was
	// rolled back alone and recorded, and the rest of the tick applied.
	Failed int
}

// Result counts what a plan does.
func (p Decisions) Result() TickResult {
	r := TickResult{Activated: len(p.Activate), Completed: len(p.Complete), Interrupted: len(p.Interrupt), Placed: len(p.Place),
		NodeFailures: len(p.LostWork), TasksStarted: len(p.Tasks)}
	for _, w := range p.Waitlist {
		if w.Action == WaitlistOffer || w.Action == WaitlistBook {
			r.Offers++
		}
	}
	return r
}

// planner holds a plan under construction and the snapshot it changes in
// memory as decisions are made, so that later steps see earlier ones
// (a GPU given to a reservation is not given to a spot instance too).
type planner struct {
	s       Snapshot
	now     time.Time
	out     Decisions
	stopped map[int64]bool // users whose instances get the balance stop
}

// Plan decides everything due by now over the snapshot: reservations end
// and start (getting GPUs, packed onto as few nodes as possible), work on
// failed nodes ends, users who cannot pay are stopped, spot instances that
// stand in the way of reservations or on-demand demand get their notice
// (the fewest, youngest first), pending instances and job tasks are
// placed, freed capacity is offered to the waitlist (first fit),
// reminders go out, instances idle for their idle-stop minutes are
// stopped, and budget notices go out. It changes the snapshot's pools as
// it decides.
func Plan(s Snapshot, now time.Time) Decisions {
	p := &planner{s: s, now: now, stopped: map[int64]bool{}}
	for _, pl := range s.Pools {
		derive(pl, now)
	}
	p.reservations()
	p.lostWork()
	p.balances()
	p.preempt()
	p.place()
	p.jobs()
	p.waitlist()
	p.reminders()
	p.idleStops()
	p.budgets()
	return p.out
}

// sortedPools lists the snapshot's pools in a fixed order (plans are
// deterministic: the simulator's same seed gives the same report).
func (p *planner) sortedPools() []*Pool {
	out := make([]*Pool, 0, len(p.s.Pools))
	for _, pl := range p.s.Pools {
		out = append(out, pl)
	}
	slices.SortFunc(out, func(a, b *Pool) int {
		return cmp.Or(cmp.Compare(a.Key.Model, b.Key.Model), cmp.Compare(a.Key.Region, b.Key.Region))
	})
	return out
}

// DetailNeeded says which pools' GPUs the planner will look at, and how
// much of them: all (and the spot instances) where a reservation starts or
// lost GPUs or spot instances must make way; the idle ones where an
// instance or a job's task waits that the pool's counts say could be
// placed. Elsewhere the counts are enough (a full pool with a queue of
// spot launches costs no more than an idle one).
func DetailNeeded(s Snapshot, now time.Time) map[PoolKey]Detail {
	need := map[PoolKey]Detail{}
	at := func(key PoolKey, d Detail) { need[key] = max(need[key], d) }
	for _, pl := range s.Pools {
		derive(pl, now)
	}
	for _, r := range s.Reservations {
		if r.End.After(now) && ((r.Status == gpuportal.ReservationConfirmed && !r.Start.After(now)) || r.Lost > 0) {
			at(r.Pool, DetailFull)
		}
	}
	for key, pl := range s.Pools {
		if notice(pl, now) > 0 || forRebalance(pl, now) > 0 || (pl.SpotWait > roomAfterLeaving(pl) && pl.JobTaskSpot > 0) {
			at(key, DetailFull)
		}
	}
	for _, i := range s.Pending {
		if pl := s.Pools[i.Pool]; pl != nil && mayPlace(pl, i) {
			at(i.Pool, DetailFree)
		}
	}
	for _, j := range s.Jobs {
		if pl := s.Pools[j.Pool]; pl != nil && JobMayStart(pl, j, now) {
			at(j.Pool, DetailFree)
		}
	}
	return need
}

// mayPlace reports whether the pool's counts leave room for the pending
// instance (whether a node has it is the detail's question).
func mayPlace(pl *Pool, i PendingInstance) bool {
	if pl.Healthy-pl.Held < i.Count {
		return false
	}
	switch i.Kind {
	case gpuportal.KindOnDemand:
		return onDemandFits(pl, i.Count, true)
	case gpuportal.KindSpot:
		return spotRoom(pl) >= i.Count
	}
	return true // reserved: on its reservation's GPUs
}

// JobMayStart reports whether the pool's counts leave room for a task of
// the job: the common case of a full fleet then costs nothing more.
func JobMayStart(pl *Pool, j JobQueue, now time.Time) bool {
	derive(pl, now)
	if pl.Healthy-pl.Held < j.GPUsPerTask {
		return false
	}
	if j.Kind == gpuportal.JobHybrid && j.LiveOnDemand < j.OnDemandWorkers && onDemandFits(pl, j.GPUsPerTask, false) {
		return true
	}
	return jobRoom(pl) >= j.GPUsPerTask
}
