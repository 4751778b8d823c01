package plan

import (
	"time"

	"gpuportal"
)

// Snapshot is what the planner decides over: the part of the store that
// something may be due in, loaded by the store in the tick's transaction.
// It holds values only; the planner never reaches back into the store.
type Snapshot struct {
	Pools map[PoolKey]*Pool

	// Reservations that may have something due: ending, starting, short
	// of GPUs their failed nodes held, or near a reminder.
	Reservations []Reservation
	// Pending instances not placed yet, oldest first.
	Pending []PendingInstance
	// Lost instances: placed on nodes that went offline.
	Lost []LostInstance
	// Accounts of users whose spot or on-demand instances run.
	Accounts []Account
	// Jobs with queued tasks (see JobMayStart), oldest first, and what
	// their owners may still spend.
	Jobs   []JobQueue
	Owners map[int64]Owner
	// JobGPUs is how many GPUs each user's job tasks hold per pool (the
	// fairness between jobs).
	JobGPUs map[UserPool]int
	// Waitlist entries waiting or holding an offer, oldest first, and the
	// free reservable GPUs of every hour they ask for.
	Waitlist  []WaitEntry
	FreeHours map[PoolKey]map[int64]int
	// Idle is the instances launched with idle stop that run and are not
	// told to stop (books.go).
	Idle []IdleInstance
	// Budgets is the customers with a monthly budget, and Limits the team
	// members with a monthly spend limit, with this month's spend.
	Budgets []BudgetWatch
	Limits  []LimitWatch
	// Location is the site time zone, for pricing the window a flexible
	// waitlist entry books (off-peak hours are local) and for the month a
	// budget counts.
	Location *time.Location
	// VictimRule is how spot instances are picked to give GPUs back to
	// reservations and on-demand launches (gpuportal.VictimsByWorkLost
	// when empty; the simulator compares VictimsYoungest).
	VictimRule string
}

// PoolKey names a model in a region.
type PoolKey struct{ Model, Region string }

// UserPool is one user's share of a pool.
type UserPool struct {
	User int64
	Pool PoolKey
}

// Pool is one model's GPUs in one region. The counts are always loaded;
// the GPUs and spot instances only when DetailNeeded asks for them (a
// tick with nothing to decide in a pool reads no more of it).
type Pool struct {
	Key    PoolKey
	Model  gpuportal.Model
	Policy gpuportal.Policy

	Healthy int // healthy GPUs on online, non-draining nodes
	Held    int // GPUs placed instances hold
	// Booked is the GPUs confirmed reservations (and held waitlist
	// offers) take in each hour of the next day, by the hour's Unix time.
	Booked map[int64]int
	// Derived from Booked by the planner (see derive).
	ReservedSoon int // most GPUs reserved in any hour of the spot horizon
	// ReservedLead: the same within the rebalance lead (what spot
	// instances will have to give back soon, for the recommendation).
	ReservedLead int
	// ReservedAhead is the most GPUs reserved in any hour from now on, the
	// whole book (loaded by the store; at least what Booked shows): what
	// on-demand starts must leave.
	ReservedAhead int
	OnDemand      int // GPUs of placed on-demand instances
	OnDemandWait  int // GPUs of on-demand instances waiting for a place
	Spot          int // GPUs of placed spot instances without notice
	// LongestNotice is the longest notice (seconds) a spot instance of the
	// pool asked for at launch (0: none asked for more than the policy).
	LongestNotice int
	JobTaskSpot   int // of those, job tasks' (they give way to spot launches)
	SpotWait      int // GPUs of spot instances (not job tasks) waiting for a place
	// Leaving is the instances that have their notice: their GPUs are
	// busy until the deadline and grace are over.
	Leaving []Leaving

	// Detail: DetailFull is every healthy GPU on online, non-draining
	// nodes (by node and index) and the spot instances without notice;
	// DetailFree only the GPUs nobody holds — all that placing needs.
	Detail Detail
	GPUs   []GPU
	Spots  []Spot
	// Nodes are the online, non-draining nodes with healthy GPUs of the
	// pool (with any detail): where an instance with no GPU may run.
	Nodes []string
}

// Detail is how much of a pool the snapshot holds beyond its counts.
type Detail int

// Details, least first.
const (
	DetailNone Detail = iota
	DetailFree
	DetailFull
)

// GPU is one device of a pool.
type GPU struct {
	UUID, Node  string
	Holder      int64 // the instance holding it; 0 when idle
	Leaving     bool  // its holder has had its notice, or is being stopped
	Reservation int64 // the active reservation it is assigned to; 0 when none
}

// Leaving is an instance with notice: Count GPUs busy until FreeAt
// (deadline + grace).
type Leaving struct {
	Count  int
	FreeAt time.Time
}

// Spot is a placed spot instance without notice: a possible victim.
type Spot struct {
	ID        int64
	UserID    int64
	Count     int
	Node      string
	StartedAt time.Time
	JobTask   bool // an attempt of a job's task: spot work that yields to other spot work
	// LastCheckpoint is the workload's last checkpoint report (zero:
	// none since it started): the work an interruption loses is since then.
	LastCheckpoint time.Time
	Rebalanced     bool // it has had its rebalance recommendation
	NoticeSeconds  int  // the notice its launch asked for (0: the policy's)
}

// Reservation is a confirmed or active reservation.
type Reservation struct {
	ID, UserID    int64
	Pool          PoolKey
	Count         int
	Start, End    time.Time
	Status        gpuportal.ReservationStatus
	Lost          int // GPUs it held on nodes that failed or GPUs that broke
	RemindedStart bool
	RemindedEnd   bool
}

// PendingInstance waits for GPUs.
type PendingInstance struct {
	ID            int64
	UserID        int64
	Kind          gpuportal.InstanceKind
	Pool          PoolKey
	Count         int
	ReservationID int64  // a reserved instance's reservation
	LastNode      string // where it ran before an interruption
	Restarts      int
}

// LostInstance was placed on a node that went offline.
type LostInstance struct {
	ID           int64
	Kind         gpuportal.InstanceKind
	Interrupting bool
}

// Account is a user whose spot or on-demand instances run.
type Account struct {
	UserID    int64
	Balance   gpuportal.Balance
	LowNoted  bool // told that it runs low, not cleared since
	Stoppable int  // spot and on-demand instances without a stop yet
	Stopping  bool // some of its instances have the stop notice for lack of balance
}

// JobQueue is a job with queued tasks.
type JobQueue struct {
	ID, UserID      int64
	Pool            PoolKey
	Kind            gpuportal.JobKind
	GPUsPerTask     int
	MaxParallel     int
	OnDemandWorkers int
	LiveSpot        int // attempts running on spot
	LiveOnDemand    int
	Queued          []QueuedTask // its next queued tasks, at most what max_parallel leaves room for
	UnpaidNoted     bool
}

// QueuedTask is a task waiting for GPUs.
type QueuedTask struct {
	Index    int
	LastNode string // where its previous attempt ran: a retry goes elsewhere when it can
}

// Owner is what a job's owner may still start.
type Owner struct {
	Available gpuportal.Fen // money
	GPURoom   int           // GPUs their running quota leaves
}

// WaitEntry is a waitlist entry waiting or holding an offer.
type WaitEntry struct {
	ID, UserID   int64
	Pool         PoolKey
	Count        int
	Start, End   time.Time
	Status       gpuportal.WaitStatus
	OfferExpires time.Time
	AutoBook     bool
	// DurationHours > 0 makes the entry flexible: that many hours
	// anywhere in [Start, End), booked by itself when a window frees.
	DurationHours int
	// Price is what the entry's window costs at today's prices (exact
	// entries; a flexible one is priced by the window found), Available
	// what its owner has to spend: an entry its owner cannot pay holds no
	// capacity (it would keep it from those who can).
	Price, Available gpuportal.Fen
}

// Hours lists the whole hours of [start, end).
func Hours(start, end time.Time) []time.Time {
	var out []time.Time
	for t := start; t.Before(end); t = t.Add(time.Hour) {
		out = append(out, t)
	}
	return out
}

// SpotHorizon is how far ahead a spot instance must be safe to be placed,
// and how early a notice goes out: its notice and grace, plus a minute for
// the scheduler's next tick.
func SpotHorizon(p gpuportal.Policy) time.Duration {
	return time.Duration(p.SpotNoticeSeconds+p.SpotGraceSeconds+60) * time.Second
}

// PoolHorizon is the pool's spot horizon: the policy's, or longer when a
// spot instance of the pool asked for a longer notice — notices then go
// out earlier (a longer notice never makes a reservation late).
func PoolHorizon(pl *Pool) time.Duration {
	p := pl.Policy
	p.SpotNoticeSeconds = max(p.SpotNoticeSeconds, pl.LongestNotice)
	return SpotHorizon(p)
}

// RebalanceLead is how long before its notice is due a spot instance gets
// a rebalance recommendation (0: none): the policy's lead plus the
// notice horizon, since notices go out that long before the booked hour.
func RebalanceLead(p gpuportal.Policy) time.Duration {
	if p.RebalanceLeadMinutes <= 0 {
		return 0
	}
	return SpotHorizon(p) + time.Duration(p.RebalanceLeadMinutes)*time.Minute
}

// BookedAhead is how far ahead a pool's Booked hours must reach.
const BookedAhead = 24 * time.Hour

// reservedWithin is the most GPUs booked in any hour that overlaps
// [now, now+d].
func reservedWithin(pl *Pool, now time.Time, d time.Duration) int {
	most := 0
	for t := now.Truncate(time.Hour); !t.After(now.Add(d)); t = t.Add(time.Hour) {
		most = max(most, pl.Booked[t.Unix()])
	}
	return most
}

// derive sets what the planner reads of the reservation book: the most
// GPUs booked within the spot horizon (a notice goes out when a booked
// hour comes within it), and makes sure the book ahead counts at least
// the next day's hours it holds.
func derive(pl *Pool, now time.Time) {
	horizon := PoolHorizon(pl)
	pl.ReservedSoon = reservedWithin(pl, now, horizon)
	if lead := RebalanceLead(pl.Policy); lead > 0 {
		pl.ReservedLead = max(pl.ReservedSoon, reservedWithin(pl, now, horizon-SpotHorizon(pl.Policy)+lead))
	} else {
		pl.ReservedLead = 0
	}
	pl.ReservedAhead = max(pl.ReservedAhead, reservedWithin(pl, now, BookedAhead))
}
