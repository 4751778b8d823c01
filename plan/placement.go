package plan

import (
	"slices"

	"gpuportal"
)

// place finds GPUs for pending instances, in the snapshot's order
// (reserved, on-demand, spot; oldest first): a reserved instance on its
// reservation's GPUs, on-demand beside the next day's bookings, spot in
// the room the horizon leaves, away from the node it was interrupted on
// when another fits.
func (p *planner) place() {
	for _, i := range p.s.Pending {
		pl := p.s.Pools[i.Pool]
		if pl == nil || pl.Detail == DetailNone || p.stopped[i.UserID] {
			continue
		}
		if i.Count == 0 {
			// No-GPU mode holds no GPU and shares no pool count: any node
			// of the pool will do.
			if node, ok := placeWithoutGPUs(pl, i.LastNode); ok {
				p.out.Place = append(p.out.Place, Placement{InstanceID: i.ID, Node: node})
			}
			continue
		}
		var node string
		var gpus []string
		var ok bool
		switch i.Kind {
		case gpuportal.KindReserved:
			node, gpus, ok = gpuportal.PlaceOnOneNode(freeByNode(pl, func(g GPU) bool { return g.Reservation == i.ReservationID }), i.Count)
		case gpuportal.KindOnDemand:
			node, gpus, ok = placeOnDemand(pl, i.Count, true)
		default:
			if spotRoom(pl) >= i.Count {
				node, gpus, ok = placeSpot(pl, i.Count, i.LastNode)
			}
		}
		if !ok {
			continue
		}
		hold(pl, i.ID, gpus)
		switch i.Kind {
		case gpuportal.KindOnDemand:
			pl.OnDemand += i.Count
			pl.OnDemandWait -= i.Count
		case gpuportal.KindSpot:
			pl.Spots = append(pl.Spots, Spot{ID: i.ID, UserID: i.UserID, Count: i.Count, Node: node, StartedAt: p.now})
			pl.Spot += i.Count
			pl.SpotWait -= i.Count
		}
		p.out.Place = append(p.out.Place, Placement{InstanceID: i.ID, Node: node, GPUs: gpus, Restarted: i.Kind == gpuportal.KindSpot && i.Restarts > 0})
	}
}

// jobs starts queued tasks where GPUs are free: the next GPU goes to the
// job whose owner has the fewest job GPUs in the pool (the oldest job on
// ties); a hybrid job runs its first on_demand_workers on-demand; a task
// needs an hour of its price available and room in its owner's
// running-GPU quota, as a launch does (an owner who ran out is told, once
// until the job runs again).
func (p *planner) jobs() {
	type candidate struct {
		j      *JobQueue
		queued []QueuedTask
	}
	var cands []*candidate
	for k := range p.s.Jobs {
		j := &p.s.Jobs[k]
		pl := p.s.Pools[j.Pool]
		if pl == nil || pl.Detail == DetailNone || len(j.Queued) == 0 {
			continue
		}
		room := j.MaxParallel - j.LiveSpot - j.LiveOnDemand
		if room <= 0 {
			continue
		}
		cands = append(cands, &candidate{j: j, queued: j.Queued[:min(room, len(j.Queued))]})
	}
	owners := map[int64]Owner{}
	for id, o := range p.s.Owners {
		owners[id] = o
	}
	jobGPUs := map[UserPool]int{}
	for k, n := range p.s.JobGPUs {
		jobGPUs[k] = n
	}
	unpaid := map[int64]bool{}
	for len(cands) > 0 {
		best := 0
		for k, c := range cands {
			b := cands[best]
			cn, bn := jobGPUs[UserPool{c.j.UserID, c.j.Pool}], jobGPUs[UserPool{b.j.UserID, b.j.Pool}]
			if cn < bn || (cn == bn && c.j.ID < b.j.ID) {
				best = k
			}
		}
		c := cands[best]
		j := c.j
		pl := p.s.Pools[j.Pool]
		kind, node, gpus, ok := gpuportal.KindSpot, "", []string(nil), false
		if j.Kind == gpuportal.JobHybrid && j.LiveOnDemand < j.OnDemandWorkers {
			kind = gpuportal.KindOnDemand
			node, gpus, ok = placeOnDemand(pl, j.GPUsPerTask, false)
		}
		if !ok && jobRoom(pl) >= j.GPUsPerTask {
			kind = gpuportal.KindSpot
			node, gpus, ok = placeSpot(pl, j.GPUsPerTask, c.queued[0].LastNode)
		}
		if !ok {
			cands = slices.Delete(cands, best, best+1) // nothing more fits for it this tick
			continue
		}
		price := pl.Policy.HourPrice(pl.Model, kind)
		o := owners[j.UserID]
		hour := price * gpuportal.Fen(j.GPUsPerTask)
		if o.Available < hour || o.GPURoom < j.GPUsPerTask {
			if o.Available < hour && !j.UnpaidNoted && !unpaid[j.ID] {
				unpaid[j.ID] = true
				p.out.UnpaidJobs = append(p.out.UnpaidJobs, j.ID)
			}
			cands = slices.Delete(cands, best, best+1)
			continue
		}
		o.Available -= hour
		o.GPURoom -= j.GPUsPerTask
		owners[j.UserID] = o
		id := -int64(len(p.out.Tasks) + 1) // not an instance yet: a stand-in holder for this plan
		hold(pl, id, gpus)
		if kind == gpuportal.KindOnDemand {
			pl.OnDemand += j.GPUsPerTask
			j.LiveOnDemand++
		} else {
			pl.Spots = append(pl.Spots, Spot{ID: id, UserID: j.UserID, Count: j.GPUsPerTask, Node: node, StartedAt: p.now, JobTask: true})
			pl.Spot += j.GPUsPerTask
			pl.JobTaskSpot += j.GPUsPerTask
			j.LiveSpot++
		}
		jobGPUs[UserPool{j.UserID, j.Pool}] += j.GPUsPerTask
		p.out.Tasks = append(p.out.Tasks, TaskStart{JobID: j.ID, TaskIndex: c.queued[0].Index, Kind: kind, Node: node, GPUs: gpus, Price: price})
		if c.queued = c.queued[1:]; len(c.queued) == 0 {
			cands = slices.Delete(cands, best, best+1)
		}
	}
}
