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
	r, err := Run(context.Background(), Options{Scenario: s, Days: days, Policies: policies, Dir: t.TempDir()})
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
