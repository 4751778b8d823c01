package simulate

import (
	"context"
	"os"
	"strconv"
	"testing"
)

func BenchmarkPeakWeek(b *testing.B) {
	for b.Loop() {
		if _, err := Run(context.Background(), Options{Scenario: Builtin["peak"], Days: 7}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkThirtyDaysOf1000GPUs: DESIGN §7's simulation target — 30 days
// of the demo week's demand on a fleet 20 times the demo's (960 GPUs).
// SIM_DAYS shortens it for profiling.
func BenchmarkThirtyDaysOf1000GPUs(b *testing.B) {
	days := 30
	if d, err := strconv.Atoi(os.Getenv("SIM_DAYS")); err == nil {
		days = d
	}
	for b.Loop() {
		if _, err := Run(context.Background(), Options{Scenario: Builtin["demo"].Scale(20), Days: days}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/run")
}
