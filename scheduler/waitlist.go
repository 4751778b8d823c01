package scheduler

import (
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
		case w.Status == gpuportal.WaitWaiting && !w.Start.After(p.now):
			p.out.Waitlist = append(p.out.Waitlist, WaitlistAction{EntryID: w.ID, Action: WaitlistExpireEntry})
		}
	}
	for _, w := range p.s.Waitlist {
		if w.Status != gpuportal.WaitWaiting || !w.Start.After(p.now) || !fits(free[w.Pool], w) {
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
