package plan

import (
	"time"

	"gpuportal"
)

// The planner's last two steps keep watch over each customer's own
// settings: instances launched with idle stop, and monthly budgets and
// team members' spend limits.

// IdleInstance is an instance launched with idle stop that runs and has
// not been told to stop.
type IdleInstance struct {
	ID, UserID int64
	Node       string
	Pool       PoolKey
	Kind       gpuportal.InstanceKind
	Count      int
	Minutes    int // its idle_stop_minutes
	// IdleSince is when a tick first saw it idle (zero: in use at the
	// last tick).
	IdleSince time.Time
	// InUse: a GPU of it reads above 0 % utilisation in the node's latest
	// telemetry, or an interactive session (SSH, the web terminal) is open.
	InUse bool
}

// IdleMark records that an instance is idle from Since on, or (zero
// Since) in use again.
type IdleMark struct {
	InstanceID int64
	Since      time.Time
}

// idleStops follows each idle-stop instance: idle from the first tick that
// sees it so, in use again at the first that does not; once idle for its
// minutes it is stopped as its owner would stop it.
func (p *planner) idleStops() {
	for _, i := range p.s.Idle {
		if i.InUse {
			if !i.IdleSince.IsZero() {
				p.out.IdleMarks = append(p.out.IdleMarks, IdleMark{InstanceID: i.ID})
			}
			continue
		}
		since := i.IdleSince
		if since.IsZero() {
			since = p.now
			p.out.IdleMarks = append(p.out.IdleMarks, IdleMark{InstanceID: i.ID, Since: since})
		}
		if gpuportal.IdleStopDue(since, i.Minutes, p.now) {
			p.out.IdleStops = append(p.out.IdleStops, i)
		}
	}
}

// BudgetWatch is a customer's monthly budget and what they spent this
// month.
type BudgetWatch struct {
	UserID         int64
	Monthly, Spent gpuportal.Fen
	Noticed        string // the last budget notice: "2026-12:80", or ""
}

// LimitWatch is a team member's monthly spend limit and what they spent
// of the team's money this month.
type LimitWatch struct {
	TeamID, Member  int64
	TeamName, Email string
	Limit, Spent    gpuportal.Fen
	Noticed         string // the last notice: "2026-12:80", or ""
}

// BudgetNotice tells a customer that a level of their monthly budget is
// spent (Noticed is what is remembered of it).
type BudgetNotice struct {
	UserID  int64
	Budget  gpuportal.Budget
	Noticed string
}

// LimitNotice tells a team member that a level of their monthly limit is
// spent — and the team's owners too once all of it is.
type LimitNotice struct {
	Watch      LimitWatch
	Budget     gpuportal.Budget
	Noticed    string
	TellOwners bool
}

// budgets tells each customer whose spend this month reached a level of
// their budget, and each team member of their limit, once per level a
// month (site time).
func (p *planner) budgets() {
	_, month := gpuportal.BudgetMonth(p.now, p.s.Location)
	for _, w := range p.s.Budgets {
		b := gpuportal.NewBudget(w.Monthly, w.Spent)
		if level := b.Level(); gpuportal.BudgetNoticeDue(w.Noticed, month, level) {
			p.out.BudgetNotices = append(p.out.BudgetNotices, BudgetNotice{UserID: w.UserID, Budget: b, Noticed: gpuportal.BudgetNoticed(month, level)})
		}
	}
	for _, w := range p.s.Limits {
		b := gpuportal.NewBudget(w.Limit, w.Spent)
		if level := b.Level(); gpuportal.BudgetNoticeDue(w.Noticed, month, level) {
			p.out.LimitNotices = append(p.out.LimitNotices, LimitNotice{Watch: w, Budget: b, Noticed: gpuportal.BudgetNoticed(month, level), TellOwners: level >= 100})
		}
	}
}
