package gpuportal

// DefaultSpotDiscountPercent is the spot discount when no policy says
// otherwise (DESIGN §2: 70 % off list).
const DefaultSpotDiscountPercent = 70

// SpotPriceOf is a model's spot price per GPU-hour under the policies (its
// own override, else the global discount): the one figure every page, the
// API and the launch charge use.
func (p Policies) SpotPriceOf(m Model) Fen { return p.For(m.ID).SpotPriceOf(m) }

// SpotPriceOf is the spot price of m under a policy already resolved for
// it (Policies.For(m.ID)).
func (p Policy) SpotPriceOf(m Model) Fen { return SpotPrice(m.ListPrice, p.SpotDiscountPercent) }

// HourPrice is what one GPU of an instance of kind costs an hour under a
// policy resolved for m: spot at the spot price, on-demand at list, and
// reserved nothing (its reservation was paid when booked). The launch
// charge and the scheduler's job tasks both ask this.
func (p Policy) HourPrice(m Model, kind string) Fen {
	switch kind {
	case KindSpot:
		return p.SpotPriceOf(m)
	case KindReserved:
		return 0
	}
	return m.ListPrice
}

// SpotPrice is the list price less the spot discount, rounded down to whole
// fen in the customer's favour.
func SpotPrice(list Fen, discountPercent int) Fen {
	return list * Fen(100-discountPercent) / 100
}
