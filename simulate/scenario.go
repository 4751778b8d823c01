// Package simulate replays generated demand through the real scheduler
// (store + plan.Plan) on a throwaway store with simulated nodes that
// obey their desired state at once, and reports what happened: how the
// GPU-hours were used, how much spot demand was served, whether
// reservations started on time, interruptions, revenue and customers'
// savings. `portal simulate` and the admin's what-if run it, so a policy
// change can be judged before it goes live.
package simulate

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"gpuportal"
)

// Scenario is a fleet and the demand on it, seeded: the same scenario,
// seed and policies give the same report.
type Scenario struct {
	Name string `json:"name"`
	Seed uint64 `json:"seed"`
	// Customers share the demand (each books and launches within the
	// default quotas' spirit; the simulator raises their quotas and gives
	// them money enough).
	Customers int         `json:"customers"`
	Fleet     []FleetPart `json:"fleet"`
	Demand    []Demand    `json:"demand"`
	// HourWeights shapes demand over the day (24 weights, site time; the
	// default is office hours twice the night), WeekendFactor over the
	// week (default 0.6).
	HourWeights   []float64 `json:"hour_weights,omitempty"`
	WeekendFactor float64   `json:"weekend_factor,omitempty"`
	// CheckpointMinutes: spot workloads report a checkpoint to their
	// metadata endpoint every so many minutes of running (0: they never
	// do); CheckpointShare of them do (default all).
	CheckpointMinutes int     `json:"checkpoint_minutes,omitempty"`
	CheckpointShare   float64 `json:"checkpoint_share,omitempty"`
	// Victims is the scheduler's rule for whom to interrupt:
	// "work_lost" (the default) or "youngest", to compare the two.
	Victims string `json:"victims,omitempty"`
	// SpotPriceElasticity is how spot demand follows the spot price when
	// a run's policies price spot unlike those the demand was seen under
	// (Options.Reference): spot launches and jobs arrive at (price ÷
	// reference price)^−elasticity of their rate. nil: the default
	// (DefaultSpotPriceElasticity); 0: demand ignores the price.
	SpotPriceElasticity *float64 `json:"spot_price_elasticity,omitempty"`
}

// FleetPart is a group of identical nodes.
type FleetPart struct {
	Model       string `json:"model"`
	Region      string `json:"region"`
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
}

// Demand is what customers ask of one model in one region, per day on
// average (shaped by HourWeights and WeekendFactor).
type Demand struct {
	Model    string         `json:"model"`
	Region   string         `json:"region"`
	Bookings BookingDemand  `json:"bookings"`
	Spot     InstanceDemand `json:"spot"`
	OnDemand InstanceDemand `json:"on_demand"`
	Jobs     JobDemand      `json:"jobs"`
}

// BookingDemand is reservation requests: made LeadHours ahead, lasting
// DurationHours, for one of GPUs (each equally likely); CancelProbability
// of them are cancelled before they start; when the window is full the
// customer joins the waitlist (auto-book) if WaitlistWhenFull.
type BookingDemand struct {
	PerDay            float64 `json:"per_day"`
	LeadHours         [2]int  `json:"lead_hours"`
	DurationHours     [2]int  `json:"duration_hours"`
	GPUs              []int   `json:"gpus"`
	CancelProbability float64 `json:"cancel_probability"`
	WaitlistWhenFull  bool    `json:"waitlist_when_full"`
	// FlexibleShare of the bookings are made by customers who would take
	// the same GPUs for the same length anywhere in the FlexibleSlackHours
	// after their start (default 48): when their window is full they book
	// the earliest offering in that range instead, or, when none fits,
	// join a flexible waitlist entry for it.
	FlexibleShare      float64 `json:"flexible_share,omitempty"`
	FlexibleSlackHours int     `json:"flexible_slack_hours,omitempty"`
}

// DefaultFlexibleSlack is how far past its asked start a flexible
// customer's booking may move when the scenario does not say.
const DefaultFlexibleSlack = 48

// InstanceDemand is spot or on-demand launches with RunHours of work each
// (an interrupted auto-restart spot instance resumes its work from its
// checkpoint).
type InstanceDemand struct {
	PerDay      float64    `json:"per_day"`
	RunHours    [2]float64 `json:"run_hours"`
	GPUs        []int      `json:"gpus"`
	AutoRestart bool       `json:"auto_restart"`
}

// JobDemand is batch jobs of Tasks tasks of TaskMinutes each, on spot.
type JobDemand struct {
	PerDay      float64 `json:"per_day"`
	Tasks       [2]int  `json:"tasks"`
	TaskMinutes [2]int  `json:"task_minutes"`
	GPUsPerTask int     `json:"gpus_per_task"`
	MaxParallel int     `json:"max_parallel"`
}

// Validate reports the first thing wrong with the scenario.
func (s *Scenario) Validate() error {
	bad := func(field, format string, args ...any) error {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, field, format, args...)
	}
	if s.Customers < 1 || s.Customers > 1000 {
		return bad("customers", "A scenario has 1 to 1000 customers.")
	}
	if len(s.Fleet) == 0 {
		return bad("fleet", "A scenario needs a fleet.")
	}
	gpus := 0
	for _, f := range s.Fleet {
		if f.Model == "" || f.Region == "" || f.Nodes < 1 || f.GPUsPerNode < 1 || f.GPUsPerNode > 16 {
			return bad("fleet", "Each fleet part needs a model, a region, at least one node and 1 to 16 GPUs per node.")
		}
		gpus += f.Nodes * f.GPUsPerNode
	}
	if gpus > 20000 {
		return bad("fleet", "At most 20000 GPUs can be simulated; this fleet has %d.", gpus)
	}
	if s.HourWeights != nil && len(s.HourWeights) != 24 {
		return bad("hour_weights", "hour_weights has 24 weights, one per hour of the day.")
	}
	for _, w := range s.HourWeights {
		if w < 0 {
			return bad("hour_weights", "Weights cannot be negative.")
		}
	}
	if s.WeekendFactor < 0 {
		return bad("weekend_factor", "weekend_factor cannot be negative.")
	}
	if s.CheckpointMinutes < 0 || s.CheckpointMinutes > 24*60 {
		return bad("checkpoint_minutes", "checkpoint_minutes is between 0 and 1440.")
	}
	if s.CheckpointShare < 0 || s.CheckpointShare > 1 {
		return bad("checkpoint_share", "checkpoint_share is between 0 and 1.")
	}
	if e := s.SpotPriceElasticity; e != nil && (math.IsNaN(*e) || *e < 0 || *e > MaxSpotPriceElasticity) {
		return bad("spot_price_elasticity", "spot_price_elasticity is between 0 and %d.", MaxSpotPriceElasticity)
	}
	if s.Victims != "" && s.Victims != gpuportal.VictimsByWorkLost && s.Victims != gpuportal.VictimsYoungest {
		return bad("victims", "victims is work_lost or youngest.")
	}
	for _, d := range s.Demand {
		if d.Model == "" || d.Region == "" {
			return bad("demand", "Each demand names a model and a region.")
		}
		b := d.Bookings
		if b.PerDay < 0 || d.Spot.PerDay < 0 || d.OnDemand.PerDay < 0 || d.Jobs.PerDay < 0 {
			return bad("demand", "Rates per day cannot be negative.")
		}
		if b.PerDay > 0 && (b.LeadHours[0] < 1 || b.LeadHours[1] < b.LeadHours[0] || b.DurationHours[0] < 1 || b.DurationHours[1] < b.DurationHours[0] || len(b.GPUs) == 0) {
			return bad("bookings", "Bookings need lead_hours and duration_hours as [min, max] (at least 1) and a list of GPU counts.")
		}
		if b.CancelProbability < 0 || b.CancelProbability > 1 {
			return bad("cancel_probability", "cancel_probability is between 0 and 1.")
		}
		if b.FlexibleShare < 0 || b.FlexibleShare > 1 {
			return bad("flexible_share", "flexible_share is between 0 and 1.")
		}
		if b.FlexibleSlackHours < 0 || b.FlexibleSlackHours > 24*14 {
			return bad("flexible_slack_hours", "flexible_slack_hours is between 0 and 336.")
		}
		for _, in := range []InstanceDemand{d.Spot, d.OnDemand} {
			if in.PerDay > 0 && (in.RunHours[0] <= 0 || in.RunHours[1] < in.RunHours[0] || len(in.GPUs) == 0) {
				return bad("run_hours", "Launches need run_hours as [min, max] (above 0) and a list of GPU counts.")
			}
		}
		if j := d.Jobs; j.PerDay > 0 && (j.Tasks[0] < 1 || j.Tasks[1] < j.Tasks[0] || j.TaskMinutes[0] < 1 || j.TaskMinutes[1] < j.TaskMinutes[0] ||
			j.GPUsPerTask < 1 || j.MaxParallel < 1) {
			return bad("jobs", "Jobs need tasks and task_minutes as [min, max], gpus_per_task and max_parallel.")
		}
	}
	return nil
}

// hourWeight is the demand weight of an hour of the day relative to the
// day's mean.
func (s *Scenario) hourWeight(hour int) float64 {
	weights := s.HourWeights
	if weights == nil {
		weights = defaultHourWeights
	}
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	if sum == 0 {
		return 0
	}
	return weights[hour] * 24 / sum
}

func (s *Scenario) weekendFactor() float64 {
	if s.WeekendFactor == 0 {
		return 0.6
	}
	return s.WeekendFactor
}

// defaultHourWeights: quiet nights, busy office hours and evenings.
var defaultHourWeights = []float64{0.5, 0.4, 0.3, 0.3, 0.3, 0.4, 0.6, 0.8, 1.2, 1.6, 1.8, 1.8, 1.5, 1.6, 1.8, 1.8, 1.7, 1.5, 1.2, 1.1, 1.0, 0.9, 0.7, 0.6}

// Scale multiplies the fleet and the demand by k (k ≥ 1): the same week,
// k times bigger.
func (s Scenario) Scale(k int) Scenario {
	if k <= 1 {
		return s
	}
	out := s
	out.Customers = min(1000, s.Customers*k)
	out.Fleet = append([]FleetPart(nil), s.Fleet...)
	for i := range out.Fleet {
		out.Fleet[i].Nodes *= k
	}
	out.Demand = make([]Demand, len(s.Demand))
	for i, d := range s.Demand {
		out.Demand[i] = d.scaled(float64(k))
	}
	return out
}

// scaled is the demand with every rate multiplied by f.
func (d Demand) scaled(f float64) Demand {
	d.Bookings.PerDay *= f
	d.Spot.PerDay *= f
	d.OnDemand.PerDay *= f
	d.Jobs.PerDay *= f
	return d
}

// Builtin names the built-in scenarios.
var Builtin = map[string]Scenario{"demo": demoScenario, "peak": peakScenario}

// demoScenario is the demo fleet's typical week: 4 DGX A100 and 2 DGX H100
// in cd-1, bookings filling about half of it, spot and jobs the rest.
var demoScenario = Scenario{
	Name: "demo", Seed: 1, Customers: 12,
	Fleet: []FleetPart{{Model: "a100-80g", Region: "cd-1", Nodes: 4, GPUsPerNode: 8}, {Model: "h100-80g", Region: "cd-1", Nodes: 2, GPUsPerNode: 8}},
	Demand: []Demand{
		{Model: "a100-80g", Region: "cd-1",
			Bookings: BookingDemand{PerDay: 5, LeadHours: [2]int{2, 72}, DurationHours: [2]int{4, 16}, GPUs: []int{2, 4, 8}, CancelProbability: 0.1, WaitlistWhenFull: true},
			Spot:     InstanceDemand{PerDay: 40, RunHours: [2]float64{0.5, 6}, GPUs: []int{1, 2, 4}, AutoRestart: true},
			OnDemand: InstanceDemand{PerDay: 4, RunHours: [2]float64{1, 5}, GPUs: []int{1, 2}},
			Jobs:     JobDemand{PerDay: 2, Tasks: [2]int{10, 40}, TaskMinutes: [2]int{15, 60}, GPUsPerTask: 1, MaxParallel: 8}},
		{Model: "h100-80g", Region: "cd-1",
			Bookings: BookingDemand{PerDay: 2, LeadHours: [2]int{4, 96}, DurationHours: [2]int{4, 24}, GPUs: []int{4, 8}, CancelProbability: 0.1, WaitlistWhenFull: true},
			Spot:     InstanceDemand{PerDay: 16, RunHours: [2]float64{0.5, 4}, GPUs: []int{1, 2}, AutoRestart: true},
			OnDemand: InstanceDemand{PerDay: 2, RunHours: [2]float64{1, 4}, GPUs: []int{1, 2}}},
	},
}

// peakScenario is a crunch (一卡难求): the demo fleet with H100 demand
// twice what the fleet has and A100 demand high.
var peakScenario = Scenario{
	Name: "peak", Seed: 2, Customers: 24, CheckpointMinutes: 30, CheckpointShare: 0.6,
	Fleet: demoScenario.Fleet,
	Demand: []Demand{
		{Model: "a100-80g", Region: "cd-1",
			Bookings: BookingDemand{PerDay: 8, LeadHours: [2]int{2, 96}, DurationHours: [2]int{4, 16}, GPUs: []int{2, 4, 8}, CancelProbability: 0.15, WaitlistWhenFull: true},
			Spot:     InstanceDemand{PerDay: 40, RunHours: [2]float64{0.5, 6}, GPUs: []int{1, 2, 4}, AutoRestart: true},
			OnDemand: InstanceDemand{PerDay: 4, RunHours: [2]float64{1, 5}, GPUs: []int{1, 2}},
			Jobs:     JobDemand{PerDay: 2, Tasks: [2]int{20, 60}, TaskMinutes: [2]int{15, 60}, GPUsPerTask: 1, MaxParallel: 12}},
		{Model: "h100-80g", Region: "cd-1",
			Bookings: BookingDemand{PerDay: 4, LeadHours: [2]int{2, 72}, DurationHours: [2]int{8, 24}, GPUs: []int{4, 8}, CancelProbability: 0.15, WaitlistWhenFull: true,
				FlexibleShare: 0.3},
			Spot:     InstanceDemand{PerDay: 40, RunHours: [2]float64{1, 6}, GPUs: []int{1, 2, 4}, AutoRestart: true},
			OnDemand: InstanceDemand{PerDay: 4, RunHours: [2]float64{1, 4}, GPUs: []int{1, 2}}},
	},
}

// LoadScenario returns a built-in scenario by name, or reads a JSON file.
func LoadScenario(nameOrFile string) (Scenario, error) {
	if s, ok := Builtin[nameOrFile]; ok {
		return s, nil
	}
	if !strings.HasSuffix(nameOrFile, ".json") {
		return Scenario{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "scenario", "Unknown scenario %q: use demo, peak or a .json file.", nameOrFile)
	}
	data, err := os.ReadFile(nameOrFile)
	if err != nil {
		return Scenario{}, fmt.Errorf("read scenario: %w", err)
	}
	return ParseScenario(data)
}

// ParseScenario reads a scenario's JSON (unknown fields are refused, so a
// typo does not silently become a default).
func ParseScenario(data []byte) (Scenario, error) {
	var s Scenario
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, gpuportal.FieldErrorf(gpuportal.EINVALID, "scenario", "The scenario is not valid JSON: %v.", err)
	}
	return s, s.Validate()
}

// ForFleet is a typical week's demand on a fleet — the demo scenario's
// demand per GPU of each model (a model the demo lacks gets the A100's) —
// which the admin's what-if runs for the fleet in service. A fleet of more
// than maxGPUs is simulated on a sample: every k-th node of each group,
// with its share of the demand; sample is that k (1: the whole fleet).
func ForFleet(parts []FleetPart, maxGPUs int) (s Scenario, sample int) {
	total := 0
	for _, p := range parts {
		total += p.Nodes * p.GPUsPerNode
	}
	sample = 1
	if maxGPUs > 0 && total > maxGPUs {
		sample = (total + maxGPUs - 1) / maxGPUs
	}
	s = Scenario{Name: "your fleet", Seed: 1}
	pools := map[[2]string]int{}
	var order [][2]string
	for _, p := range parts {
		nodes := max(1, p.Nodes/sample)
		s.Fleet = append(s.Fleet, FleetPart{Model: p.Model, Region: p.Region, Nodes: nodes, GPUsPerNode: p.GPUsPerNode})
		key := [2]string{p.Model, p.Region}
		if _, seen := pools[key]; !seen {
			order = append(order, key)
		}
		pools[key] += nodes * p.GPUsPerNode
	}
	gpus := 0
	for _, key := range order {
		d, demoGPUs := demoDemandFor(key[0])
		d = d.scaled(float64(pools[key]) / float64(demoGPUs))
		d.Model, d.Region = key[0], key[1]
		s.Demand = append(s.Demand, d)
		gpus += pools[key]
	}
	s.Customers = min(1000, max(4, gpus/4))
	return s, sample
}

// demoDemandFor is the demo scenario's demand for a model, and the GPUs of
// that model it was made for.
func demoDemandFor(model string) (Demand, int) {
	pick := demoScenario.Demand[0]
	for _, d := range demoScenario.Demand {
		if d.Model == model {
			pick = d
		}
	}
	gpus := 0
	for _, f := range demoScenario.Fleet {
		if f.Model == pick.Model {
			gpus += f.Nodes * f.GPUsPerNode
		}
	}
	return pick, gpus
}
