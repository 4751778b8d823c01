package plan

import (
	"gpuportal"
)

// reservations ends those whose end has come, starts those whose start
// has come and gives them GPUs, and replaces GPUs active ones lost.
func (p *planner) reservations() {
	for _, r := range p.s.Reservations {
		if !r.End.After(p.now) && (r.Status == gpuportal.ReservationConfirmed || r.Status == gpuportal.ReservationActive) {
			p.out.Complete = append(p.out.Complete, r.ID)
			// Its GPUs are free for the next booking; its reserved
			// instances are stopped now, so theirs count as leaving
			// (back-to-back bookings on the same GPUs).
			if pl := p.s.Pools[r.Pool]; pl != nil {
				for k := range pl.GPUs {
					if g := &pl.GPUs[k]; g.Reservation == r.ID {
						g.Reservation = 0
						g.Leaving = g.Holder != 0
					}
				}
			}
		}
	}
	for _, r := range p.s.Reservations {
		if r.Status == gpuportal.ReservationConfirmed && !r.Start.After(p.now) && r.End.After(p.now) {
			p.out.Activate = append(p.out.Activate, p.assign(r, r.Count))
		}
	}
}

// lostWork ends the instances of failed nodes (spot ones are interrupted,
// and auto-restart ones wait for a new place; others fail), then gives
// active reservations replacements for the GPUs they lost.
func (p *planner) lostWork() {
	for _, i := range p.s.Lost {
		o := Outcome{InstanceID: i.ID, Status: gpuportal.InstanceFailed}
		if i.Kind == gpuportal.KindSpot {
			o = Outcome{InstanceID: i.ID, Status: gpuportal.InstanceInterrupted, Notice: !i.Interrupting}
		}
		p.out.LostWork = append(p.out.LostWork, o)
	}
	for _, r := range p.s.Reservations {
		if r.Status == gpuportal.ReservationActive && r.Lost > 0 && r.End.After(p.now) {
			as := p.assign(r, r.Lost)
			if as.Missing > 0 {
				as.Cause = gpuportal.ShortNodeFailure
			}
			p.out.Replace = append(p.out.Replace, as)
		}
	}
}

// assign finds want GPUs for a reservation: idle ones first, packed onto
// as few nodes as possible, then ones spot instances hold (they get their
// notice now) or are giving up. What cannot be found is Missing.
func (p *planner) assign(r Reservation, want int) Assignment {
	a := Assignment{ReservationID: r.ID}
	pl := p.s.Pools[r.Pool]
	if pl == nil {
		a.Missing, a.Cause = want, gpuportal.ShortCauseUnknownGPU
		return a
	}
	spot := map[int64]bool{}
	for _, s := range pl.Spots {
		spot[s.ID] = true
	}
	gpus, ok := gpuportal.PackAcrossNodes(freeByNode(pl, unreserved), want)
	if !ok {
		var withSpot []gpuportal.FreeGPUs
		for _, g := range pl.GPUs {
			if g.Reservation != 0 || (g.Holder != 0 && !spot[g.Holder] && !g.Leaving) {
				continue
			}
			if n := len(withSpot); n > 0 && withSpot[n-1].Node == g.Node {
				withSpot[n-1].GPUs = append(withSpot[n-1].GPUs, g.UUID)
			} else {
				withSpot = append(withSpot, gpuportal.FreeGPUs{Node: g.Node, GPUs: []string{g.UUID}})
			}
		}
		gpus, _ = gpuportal.PackAcrossNodes(withSpot, want)
		if len(gpus) < want {
			gpus = nil
			for _, n := range withSpot {
				gpus = append(gpus, n.GPUs...)
			}
			gpus = gpus[:min(len(gpus), want)]
		}
	}
	taken := map[string]bool{}
	for _, g := range gpus {
		taken[g] = true
	}
	for k := range pl.GPUs {
		g := &pl.GPUs[k]
		if !taken[g.UUID] {
			continue
		}
		g.Reservation = r.ID
		if g.Holder != 0 && spot[g.Holder] {
			p.interrupt(pl, g.Holder, gpuportal.ReasonReservation)
			spot[g.Holder] = false
		}
	}
	a.GPUs = gpus
	a.Missing = want - len(gpus)
	if a.Missing > 0 {
		a.Cause = shortfallCause(pl, spot)
	}
	return a
}

// shortfallCause says why a reservation starting now could not get all
// its GPUs: some are held by instances that are not spot (on-demand or
// another reservation's, which must not happen and is named so), or there
// are simply fewer healthy GPUs than were booked.
func shortfallCause(pl *Pool, spot map[int64]bool) string {
	for _, g := range pl.GPUs {
		if g.Reservation == 0 && g.Holder != 0 && !spot[g.Holder] {
			return gpuportal.ShortStillInUse
		}
	}
	return gpuportal.ShortOutOfService
}

// reminders tells owners StartReminderLead before their reservation
// starts and EndReminderLead before it ends, once each.
func (p *planner) reminders() {
	for _, r := range p.s.Reservations {
		if r.Status != gpuportal.ReservationConfirmed && r.Status != gpuportal.ReservationActive {
			continue
		}
		if !r.RemindedStart && r.Start.After(p.now) && !r.Start.After(p.now.Add(StartReminderLead)) {
			p.out.Reminders = append(p.out.Reminders, Reminder{ReservationID: r.ID, Kind: gpuportal.NoteReservationStarts})
		}
		if !r.RemindedEnd && r.End.After(p.now) && !r.End.After(p.now.Add(EndReminderLead)) {
			p.out.Reminders = append(p.out.Reminders, Reminder{ReservationID: r.ID, Kind: gpuportal.NoteReservationEnds})
		}
	}
}
