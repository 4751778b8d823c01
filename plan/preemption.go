package plan

// Preemption, in one place: which spot instances give their GPUs back
// and when (preempt: for reservations, for on-demand demand, for waiting
// job tasks, and the rebalance recommendation ahead of them), the notice
// each one gets (interrupt), and the stop of a user whose balance ran out
// (balances). The victims among the candidates are chosen by the root's
// rule (gpuportal.SelectVictims, preemption.go), so the admin's "victims"
// setting and the simulator's what-if share it.

import (
	"slices"
	"time"

	"gpuportal"
)

// preempt gives notice, in every pool, to the spot instances that stand
// in the way of reservations starting within the spot horizon or of
// on-demand instances waiting for GPUs — the set that loses the least work
// since its checkpoint reports (gpuportal.SelectVictims); then spot
// instances waiting for GPUs take them from job tasks (fair share: the
// fewest, youngest first).
// A notice goes out at the first tick within the horizon of the start, so
// the workload gets exactly the policy's notice and its GPUs are free by
// the start.
func (p *planner) preempt() {
	for _, pl := range p.sortedPools() {
		if pl.Detail < DetailFull {
			continue
		}
		forRes := forReservations(pl, p.now)
		if total := forRes + pl.OnDemandWait; total > 0 {
			covered := 0
			for _, v := range gpuportal.SelectVictims(p.s.VictimRule, p.spotCandidates(pl, false), total, p.now) {
				reason := gpuportal.ReasonReservation
				if covered >= forRes {
					reason = gpuportal.ReasonOnDemand
				}
				covered += v.Count
				p.interrupt(pl, v.ID, reason)
			}
		}
		// Before their notices are due, the instances the book will want
		// back within the rebalance lead are told (once): a workload can
		// checkpoint early, and one that does becomes the cheaper victim.
		if need := forRebalance(pl, p.now); need > 0 {
			for _, v := range gpuportal.SelectVictims(p.s.VictimRule, p.spotCandidates(pl, false), need, p.now) {
				if !v.Rebalanced {
					p.out.Rebalance = append(p.out.Rebalance, Recommendation{InstanceID: v.ID, Node: nodeOf(pl, v.ID)})
				}
			}
		}
		// Job tasks already leaving count as gone (no second notice for
		// the same wait).
		if need := pl.SpotWait - roomAfterLeaving(pl); need > 0 {
			for _, v := range gpuportal.ChooseVictims(p.spotCandidates(pl, true), need) {
				p.interrupt(pl, v.ID, gpuportal.ReasonFairShare)
			}
		}
	}
}

// forReservations is how many GPUs spot instances must give back for the
// reservations of the spot horizon beside the on-demand instances — and
// beside instances already leaving that will still be on their GPUs when
// the next hour starts (a notice for other reasons shortly before a
// booked hour).
func forReservations(pl *Pool, now time.Time) int {
	return pl.ReservedSoon + pl.OnDemand + pl.Spot + leavingAfter(pl, now.Truncate(time.Hour).Add(time.Hour)) - pl.Healthy
}

// forRebalance is how many spot GPUs the book will want back within the
// rebalance lead: their instances get the recommendation first.
func forRebalance(pl *Pool, now time.Time) int {
	if pl.Policy.RebalanceLeadMinutes <= 0 {
		return 0
	}
	return pl.ReservedLead + pl.OnDemand + pl.Spot + leavingAfter(pl, now.Truncate(time.Hour).Add(time.Hour)) - pl.Healthy
}

// notice is how many spot GPUs must get their notice now: for reservations
// within the horizon and for on-demand instances waiting for GPUs.
func notice(pl *Pool, now time.Time) int { return forReservations(pl, now) + pl.OnDemandWait }

// spotCandidates lists the pool's spot instances that may get a notice,
// those of job tasks only when tasksOnly.
func (p *planner) spotCandidates(pl *Pool, tasksOnly bool) []gpuportal.SpotCandidate {
	var out []gpuportal.SpotCandidate
	for _, s := range pl.Spots {
		if p.stopped[s.UserID] || (tasksOnly && !s.JobTask) {
			continue
		}
		out = append(out, gpuportal.SpotCandidate{ID: s.ID, Count: s.Count, StartedAt: s.StartedAt, LastCheckpoint: s.LastCheckpoint, Rebalanced: s.Rebalanced})
	}
	return out
}

// interrupt gives a spot instance of the pool its notice: it leaves the
// candidates, and its GPUs count as leaving.
func (p *planner) interrupt(pl *Pool, id int64, reason gpuportal.InterruptReason) {
	k := slices.IndexFunc(pl.Spots, func(s Spot) bool { return s.ID == id })
	if k < 0 {
		return
	}
	s := pl.Spots[k]
	pl.Spots = slices.Delete(pl.Spots, k, k+1)
	pl.Spot -= s.Count
	if s.JobTask {
		pl.JobTaskSpot -= s.Count
	}
	for g := range pl.GPUs {
		if pl.GPUs[g].Holder == id {
			pl.GPUs[g].Leaving = true
		}
	}
	notice := pl.Policy.NoticeFor(s.NoticeSeconds)
	deadline := p.now.Add(time.Duration(notice) * time.Second)
	pl.Leaving = append(pl.Leaving, Leaving{Count: s.Count, FreeAt: deadline.Add(time.Duration(pl.Policy.SpotGraceSeconds) * time.Second)})
	p.out.Interrupt = append(p.out.Interrupt, Interruption{InstanceID: id, Node: s.Node, Reason: reason, Deadline: deadline, Grace: pl.Policy.SpotGraceSeconds})
}

// nodeOf is the node a spot instance of the pool runs on.
func nodeOf(pl *Pool, id int64) string {
	for _, s := range pl.Spots {
		if s.ID == id {
			return s.Node
		}
	}
	return ""
}

// AccountIsClear reports whether the balance rule (balances) can do
// nothing for an account this tick. lowest is the account's balance with
// its runs charged at the most they can have cost: the rule only ever
// compares the money left with thresholds, and more money never moves an
// account across one. If even the lowest lasts past twice
// LowBalanceWarning, the account is neither stopped nor warned; with no
// warning to reset and no stop to call off, the rule has nothing to do,
// and the snapshot may leave the account out (reading every run's exact
// cost was a fifth of each tick on a fleet of a thousand GPUs).
func AccountIsClear(lowest gpuportal.Balance, lowNoted, stopping bool, now time.Time) bool {
	return !lowNoted && !stopping && lowest.Available > 0 && !lowest.RunsOutWithin(2*gpuportal.LowBalanceWarning, now)
}

// balances keeps running instances paid for: a user at zero is stopped
// (reservations, paid in advance, are never touched), one who runs out
// within LowBalanceWarning is told once, and money that arrives during a
// stop's notice calls it off.
func (p *planner) balances() {
	for _, a := range p.s.Accounts {
		b := a.Balance
		if b.Available > 0 && a.Stopping {
			p.out.Balance = append(p.out.Balance, BalanceAction{UserID: a.UserID, Action: BalanceCallOff})
		}
		switch {
		case b.Available <= 0:
			if a.Stoppable > 0 {
				p.out.Balance = append(p.out.Balance, BalanceAction{UserID: a.UserID, Action: BalanceStop})
				p.stopped[a.UserID] = true
			}
		case b.RunsOutWithin(gpuportal.LowBalanceWarning, p.now) && !a.LowNoted:
			p.out.Balance = append(p.out.Balance, BalanceAction{UserID: a.UserID, Action: BalanceWarn})
		case !b.RunsOutWithin(2*gpuportal.LowBalanceWarning, p.now) && a.LowNoted:
			p.out.Balance = append(p.out.Balance, BalanceAction{UserID: a.UserID, Action: BalanceClear})
		}
	}
}
