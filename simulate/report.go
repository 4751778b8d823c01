package simulate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"gpuportal"
	"gpuportal/store"
)

// Report is what a simulation found (DESIGN §6, `portal simulate`).
type Report struct {
	Scenario string `json:"scenario"`
	Days     int    `json:"days"`
	GPUs     int    `json:"gpus"`
	// GPUHours splits the fleet's GPU-hours by use: held by reservations,
	// run on-demand, run on spot (job tasks included), idle.
	GPUHours    GPUHours `json:"gpu_hours"`
	Utilization float64  `json:"utilization"` // 1 − idle share
	// SpotDemandServed is the share of the spot work customers asked for
	// (GPU-hours of plain spot launches) that ran.
	SpotDemandServed float64 `json:"spot_demand_served"`
	// ReservationsOnTime is the share of reservations that started with
	// all their GPUs free of anyone else's work.
	ReservationsOnTime  float64 `json:"reservations_on_time"`
	ReservationsStarted int     `json:"reservations_started"`
	// Interruptions of spot work for bookings, on-demand demand or failed
	// nodes, per 100 spot GPU-hours.
	InterruptionsPer100SpotGPUHours float64 `json:"interruptions_per_100_spot_gpu_hours"`
	Interruptions                   int     `json:"interruptions"`
	// LostGPUHours is the work the interruptions lost: GPU-hours since
	// the workloads' last checkpoint reports (since their start when
	// none), under the victim rule Victims.
	LostGPUHours    float64                  `json:"lost_gpu_hours"`
	Victims         string                   `json:"victims"`
	Revenue         map[string]gpuportal.Fen `json:"revenue_fen"`
	RevenueTotal    gpuportal.Fen            `json:"revenue_total_fen"`
	CustomerSavings gpuportal.Fen            `json:"customer_savings_fen"`
	Demand          DemandSeen               `json:"demand"`
	// SpotPriceElasticity and SpotDemandFactor are the assumption the
	// run's spot demand rests on: per model, the share of the scenario's
	// spot demand that arrived at the run's spot prices (1: as written).
	SpotPriceElasticity float64            `json:"spot_price_elasticity"`
	SpotDemandFactor    map[string]float64 `json:"spot_demand_factor"`
}

// GPUHours is GPU-hours by use.
type GPUHours struct {
	Reserved float64 `json:"reserved"`
	OnDemand float64 `json:"on_demand"`
	Spot     float64 `json:"spot"`
	Idle     float64 `json:"idle"`
}

// DemandSeen is what customers asked for and what became of it.
type DemandSeen struct {
	Bookings        int            `json:"bookings"`
	Booked          int            `json:"booked"`
	Waitlisted      int            `json:"waitlisted"`
	Cancelled       int            `json:"cancelled"`
	SpotLaunches    int            `json:"spot_launches"`
	SpotRefused     int            `json:"spot_refused"`
	OnDemand        int            `json:"on_demand_launches"`
	OnDemandRefused int            `json:"on_demand_refused"`
	Jobs            int            `json:"jobs"`
	Refusals        map[string]int `json:"refusals_by_code"`
	// Flexible is what the customers who would take any window of the
	// same length in a range (flexible_share) did when theirs was full.
	Flexible FlexibleSeen `json:"flexible"`
}

// FlexibleSeen counts flexible customers' bookings whose asked window was
// full: Saved of them were booked all the same — at once from the
// offerings, or later by a flexible waitlist entry — where an exact
// request would have been refused or left waiting on that one window.
type FlexibleSeen struct {
	WindowFull    int `json:"window_full"`
	FromOfferings int `json:"booked_from_offerings"`
	Waitlisted    int `json:"waitlisted"`
	FromWaitlist  int `json:"booked_from_waitlist"`
	Saved         int `json:"saved"`
}

func (s *sim) report(ctx context.Context) (*Report, error) {
	sales, err := s.db.Sales(ctx, s.opt.Start.Add(-time.Hour), s.end)
	if err != nil {
		return nil, err
	}
	gpus := 0
	for _, f := range s.opt.Scenario.Fleet {
		gpus += f.Nodes * f.GPUsPerNode
	}
	total := float64(gpus) * float64(s.opt.Days) * 24
	h := GPUHours{
		Reserved: round(sales.ReservedGPUHours, 1),
		OnDemand: round(float64(s.fleet.gpuSeconds[gpuportal.LifecycleOnDemand])/3600, 1),
		Spot:     round(float64(s.fleet.gpuSeconds[gpuportal.LifecycleSpot])/3600, 1),
	}
	h.Idle = round(math.Max(0, total-h.Reserved-h.OnDemand-h.Spot), 1)
	r := &Report{
		Scenario: s.opt.Scenario.Name, Days: s.opt.Days, GPUs: gpus, GPUHours: h,
		Utilization:         round(1-h.Idle/total, 4),
		SpotDemandServed:    1,
		ReservationsOnTime:  1,
		ReservationsStarted: s.reservationsStarted,
		Interruptions:       s.fleet.interruptions,
		Revenue:             sales.Revenue,
		CustomerSavings:     sales.Savings,
		SpotPriceElasticity: s.opt.Scenario.spotPriceElasticity(),
		SpotDemandFactor:    roundedFactors(s.spotFactors),
		Demand: DemandSeen{Bookings: s.bookings, Booked: s.booked, Waitlisted: s.waitlisted, Cancelled: s.cancelled, SpotLaunches: s.spotAsked,
			SpotRefused: s.spotRefused, OnDemand: s.onDemandAsked, OnDemandRefused: s.onDemandRefused, Jobs: s.jobs, Refusals: s.refusals},
	}
	for _, v := range sales.Revenue {
		r.RevenueTotal += v
	}
	lost, err := s.db.LostGPUSeconds(ctx, s.opt.Start.Add(-time.Hour), s.end)
	if err != nil {
		return nil, err
	}
	r.LostGPUHours = round(float64(lost)/3600, 1)
	r.Victims = cmp.Or(s.opt.Scenario.Victims, gpuportal.VictimsByWorkLost)
	f := FlexibleSeen{WindowFull: s.flexibleFull, FromOfferings: s.flexibleOffered, Waitlisted: s.flexibleWaitlisted}
	if s.flexibleWaitlisted > 0 {
		for _, u := range s.customers {
			entries, err := s.db.Waitlist(ctx, u)
			if err != nil {
				return nil, err
			}
			for _, w := range entries {
				if w.Flexible && w.Status == gpuportal.WaitClaimed {
					f.FromWaitlist++
				}
			}
		}
	}
	f.Saved = f.FromOfferings + f.FromWaitlist
	r.Demand.Flexible = f
	if s.spotWorkAsked > 0 {
		r.SpotDemandServed = round(float64(s.fleet.plainSpotDone)/float64(s.spotWorkAsked), 4)
	}
	if s.reservationsStarted > 0 {
		r.ReservationsOnTime = round(float64(s.onTime)/float64(s.reservationsStarted), 4)
	}
	if h.Spot > 0 {
		r.InterruptionsPer100SpotGPUHours = round(float64(s.fleet.interruptions)*100/h.Spot, 3)
	}
	return r, nil
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// Write prints the report as a table, then its JSON on the last line.
func (r *Report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pct := func(v float64) string { return fmt.Sprintf("%.1f %%", v*100) }
	share := func(v float64) string {
		total := r.GPUHours.Reserved + r.GPUHours.OnDemand + r.GPUHours.Spot + r.GPUHours.Idle
		if total == 0 {
			return "-"
		}
		return pct(v / total)
	}
	lines := [][2]string{
		{"scenario", fmt.Sprintf("%s, %d days, %d GPUs", r.Scenario, r.Days, r.GPUs)},
		{"GPU-hours reserved", fmt.Sprintf("%.1f (%s)", r.GPUHours.Reserved, share(r.GPUHours.Reserved))},
		{"GPU-hours on-demand", fmt.Sprintf("%.1f (%s)", r.GPUHours.OnDemand, share(r.GPUHours.OnDemand))},
		{"GPU-hours spot", fmt.Sprintf("%.1f (%s)", r.GPUHours.Spot, share(r.GPUHours.Spot))},
		{"GPU-hours idle", fmt.Sprintf("%.1f (%s)", r.GPUHours.Idle, share(r.GPUHours.Idle))},
		{"utilization", pct(r.Utilization)},
		{"spot demand served", pct(r.SpotDemandServed)},
		{"reservations on time", fmt.Sprintf("%s of %d", pct(r.ReservationsOnTime), r.ReservationsStarted)},
		{"interruptions / 100 spot GPU-h", fmt.Sprintf("%.2f (%d)", r.InterruptionsPer100SpotGPUHours, r.Interruptions)},
		{"work lost to interruptions", fmt.Sprintf("%.1f GPU-hours (victims by %s)", r.LostGPUHours, r.Victims)},
		{"revenue reserved", r.Revenue[store.ProductReserved].String()},
		{"revenue on-demand", r.Revenue[store.ProductOnDemand].String()},
		{"revenue spot", r.Revenue[store.ProductSpot].String()},
		{"revenue total", r.RevenueTotal.String()},
		{"customers saved vs list", r.CustomerSavings.String()},
		{"bookings (booked/waitlisted/cancelled)", fmt.Sprintf("%d (%d/%d/%d)", r.Demand.Bookings, r.Demand.Booked, r.Demand.Waitlisted, r.Demand.Cancelled)},
		{"spot launches (refused)", fmt.Sprintf("%d (%d)", r.Demand.SpotLaunches, r.Demand.SpotRefused)},
		{"on-demand launches (refused)", fmt.Sprintf("%d (%d)", r.Demand.OnDemand, r.Demand.OnDemandRefused)},
		{"jobs", fmt.Sprint(r.Demand.Jobs)},
		{"flexible bookings saved (window full)", fmt.Sprintf("%d of %d (%d from offerings, %d by a flexible waitlist entry)",
			r.Demand.Flexible.Saved, r.Demand.Flexible.WindowFull, r.Demand.Flexible.FromOfferings, r.Demand.Flexible.FromWaitlist)},
	}
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%s\n", l[0], l[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func roundedFactors(f map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(f))
	for m, v := range f {
		out[m] = round(v, 3)
	}
	return out
}
