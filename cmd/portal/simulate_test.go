package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gpuportal/simulate"
)

// `portal simulate` for a day of each built-in scenario prints its table
// and, last, the report as JSON; every reservation starts on time. (A
// week is simulate's BenchmarkPeakWeek.)
func TestSimulateBuiltinScenarios(t *testing.T) {
	for _, scenario := range []string{"demo", "peak"} {
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := run(context.Background(), []string{"simulate", "--scenario", scenario, "--days", "1"}, env(nil), &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + out.String())
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			var r simulate.Report
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
				t.Fatalf("last line is not the JSON report: %v", err)
			}
			if !strings.Contains(out.String(), "reservations on time") || r.Scenario != scenario || r.Days != 1 || r.GPUs != 48 {
				t.Fatalf("report %+v", r)
			}
			if r.ReservationsStarted == 0 || r.ReservationsOnTime != 1 {
				t.Errorf("reservations on time %v of %d, want all", r.ReservationsOnTime, r.ReservationsStarted)
			}
			if r.GPUHours.Spot == 0 || r.GPUHours.Reserved == 0 || r.RevenueTotal <= 0 {
				t.Errorf("a week with no spot, bookings or revenue: %+v", r)
			}
		})
	}
}

func TestSimulateWithPoliciesAndBadInput(t *testing.T) {
	dir := t.TempDir()
	policies := filepath.Join(dir, "draft.json")
	if err := os.WriteFile(policies, []byte(`{"global": {"min_duration_hours": 4, "max_duration_hours": 336, "max_advance_days": 90, "reservable_percent": 80,
		"off_peak": [], "cancellation_tiers": [{"min_hours_before": 0, "fee_percent": 100}], "late_cancel_limit_30d": 3,
		"spot_discount_percent": 80, "spot_notice_seconds": 120, "spot_grace_seconds": 30, "waitlist_claim_minutes": 30,
		"on_demand_min_billable_minutes": 60}, "models": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"simulate", "--scenario", "demo", "--days", "1", "--policies", policies}, env(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"global": {"spot_discount_percent": 150}}`), 0o644)
	for _, args := range [][]string{
		{"--scenario", "nonesuch"},
		{"--days", "0"},
		{"--policies", bad},
		{"--policies", filepath.Join(dir, "missing.json")},
	} {
		err := run(context.Background(), append([]string{"simulate"}, args...), env(nil), io.Discard, io.Discard)
		if err == nil {
			t.Errorf("simulate %v: no error", args)
		}
	}
}
