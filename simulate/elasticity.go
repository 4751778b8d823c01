package simulate

import (
	"math"

	"gpuportal"
)

// DefaultSpotPriceElasticity is how strongly spot demand follows the spot
// price when a scenario does not say: 1.5, so a spot price 10 % higher
// brings about 13 % fewer spot launches and jobs (1.1^−1.5 ≈ 0.87).
// Spot buyers chose spot for its price and can take their work to
// another cloud, so their demand is elastic (above 1); bookings and
// on-demand launches do not follow the spot price.
const DefaultSpotPriceElasticity = 1.5

// MaxSpotPriceElasticity bounds what a scenario may ask.
const MaxSpotPriceElasticity = 5

// spotDemandFactor bounds: a price change never makes spot demand more
// than 4 times or less than a quarter of what the scenario says.
const (
	minSpotDemandFactor = 0.25
	maxSpotDemandFactor = 4
)

// spotPriceElasticity is the scenario's elasticity, or the default.
func (s Scenario) spotPriceElasticity() float64 {
	if s.SpotPriceElasticity == nil {
		return DefaultSpotPriceElasticity
	}
	return *s.SpotPriceElasticity
}

// SpotDemandFactors is, per model of the scenario's demand, how much of
// its spot demand (launches and jobs) arrives under the policies run
// when the scenario's demand was seen under reference:
// (spot price ÷ reference spot price)^−elasticity, bounded to [¼, 4].
// The list price is the catalog's in both, so the ratio is that of
// (100 − spot discount). Equal policies give 1 for every model: the
// demand exactly as written.
func SpotDemandFactors(s Scenario, run, reference gpuportal.Policies) map[string]float64 {
	e := s.spotPriceElasticity()
	out := map[string]float64{}
	for _, d := range s.Demand {
		now, then := 100-run.For(d.Model).SpotDiscountPercent, 100-reference.For(d.Model).SpotDiscountPercent
		f := 1.0
		switch {
		case now == then || e == 0:
		case now <= 0:
			f = maxSpotDemandFactor
		case then <= 0:
			f = minSpotDemandFactor
		default:
			f = min(max(math.Pow(float64(now)/float64(then), -e), minSpotDemandFactor), maxSpotDemandFactor)
		}
		out[d.Model] = f
	}
	return out
}
