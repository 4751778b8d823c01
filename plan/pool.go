package plan

import (
	"slices"
	"time"

	"gpuportal"
)

// leavingAfter is how many GPUs instances with notice still hold at t.
func leavingAfter(pl *Pool, t time.Time) int {
	n := 0
	for _, l := range pl.Leaving {
		if l.FreeAt.After(t) {
			n += l.Count
		}
	}
	return n
}

// roomAfterLeaving is how many more GPUs spot instances may hold without
// being interrupted within the horizon, once those with notice are gone.
func roomAfterLeaving(pl *Pool) int {
	return max(0, pl.Healthy-pl.ReservedSoon-pl.OnDemand-pl.OnDemandWait-pl.Spot)
}

// spotRoom is how many more GPUs a spot instance may take now: what the
// instances with notice free is promised already (to what waits for it,
// or to the reservation it was given for).
func spotRoom(pl *Pool) int {
	n := 0
	for _, l := range pl.Leaving {
		n += l.Count
	}
	return max(0, roomAfterLeaving(pl)-n)
}

// jobRoom is how many GPUs job tasks may take now: spot room that no
// waiting spot instance needs.
func jobRoom(pl *Pool) int { return max(0, spotRoom(pl)-pl.SpotWait) }

// freeByNode lists, per node, the GPUs nobody holds that allowed accepts.
func freeByNode(pl *Pool, allowed func(GPU) bool) []gpuportal.FreeGPUs {
	var out []gpuportal.FreeGPUs
	for _, g := range pl.GPUs {
		if g.Holder != 0 || !allowed(g) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Node == g.Node {
			out[n-1].GPUs = append(out[n-1].GPUs, g.UUID)
		} else {
			out = append(out, gpuportal.FreeGPUs{Node: g.Node, GPUs: []string{g.UUID}})
		}
	}
	return out
}

func unreserved(g GPU) bool { return g.Reservation == 0 }

// placeWithoutGPUs picks the node for an instance in no-GPU mode: the one
// it ran on last while it is still up (its files are warm there), else
// the node with the most idle GPUs (whose CPUs the GPU workloads use
// least), the first by name on ties.
func placeWithoutGPUs(pl *Pool, last string) (string, bool) {
	if last != "" && slices.Contains(pl.Nodes, last) {
		return last, true
	}
	idle := map[string]int{}
	for _, g := range pl.GPUs {
		if g.Holder == 0 {
			idle[g.Node]++
		}
	}
	best := ""
	for _, n := range pl.Nodes {
		if best == "" || idle[n] > idle[best] || (idle[n] == idle[best] && n < best) {
			best = n
		}
	}
	return best, best != ""
}

// placeSpot finds count idle GPUs on one node for a spot instance, away
// from avoid (the node it was just interrupted on) when another fits.
func placeSpot(pl *Pool, count int, avoid string) (string, []string, bool) {
	if avoid != "" {
		if node, gpus, ok := gpuportal.PlaceOnOneNode(freeByNode(pl, func(g GPU) bool { return g.Node != avoid && unreserved(g) }), count); ok {
			return node, gpus, ok
		}
	}
	return gpuportal.PlaceOnOneNode(freeByNode(pl, unreserved), count)
}

// onDemandFits applies gpuportal.OnDemandFits to the pool: counted says
// the count GPUs are already among the on-demand GPUs waiting for a place
// (a pending launch, checked when it was made); a hybrid job's on-demand
// worker is not.
func onDemandFits(pl *Pool, count int, counted bool) bool {
	onDemand := pl.OnDemand + pl.OnDemandWait
	if counted {
		onDemand -= count
	}
	return gpuportal.OnDemandFits(gpuportal.BookableGPUs(pl.Healthy, pl.Policy.ReservablePercent), onDemand, count, pl.ReservedAhead)
}

// placeOnDemand finds count free GPUs on one node for an on-demand
// instance, which must not take what any booked hour ahead needs.
func placeOnDemand(pl *Pool, count int, counted bool) (string, []string, bool) {
	if !onDemandFits(pl, count, counted) {
		return "", nil, false
	}
	return gpuportal.PlaceOnOneNode(freeByNode(pl, unreserved), count)
}

// hold marks gpus as held by instance id.
func hold(pl *Pool, id int64, gpus []string) {
	for k := range pl.GPUs {
		if slices.Contains(gpus, pl.GPUs[k].UUID) {
			pl.GPUs[k].Holder = id
		}
	}
	pl.Held += len(gpus)
}

// SpotLaunchNeedsDetail reports whether a spot launch of count GPUs must
// look at the pool's GPUs: only when the counts leave it room, and do not
// already say it fits (SpotLaunchFits's count rule, which no GPU
// changes: a launch into a pool with room to spare reads no GPU).
func SpotLaunchNeedsDetail(pl *Pool, count int, now time.Time) bool {
	derive(pl, now)
	return spotRoom(pl) >= count && pl.Healthy-pl.Held >= count && !spotFitsByCounts(pl, count)
}

// SpotLaunchFits reports whether a spot launch of count GPUs can run now:
// on idle GPUs of one node that stay safe past the horizon (the pool's
// detail tells), or on GPUs job tasks hold — they give way to it (fair
// share).
func SpotLaunchFits(pl *Pool, count int, now time.Time) bool {
	derive(pl, now)
	if pl.Detail > DetailNone && spotRoom(pl) >= count {
		if _, _, ok := placeSpot(pl, count, ""); ok {
			return true
		}
	}
	return spotFitsByCounts(pl, count)
}

// spotFitsByCounts: the spot room no waiting spot instance needs, with the
// GPUs job tasks hold (they give way to a launch), is enough.
func spotFitsByCounts(pl *Pool, count int) bool {
	return spotRoom(pl)-pl.SpotWait+pl.JobTaskSpot >= count
}

// SpotRoom is how many GPUs a spot instance may take now.
func SpotRoom(pl *Pool, now time.Time) int {
	derive(pl, now)
	return spotRoom(pl)
}
