package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"gpuportal"
)

func run(t *testing.T, s Scenario, days int, policies *gpuportal.Policies) *Report {
	t.Helper()
	r, err := Run(context.Background(), Options{Scenario: s, Days: days, Policies: policies})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func reportJSON(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	return lines[len(lines)-1]
}

func TestSameSeedSameReport(t *testing.T) {
	t.Parallel()
	first := reportJSON(t, run(t, Builtin["demo"], 1, nil))
	if again := reportJSON(t, run(t, Builtin["demo"], 1, nil)); again != first {
		t.Fatalf("same seed, different reports:\n%s\n%s", first, again)
	}
	other := Builtin["demo"]
	other.Seed = 99
	if different := reportJSON(t, run(t, other, 1, nil)); different == first {
		t.Fatalf("another seed gave the very same report: %s", first)
	}
}

// A policy change moves the report the way an admin would expect: a
// deeper spot discount earns less on spot and saves customers more; a
// lower reservable share (in a crunch) sells fewer reservation hours and
// leaves more to spot.
func TestPolicyChangesMoveTheReport(t *testing.T) {
	t.Parallel()
	const days = 2
	base := run(t, Builtin["demo"], days, nil)
	busy := run(t, Builtin["peak"], days, nil)

	t.Run("spot discount 90 %", func(t *testing.T) {
		t.Parallel()
		p := gpuportal.DefaultPolicies()
		p.Global.SpotDiscountPercent = 90
		deeper := run(t, Builtin["demo"], days, &p)
		if deeper.Revenue["spot"] >= base.Revenue["spot"] {
			t.Errorf("spot revenue %s at 90 %% off, %s at 70 %%: want less", deeper.Revenue["spot"], base.Revenue["spot"])
		}
		if deeper.CustomerSavings <= base.CustomerSavings {
			t.Errorf("savings %s at 90 %% off, %s at 70 %%: want more", deeper.CustomerSavings, base.CustomerSavings)
		}
	})
	t.Run("reservable share 50 %", func(t *testing.T) {
		t.Parallel()
		p := gpuportal.DefaultPolicies()
		p.Global.ReservablePercent = 50
		half := run(t, Builtin["peak"], days, &p)
		if half.GPUHours.Reserved > busy.GPUHours.Reserved {
			t.Errorf("reserved GPU-hours %.1f at 50 %%, %.1f at 100 %%: want no more", half.GPUHours.Reserved, busy.GPUHours.Reserved)
		}
		if half.GPUHours.Spot <= busy.GPUHours.Spot {
			t.Errorf("spot GPU-hours %.1f at 50 %%, %.1f at 100 %%: want more", half.GPUHours.Spot, busy.GPUHours.Spot)
		}
		if half.Demand.Booked >= busy.Demand.Booked {
			t.Errorf("a smaller reservable share booked as many: %+v vs %+v", half.Demand, busy.Demand)
		}
	})
}

// Every GPU-hour is accounted for once, and the shares are fractions.
func TestReportAddsUp(t *testing.T) {
	t.Parallel()
	r := run(t, Builtin["peak"], 2, nil)
	total := float64(r.GPUs * r.Days * 24)
	sum := r.GPUHours.Reserved + r.GPUHours.OnDemand + r.GPUHours.Spot + r.GPUHours.Idle
	if sum < total-0.5 || sum > total+0.5 {
		t.Errorf("GPU-hours add up to %.1f, the fleet had %.0f", sum, total)
	}
	for name, v := range map[string]float64{"utilization": r.Utilization, "spot_demand_served": r.SpotDemandServed, "reservations_on_time": r.ReservationsOnTime} {
		if v < 0 || v > 1 {
			t.Errorf("%s = %v, want a fraction", name, v)
		}
	}
	if r.ReservationsOnTime != 1 {
		t.Errorf("reservations on time = %v of %d, want all", r.ReservationsOnTime, r.ReservationsStarted)
	}
	var revenue gpuportal.Fen
	for _, v := range r.Revenue {
		revenue += v
	}
	if revenue != r.RevenueTotal || revenue <= 0 {
		t.Errorf("revenue %v totals %s, want a positive sum %s", r.Revenue, r.RevenueTotal, revenue)
	}
}

// The scenario file documented in the README is valid and runs.
func TestScenarioFileOfTheReadme(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "<!-- scenario example -->\n```json\n"
	i := strings.Index(string(readme), start)
	if i < 0 {
		t.Fatal("README has no scenario example")
	}
	body := string(readme)[i+len(start):]
	body = body[:strings.Index(body, "```")]
	s, err := ParseScenario([]byte(body))
	if err != nil {
		t.Fatalf("README's scenario: %v", err)
	}
	if r := run(t, s, 1, nil); r.GPUs == 0 || r.Demand.Bookings+r.Demand.SpotLaunches == 0 {
		t.Fatalf("README's scenario simulated nothing: %+v", r)
	}
}

func TestBadScenarios(t *testing.T) {
	t.Parallel()
	good, _ := json.Marshal(Builtin["demo"])
	for _, tc := range []struct {
		name, json, field string
	}{
		{"not JSON", `{"name": `, "scenario"},
		{"unknown field", strings.Replace(string(good), `"customers"`, `"custmers"`, 1), "scenario"},
		{"no customers", strings.Replace(string(good), `"customers":12`, `"customers":0`, 1), "customers"},
		{"no fleet", `{"name":"x","customers":1,"fleet":[]}`, "fleet"},
		{"huge fleet", `{"name":"x","customers":1,"fleet":[{"model":"a100-80g","region":"cd-1","nodes":5000,"gpus_per_node":8}]}`, "fleet"},
		{"negative rate", `{"name":"x","customers":1,"fleet":[{"model":"a100-80g","region":"cd-1","nodes":1,"gpus_per_node":8}],
			"demand":[{"model":"a100-80g","region":"cd-1","spot":{"per_day":-1}}]}`, "demand"},
		{"elasticity out of range", strings.Replace(string(good), `"customers":12`, `"customers":12,"spot_price_elasticity":9`, 1), "spot_price_elasticity"},
		{"bad hour weights", `{"name":"x","customers":1,"fleet":[{"model":"a100-80g","region":"cd-1","nodes":1,"gpus_per_node":8}],"hour_weights":[1,2]}`, "hour_weights"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(tc.json))
			if gpuportal.ErrorCode(err) != gpuportal.EINVALID || gpuportal.ErrorField(err) != tc.field {
				t.Fatalf("error %v (code %s, field %q), want invalid_input on %q", err, gpuportal.ErrorCode(err), gpuportal.ErrorField(err), tc.field)
			}
		})
	}
	if _, err := Run(context.Background(), Options{Scenario: Builtin["demo"], Days: 0}); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Fatalf("0 days: %v, want invalid_input", err)
	}
	if _, err := LoadScenario("nonesuch"); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Fatalf("unknown scenario: %v, want invalid_input", err)
	}
}

// (issue 25) Customers who would take any window of the same length in a
// range book more of their full windows than exact ones: the report says
// how many a flexible request saved, and reservations stay on time.
func TestFlexibleCustomersSaveBookings(t *testing.T) {
	t.Parallel()
	exact, flexible := Builtin["peak"], Builtin["peak"]
	exact.Demand = append([]Demand(nil), exact.Demand...)
	flexible.Demand = append([]Demand(nil), flexible.Demand...)
	for k := range exact.Demand {
		// Three times the peak's bookings: windows are full often.
		exact.Demand[k].Bookings.PerDay *= 3
		flexible.Demand[k].Bookings.PerDay *= 3
		exact.Demand[k].Bookings.FlexibleShare = 0
		flexible.Demand[k].Bookings.FlexibleShare = 1
	}
	a, b := run(t, exact, 1, nil), run(t, flexible, 1, nil)
	if a.Demand.Flexible.WindowFull != 0 || a.Demand.Flexible.Saved != 0 {
		t.Errorf("exact customers: %+v", a.Demand.Flexible)
	}
	f := b.Demand.Flexible
	if f.WindowFull == 0 || f.Saved == 0 || f.Saved != f.FromOfferings+f.FromWaitlist || f.Saved > f.WindowFull {
		t.Fatalf("flexible customers: %+v", f)
	}
	if b.Demand.Booked <= a.Demand.Booked {
		t.Errorf("booked: %d flexible, %d exact; flexible customers should book more", b.Demand.Booked, a.Demand.Booked)
	}
	if b.ReservationsOnTime != 1 {
		t.Errorf("reservations on time with flexible customers: %v", b.ReservationsOnTime)
	}
	if err := flexible.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := flexible
	bad.Demand = append([]Demand(nil), flexible.Demand...)
	bad.Demand[0].Bookings.FlexibleShare = 1.5
	if err := bad.Validate(); gpuportal.ErrorField(err) != "flexible_share" {
		t.Errorf("flexible_share 1.5: %v", err)
	}
}

// (issue 26) Choosing victims by the work they lose since their
// checkpoints loses less than youngest-first on the peak scenario, and
// every reservation still starts on time.
func TestWorkLostVictimsLoseLessThanYoungest(t *testing.T) {
	t.Parallel()
	byWork, youngest := Builtin["peak"], Builtin["peak"]
	youngest.Victims = gpuportal.VictimsYoungest
	a, b := run(t, byWork, 1, nil), run(t, youngest, 1, nil)
	if a.Victims != gpuportal.VictimsByWorkLost || b.Victims != gpuportal.VictimsYoungest {
		t.Fatalf("rules: %s, %s", a.Victims, b.Victims)
	}
	if b.LostGPUHours == 0 || a.LostGPUHours >= b.LostGPUHours {
		t.Errorf("lost GPU-hours: %.1f by work lost, %.1f youngest first; want less by work lost", a.LostGPUHours, b.LostGPUHours)
	}
	if a.ReservationsOnTime != 1 || b.ReservationsOnTime != 1 {
		t.Errorf("reservations on time: %v, %v", a.ReservationsOnTime, b.ReservationsOnTime)
	}
	bad := byWork
	bad.Victims = "oldest"
	if err := bad.Validate(); gpuportal.ErrorField(err) != "victims" {
		t.Errorf("victims oldest: %v", err)
	}
}

// (issue 28) Spot demand follows the spot price against the reference
// policies: per model, (price ÷ reference price)^−elasticity, bounded.
func TestSpotDemandFactors(t *testing.T) {
	ref := gpuportal.DefaultPolicies() // 70 % off: spot at 30 % of list
	with := func(global int, models map[string]int) gpuportal.Policies {
		p := gpuportal.DefaultPolicies()
		p.Global.SpotDiscountPercent = global
		p.Models = map[string]gpuportal.PolicyOverride{}
		for m, d := range models {
			p.Models[m] = gpuportal.PolicyOverride{SpotDiscountPercent: &d}
		}
		return p
	}
	elastic := func(e float64) *float64 { return &e }
	demand := []Demand{{Model: "a100-80g", Region: "cd-1"}, {Model: "h100-80g", Region: "cd-1"}}
	for _, tc := range []struct {
		name       string
		elasticity *float64
		run        gpuportal.Policies
		want       map[string]float64
	}{
		{"the same prices", nil, ref, map[string]float64{"a100-80g": 1, "h100-80g": 1}},
		{"a third dearer at the default 1.5", nil, with(60, nil), map[string]float64{"a100-80g": 0.6495, "h100-80g": 0.6495}},
		{"two-thirds dearer at 1", elastic(1), with(50, nil), map[string]float64{"a100-80g": 0.6, "h100-80g": 0.6}},
		{"inelastic", elastic(0), with(50, nil), map[string]float64{"a100-80g": 1, "h100-80g": 1}},
		{"a third of the price, at most 4 times", nil, with(90, nil), map[string]float64{"a100-80g": 4, "h100-80g": 4}},
		{"free spot, at most 4 times", nil, with(100, nil), map[string]float64{"a100-80g": 4, "h100-80g": 4}},
		{"five times dearer, at least a quarter", elastic(5), with(0, nil), map[string]float64{"a100-80g": 0.25, "h100-80g": 0.25}},
		{"one model's override", nil, with(70, map[string]int{"h100-80g": 60}), map[string]float64{"a100-80g": 1, "h100-80g": 0.6495}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SpotDemandFactors(Scenario{Demand: demand, SpotPriceElasticity: tc.elasticity}, tc.run, ref)
			for m, want := range tc.want {
				if d := got[m] - want; d > 0.0005 || d < -0.0005 {
					t.Errorf("%s: factor %.4f, want %.4f", m, got[m], want)
				}
			}
		})
	}
}

// (issue 28) A dearer spot price under a reference brings fewer spot
// launches, and says so in the report; without a reference (or with an
// elasticity of 0) the demand is exactly as written.
func TestSpotDemandFollowsThePrice(t *testing.T) {
	t.Parallel()
	ref := gpuportal.DefaultPolicies()
	dearer := gpuportal.DefaultPolicies()
	dearer.Global.SpotDiscountPercent = 50
	runWith := func(s Scenario, reference *gpuportal.Policies) *Report {
		r, err := Run(context.Background(), Options{Scenario: s, Days: 1, Policies: &dearer, Reference: reference})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	asWritten := runWith(Builtin["demo"], nil)
	elastic := runWith(Builtin["demo"], &ref)
	if elastic.Demand.SpotLaunches >= asWritten.Demand.SpotLaunches || elastic.Demand.Bookings != asWritten.Demand.Bookings {
		t.Errorf("spot launches %d with the price's effect, %d as written (bookings %d, %d): want fewer spot launches, the same bookings",
			elastic.Demand.SpotLaunches, asWritten.Demand.SpotLaunches, elastic.Demand.Bookings, asWritten.Demand.Bookings)
	}
	if f := elastic.SpotDemandFactor["a100-80g"]; f < 0.46 || f > 0.47 || elastic.SpotPriceElasticity != DefaultSpotPriceElasticity {
		t.Errorf("the report's assumption: elasticity %v, factor %v", elastic.SpotPriceElasticity, elastic.SpotDemandFactor)
	}
	if asWritten.SpotDemandFactor["a100-80g"] != 1 {
		t.Errorf("without a reference the factor is %v", asWritten.SpotDemandFactor)
	}
	zero := 0.0
	inelastic := Builtin["demo"]
	inelastic.SpotPriceElasticity = &zero
	if r := runWith(inelastic, &ref); r.Demand.SpotLaunches != asWritten.Demand.SpotLaunches || r.RevenueTotal != asWritten.RevenueTotal {
		t.Errorf("an elasticity of 0 moved the demand: %d launches, %s; want %d, %s", r.Demand.SpotLaunches, r.RevenueTotal, asWritten.Demand.SpotLaunches, asWritten.RevenueTotal)
	}
}
