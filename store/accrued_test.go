package store

import (
	"database/sql"
	"testing"
	"time"

	"gpuportal"
)

// accruedAtMost is never below what the runs have exactly accrued, so an
// account it calls clear is clear; for one run it is exactly what the run
// accrued.
func TestAccruedAtMostBoundsTheRunsCost(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	started := func(ago time.Duration) sql.NullInt64 { return sql.NullInt64{Int64: now.Add(-ago).Unix(), Valid: true} }
	for _, tc := range []struct {
		name  string
		runs  []runningCost
		exact bool // the bound may equal the exact cost
	}{
		{"one run, whole minutes", []runningCost{{kind: gpuportal.KindSpot, count: 1, price: 600, started: started(90 * time.Minute)}}, true},
		{"one run, a minute begun", []runningCost{{kind: gpuportal.KindOnDemand, count: 8, price: 2999, started: started(61*time.Minute + time.Second)}}, true},
		{"runs started apart", []runningCost{
			{kind: gpuportal.KindSpot, count: 1, price: 777, started: started(3*time.Hour + 7*time.Second)},
			{kind: gpuportal.KindSpot, count: 3, price: 333, started: started(59 * time.Second)},
			{kind: gpuportal.KindOnDemand, count: 2, price: 1999, started: started(47 * time.Minute)},
		}, false},
		{"fractions of a fen each", []runningCost{
			{kind: gpuportal.KindSpot, count: 1, price: 7, started: started(time.Minute)},
			{kind: gpuportal.KindSpot, count: 1, price: 7, started: started(time.Minute)},
		}, true},
		{"not started yet", []runningCost{{kind: gpuportal.KindSpot, count: 1, price: 600}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held, burn gpuportal.Fen
			var earliest sql.NullInt64
			for _, r := range tc.runs {
				h, b := r.accrued(now)
				held, burn = held+h, burn+b
				if r.started.Valid && (!earliest.Valid || r.started.Int64 < earliest.Int64) {
					earliest = r.started
				}
			}
			bound := accruedAtMost(burn, earliest, now)
			if bound < held {
				t.Fatalf("bound %d below the exact %d", bound, held)
			}
			if tc.exact && len(tc.runs) == 1 && bound != held {
				t.Fatalf("bound %d, exact %d for one run", bound, held)
			}
			if !tc.exact && bound == held {
				t.Fatalf("bound %d equals the exact cost of runs started apart: the case tests nothing", bound)
			}
		})
	}
}
