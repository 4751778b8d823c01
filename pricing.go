package gpuportal

import (
	"slices"
	"time"
)

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
func (p Policy) HourPrice(m Model, kind InstanceKind) Fen {
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

// OffPeakDiscount returns the discount (percent) that applies to the hour
// starting at t: the largest of the matching off-peak windows (discounts do
// not stack), judged in the site time zone.
func OffPeakDiscount(windows []OffPeakWindow, t time.Time, loc *time.Location) int {
	local := t.In(loc)
	day := Weekdays[(int(local.Weekday())+6)%7] // time.Sunday = 0; ours start Monday
	hour := local.Hour()
	best := 0
	for _, w := range windows {
		if hour >= w.FromHour && hour < w.ToHour && w.DiscountPercent > best && slices.Contains(w.Days, day) {
			best = w.DiscountPercent
		}
	}
	return best
}

// HourPrice is the price of one GPU for the hour starting at t.
func HourPrice(list Fen, policy Policy, t time.Time, loc *time.Location) (price Fen, discountPercent int) {
	d := OffPeakDiscount(policy.OffPeak, t, loc)
	return list * Fen(100-d) / 100, d
}
