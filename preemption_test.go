package gpuportal

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The work-lost choice is the cheapest cover: checked against every
// subset of small random sets of spot instances.
func TestChooseVictimsByWorkLostIsTheCheapestCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for round := 0; round < 300; round++ {
		n := 1 + rng.IntN(9)
		var spots []SpotCandidate
		total := 0
		for k := range n {
			c := SpotCandidate{ID: int64(k + 1), Count: 1 + rng.IntN(8), StartedAt: now.Add(-time.Duration(1+rng.IntN(600)) * time.Minute)}
			if rng.IntN(2) == 0 {
				c.LastCheckpoint = c.StartedAt.Add(time.Duration(rng.Int64N(int64(now.Sub(c.StartedAt)))))
			}
			spots = append(spots, c)
			total += c.Count
		}
		need := 1 + rng.IntN(total)
		got := ChooseVictimsByWorkLost(spots, need, now)
		freed, lost := 0, int64(0)
		for _, v := range got {
			freed += v.Count
			lost += v.WorkAtRisk(now)
		}
		if freed < need {
			t.Fatalf("round %d: frees %d of %d", round, freed, need)
		}
		best := int64(-1)
		for mask := 1; mask < 1<<n; mask++ {
			f, w := 0, int64(0)
			for k := range n {
				if mask&(1<<k) != 0 {
					f += spots[k].Count
					w += spots[k].WorkAtRisk(now)
				}
			}
			if f >= need && (best < 0 || w < best) {
				best = w
			}
		}
		if lost != best {
			t.Fatalf("round %d: loses %d GPU-s; the cheapest cover loses %d (%+v, need %d)", round, lost, best, spots, need)
		}
	}
}

func TestLostGPUSeconds(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		checkpoint time.Time
		stop       time.Time
		want       int64
	}{
		{"no report: since the start", time.Time{}, start.Add(10 * time.Minute), 4 * 600},
		{"since the last report", start.Add(9 * time.Minute), start.Add(10 * time.Minute), 4 * 60},
		{"a report from before the start counts from the start", start.Add(-time.Hour), start.Add(time.Minute), 4 * 60},
		{"stopped at the report: nothing lost", start.Add(5 * time.Minute), start.Add(5 * time.Minute), 0},
	} {
		if got := LostGPUSeconds(4, start, tc.checkpoint, tc.stop); got != tc.want {
			t.Errorf("%s: %d; want %d", tc.name, got, tc.want)
		}
	}
}

func TestChooseVictims(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	spots := []SpotCandidate{
		{ID: 1, Count: 2, StartedAt: t0},
		{ID: 2, Count: 4, StartedAt: t0.Add(time.Hour)},
		{ID: 3, Count: 2, StartedAt: t0.Add(2 * time.Hour)},
		{ID: 4, Count: 1, StartedAt: t0.Add(3 * time.Hour)},
	}
	ids := func(v []SpotCandidate) []int64 {
		var out []int64
		for _, s := range v {
			out = append(out, s.ID)
		}
		return out
	}
	for _, tt := range []struct {
		need int
		want []int64
	}{
		{0, nil},
		{1, []int64{4}}, // any one instance covers: the youngest
		{3, []int64{2}}, // one 4-GPU instance instead of two 2-GPU ones
		{4, []int64{2}},
		{5, []int64{4, 2}}, // two instances, the youngest that still cover
		{6, []int64{3, 2}}, // the younger of the two 2-GPU instances
		{9, []int64{4, 3, 2, 1}},
	} {
		got := ChooseVictims(spots, tt.need)
		freed := 0
		for _, s := range got {
			freed += s.Count
		}
		if len(got) != len(tt.want) || (tt.need > 0 && freed < tt.need) {
			t.Errorf("need %d: got %v; want %v", tt.need, ids(got), tt.want)
			continue
		}
		for i := range got {
			if got[i].ID != tt.want[i] {
				t.Errorf("need %d: got %v; want %v", tt.need, ids(got), tt.want)
				break
			}
		}
	}
}
