package simulate

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"gpuportal"
)

// event is one customer action at a time.
type event struct {
	at       time.Time
	seq      int // ties keep generation order
	kind     string
	customer int
	model    string
	region   string
	count    int
	// bookings
	start, end time.Time
	cancelAt   time.Time // zero: kept
	waitlist   bool
	latestEnd  time.Time // a flexible customer's: any window of the length up to it (zero: exact)
	// launches: work to do; jobs: tasks and their work
	work        time.Duration
	autoRestart bool
	taskWork    []time.Duration
	maxParallel int
}

const (
	eventBook     = "book"
	eventSpot     = "spot"
	eventOnDemand = "on_demand"
	eventJob      = "job"
)

// generate draws the scenario's demand over [from, from+days): for every
// hour and stream, a Poisson number of arrivals at random minutes.
//
// Spot launches and jobs arrive at spotFactors[model] of their rate (a
// missing model: 1). The factor works on the arrivals the scenario
// draws anyway, with random numbers of its own: below 1 each is kept
// with that chance, above 1 extra ones join. Every other arrival is then
// the same whatever the factor, so a what-if compares like with like.
func generate(s Scenario, from time.Time, days int, loc *time.Location, spotFactors map[string]float64) []event {
	rng := rand.New(rand.NewPCG(s.Seed, 0x6770757274616c)) // "gpurtal"
	price := rand.New(rand.NewPCG(s.Seed, 0x73706f74))     // "spot": the price's effect
	var out []event
	for h := range days * 24 {
		hour := from.Add(time.Duration(h) * time.Hour)
		local := hour.In(loc)
		shape := s.hourWeight(local.Hour())
		if wd := local.Weekday(); wd == time.Saturday || wd == time.Sunday {
			shape *= s.weekendFactor()
		}
		for _, d := range s.Demand {
			factor := 1.0
			if f, ok := spotFactors[d.Model]; ok {
				factor = f
			}
			for _, stream := range []struct {
				kind   string
				perDay float64
			}{{eventBook, d.Bookings.PerDay}, {eventSpot, d.Spot.PerDay}, {eventOnDemand, d.OnDemand.PerDay}, {eventJob, d.Jobs.PerDay}} {
				lambda := stream.perDay / 24 * shape
				follows := stream.kind == eventSpot || stream.kind == eventJob
				arrive := func(r *rand.Rand) event {
					e := event{at: hour.Add(time.Duration(r.IntN(60)) * time.Minute), kind: stream.kind, customer: r.IntN(s.Customers), model: d.Model, region: d.Region}
					fill(r, &e, d)
					return e
				}
				for range poisson(rng, lambda) {
					e := arrive(rng)
					if follows && factor < 1 && price.Float64() >= factor {
						continue // priced out
					}
					out = append(out, e)
				}
				if follows && factor > 1 {
					for range poisson(price, lambda*(factor-1)) {
						out = append(out, arrive(price))
					}
				}
			}
		}
	}
	for k := range out {
		out[k].seq = k
	}
	slices.SortStableFunc(out, func(a, b event) int { return a.at.Compare(b.at) })
	return out
}

// fill draws the details of one arrival.
func fill(rng *rand.Rand, e *event, d Demand) {
	switch e.kind {
	case eventBook:
		b := d.Bookings
		e.count = b.GPUs[rng.IntN(len(b.GPUs))]
		e.start = e.at.Truncate(time.Hour).Add(time.Duration(between(rng, b.LeadHours[0], b.LeadHours[1])) * time.Hour)
		e.end = e.start.Add(time.Duration(between(rng, b.DurationHours[0], b.DurationHours[1])) * time.Hour)
		e.waitlist = b.WaitlistWhenFull
		// Drawn only in scenarios that have flexible customers, so the
		// others replay exactly as before.
		if b.FlexibleShare > 0 && rng.Float64() < b.FlexibleShare {
			slack := b.FlexibleSlackHours
			if slack == 0 {
				slack = DefaultFlexibleSlack
			}
			e.latestEnd = e.end.Add(time.Duration(slack) * time.Hour)
		}
		if rng.Float64() < b.CancelProbability {
			e.cancelAt = e.at.Add(time.Duration(rng.Int64N(int64(e.start.Sub(e.at)))))
		}
	case eventSpot, eventOnDemand:
		in := d.Spot
		if e.kind == eventOnDemand {
			in = d.OnDemand
		}
		e.count = in.GPUs[rng.IntN(len(in.GPUs))]
		e.work = hours(in.RunHours[0] + rng.Float64()*(in.RunHours[1]-in.RunHours[0]))
		e.autoRestart = in.AutoRestart && e.kind == eventSpot
	case eventJob:
		j := d.Jobs
		e.count = j.GPUsPerTask
		e.maxParallel = j.MaxParallel
		for range between(rng, j.Tasks[0], j.Tasks[1]) {
			e.taskWork = append(e.taskWork, time.Duration(between(rng, j.TaskMinutes[0], j.TaskMinutes[1]))*time.Minute)
		}
	}
}

func between(rng *rand.Rand, lo, hi int) int { return lo + rng.IntN(hi-lo+1) }

func hours(h float64) time.Duration {
	return time.Duration(h * float64(time.Hour)).Round(time.Minute)
}

// poisson draws from a Poisson distribution of mean lambda (Knuth's
// method: lambda is small here, a few arrivals an hour).
func poisson(rng *rand.Rand, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 30 { // normal approximation for big scaled scenarios
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64())))
	}
	limit, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= limit {
			return k
		}
		k++
	}
}

// listPrice of a model, for the requested-work figures.
func listPrice(models []gpuportal.Model, id string) gpuportal.Fen {
	for _, m := range models {
		if m.ID == id {
			return m.ListPrice
		}
	}
	return 0
}
