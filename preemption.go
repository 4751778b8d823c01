package gpuportal

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"
)

// How the scheduler picks the spot instances to interrupt when it needs
// GPUs back (DESIGN §2, work-preserving preemption).
const (
	// VictimsByWorkLost: the set that frees the GPUs needed and loses the
	// least GPU-seconds since the instances' last checkpoint reports (since
	// their start when none); ties: the youngest. The default.
	VictimsByWorkLost = "work_lost"
	// VictimsYoungest: the fewest instances, youngest first — the rule
	// before checkpoint reports, kept for fair share between job tasks and
	// for comparing in `portal simulate`.
	VictimsYoungest = "youngest"
)

// SpotCandidate is a running spot instance the scheduler could interrupt:
// its GPUs and what interrupting it now would lose.
type SpotCandidate struct {
	ID        int64
	Count     int
	StartedAt time.Time
	// LastCheckpoint is its workload's last checkpoint report (zero: none
	// since it started).
	LastCheckpoint time.Time
	Rebalanced     bool // it has had its rebalance recommendation
}

// WorkAtRisk is the GPU-seconds of work since the candidate's last
// checkpoint report (or its start): what an interruption at now loses.
func (c SpotCandidate) WorkAtRisk(now time.Time) int64 {
	return LostGPUSeconds(c.Count, c.StartedAt, c.LastCheckpoint, now)
}

// LostGPUSeconds is the work an instance of count GPUs loses when it stops
// at stop: GPUs × seconds since its last checkpoint report, or since it
// started when it reported none.
func LostGPUSeconds(count int, startedAt, lastCheckpoint, stop time.Time) int64 {
	since := startedAt
	if lastCheckpoint.After(since) {
		since = lastCheckpoint
	}
	if !stop.After(since) {
		return 0
	}
	return int64(count) * int64(stop.Sub(since)/time.Second)
}

// SelectVictims picks spot instances to interrupt to free at least need
// GPUs under a rule (VictimsByWorkLost when empty).
func SelectVictims(rule string, spots []SpotCandidate, need int, now time.Time) []SpotCandidate {
	if rule == VictimsYoungest {
		return ChooseVictims(spots, need)
	}
	return ChooseVictimsByWorkLost(spots, need, now)
}

// ChooseVictimsByWorkLost picks the set of spot instances that frees at
// least need GPUs and loses the least work (WorkAtRisk, summed); among
// sets that lose the same, the youngest (the smallest sum of ages). An
// instance that checkpointed a moment ago costs almost nothing, so it
// goes first. It is a 0/1 covering knapsack over the GPUs needed: linear
// in candidates × need. With too few GPUs among the candidates, all go.
func ChooseVictimsByWorkLost(spots []SpotCandidate, need int, now time.Time) []SpotCandidate {
	if need <= 0 || len(spots) == 0 {
		return nil
	}
	total := 0
	for _, c := range spots {
		total += c.Count
	}
	if total <= need {
		return append([]SpotCandidate(nil), spots...)
	}
	// Youngest first, so that between equal sets the first found (kept:
	// only a strictly better one replaces it) is the younger.
	cands := append([]SpotCandidate(nil), spots...)
	slices.SortStableFunc(cands, func(a, b SpotCandidate) int { return b.StartedAt.Compare(a.StartedAt) })
	type score struct{ work, age int64 }
	better := func(a, b score) bool { return a.work < b.work || (a.work == b.work && a.age < b.age) }
	unreachable := score{math.MaxInt64, math.MaxInt64}
	best := make([]score, need+1) // best[j]: the cheapest way found to free at least j GPUs
	for j := 1; j <= need; j++ {
		best[j] = unreachable
	}
	took := make([][]bool, len(cands)) // took[i][j]: candidate i is in best[j] after considering 0..i
	for i, c := range cands {
		took[i] = make([]bool, need+1)
		add := score{c.WorkAtRisk(now), int64(max(0, now.Sub(c.StartedAt)) / time.Second)}
		for j := need; j >= 1; j-- {
			from := best[max(0, j-c.Count)]
			if from == unreachable {
				continue
			}
			if cand := (score{from.work + add.work, from.age + add.age}); better(cand, best[j]) {
				best[j], took[i][j] = cand, true
			}
		}
	}
	var out []SpotCandidate
	for i, j := len(cands)-1, need; i >= 0 && j > 0; i-- {
		if took[i][j] {
			out = append(out, cands[i])
			j = max(0, j-cands[i].Count)
		}
	}
	slices.SortStableFunc(out, func(a, b SpotCandidate) int { return cmp.Compare(a.WorkAtRisk(now), b.WorkAtRisk(now)) })
	return out
}

// ChooseVictims picks spot instances to interrupt to free at least need
// GPUs: as few instances as possible, and among the sets that small, the
// youngest instances first.
func ChooseVictims(spots []SpotCandidate, need int) []SpotCandidate {
	if need <= 0 || len(spots) == 0 {
		return nil
	}
	bySize := append([]SpotCandidate(nil), spots...)
	sort.SliceStable(bySize, func(i, j int) bool { return bySize[i].Count > bySize[j].Count })
	// The k largest free the most any k can: the smallest such k that
	// covers need is the fewest instances possible.
	k, sum := 0, 0
	for k < len(bySize) && sum < need {
		sum += bySize[k].Count
		k++
	}
	byAge := append([]SpotCandidate(nil), spots...)
	sort.SliceStable(byAge, func(i, j int) bool { return byAge[i].StartedAt.After(byAge[j].StartedAt) })
	taken := map[int64]bool{}
	var out []SpotCandidate
	left := need
	for slot := k; slot > 0; slot-- {
		for _, c := range byAge {
			if taken[c.ID] {
				continue
			}
			// Can the other slot-1 picks (the largest left) cover the rest?
			rest, n := 0, 0
			for _, b := range bySize {
				if n == slot-1 {
					break
				}
				if !taken[b.ID] && b.ID != c.ID {
					rest += b.Count
					n++
				}
			}
			if c.Count+rest >= left {
				taken[c.ID] = true
				out = append(out, c)
				left -= c.Count
				break
			}
		}
	}
	return out
}
