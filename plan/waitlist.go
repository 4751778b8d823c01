package plan

import (
	"time"

	"gpuportal"
)

// waitlist expires offers whose claim window passed (their capacity goes
// back) and entries whose window started, then offers freed capacity to the
// earliest entries that now fit (first fit: a later, smaller entry may fit
// where an earlier one does not) and whose owners can pay for them,
// holding it for the claim window — or books it at once for auto_book
// entries.
func (p *planner) waitlist() {
	free := p.s.FreeHours
	for _, w := range p.s.Waitlist {
		switch {
		case w.Status == gpuportal.WaitOffered && !w.OfferExpires.After(p.now):
			p.out.Waitlist = append(p.out.Waitlist, WaitlistAction{EntryID: w.ID, Action: WaitlistExpireOffer})
			for _, h := range Hours(w.Start, w.End) {
				if free[w.Pool] != nil {
					free[w.Pool][h.Unix()] += w.Count
				}
			}
		case w.Status == gpuportal.WaitWaiting && !lastStart(w).After(p.now):
			p.out.Waitlist = append(p.out.Waitlist, WaitlistAction{EntryID: w.ID, Action: WaitlistExpireEntry})
		}
	}
	for _, w := range p.s.Waitlist {
		if w.Status != gpuportal.WaitWaiting || !lastStart(w).After(p.now) {
			continue
		}
		if w.DurationHours > 0 {
			p.flexibleEntry(w, free[w.Pool])
			continue
		}
		if !fits(free[w.Pool], w) {
			continue
		}
		if w.Available < w.Price {
			if w.AutoBook {
				p.out.Waitlist = append(p.out.Waitlist, WaitlistAction{EntryID: w.ID, Action: WaitlistUnpaid})
			}
			continue // the next entry that fits gets the capacity
		}
		for _, h := range Hours(w.Start, w.End) {
			free[w.Pool][h.Unix()] -= w.Count
		}
		if w.AutoBook {
			p.out.Waitlist = append(p.out.Waitlist, WaitlistAction{EntryID: w.ID, Action: WaitlistBook})
			continue
		}
		policy := gpuportal.Policy{}
		if pl := p.s.Pools[w.Pool]; pl != nil {
			policy = pl.Policy
		}
		p.out.Waitlist = append(p.out.Waitlist, WaitlistAction{EntryID: w.ID, Action: WaitlistOffer,
			Expires: gpuportal.OfferExpiry(p.now, w.Start, policy.WaitlistClaimMinutes)})
	}
}

// lastStart is the latest time an entry's window can start: its start, or
// for a flexible entry the last start that still ends within its range.
func lastStart(w WaitEntry) time.Time {
	if w.DurationHours > 0 {
		return w.End.Add(-time.Duration(w.DurationHours) * time.Hour)
	}
	return w.Start
}

// flexibleEntry books the earliest window of a flexible entry's length
// that fits its range now (first fit, found by the offering search and
// priced by its rule), if its owner can pay for it; otherwise the owner
// is told once, and the next entry gets the capacity.
func (p *planner) flexibleEntry(w WaitEntry, free map[int64]int) {
	pl := p.s.Pools[w.Pool]
	if free == nil || pl == nil {
		return
	}
	first := p.now.Truncate(time.Hour).Add(time.Hour) // the earliest bookable hour
	if w.Start.After(first) {
		first = w.Start
	}
	g := gpuportal.HourGrid{From: first, Model: pl.Model, Policy: pl.Policy, Loc: p.s.Location}
	for _, h := range Hours(first, w.End) {
		g.Free = append(g.Free, free[h.Unix()])
	}
	found := gpuportal.FindOfferings(g, gpuportal.OfferingRequest{Count: w.Count, DurationHours: w.DurationHours, Earliest: first, LatestEnd: w.End,
		Sort: gpuportal.OfferingsByStart, Limit: 1}, p.now)
	if len(found) == 0 {
		return
	}
	o := found[0]
	if w.Available < o.Total {
		p.out.Waitlist = append(p.out.Waitlist, WaitlistAction{EntryID: w.ID, Action: WaitlistUnpaid})
		return
	}
	for _, h := range Hours(o.Start, o.End) {
		free[h.Unix()] -= w.Count
	}
	p.out.Waitlist = append(p.out.Waitlist, WaitlistAction{EntryID: w.ID, Action: WaitlistBook, Start: o.Start, End: o.End})
}

// fits reports whether every hour of the entry has its GPUs free.
func fits(free map[int64]int, w WaitEntry) bool {
	if free == nil {
		return false
	}
	for _, h := range Hours(w.Start, w.End) {
		if free[h.Unix()] < w.Count {
			return false
		}
	}
	return true
}
