package plan

import "testing"

// A spot launch reads the pool's GPUs only when the counts leave it room
// and do not already say it fits; whenever it does not read them, the
// answer without them is the answer with them.
func TestSpotLaunchReadsGPUsOnlyWhenTheyDecide(t *testing.T) {
	cases := []struct {
		name       string
		spot, wait int // GPUs placed spot instances hold, and what spot launches wait for
		jobTasks   int // of the placed spot, job tasks'
		count      int
		wantDetail bool
		wantFits   bool
	}{
		{name: "room to spare", spot: 4, count: 2, wantFits: true},
		{name: "no room", spot: 16, count: 1, wantFits: false},
		{name: "job tasks give way", spot: 16, jobTasks: 4, count: 2, wantFits: true},
		// The counts leave room but what waits takes it: only the GPUs
		// (an idle node right now) can say yes.
		{name: "room that waiting launches take", spot: 8, wait: 8, count: 2, wantDetail: true, wantFits: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := func() *Pool {
				pl := testPool(8, "n1", "n2")
				pl.Spot, pl.SpotWait, pl.JobTaskSpot = c.spot, c.wait, c.jobTasks
				for k := range c.spot {
					pl.GPUs[k].Holder = int64(100 + k)
				}
				pl.Held = c.spot
				return pl
			}
			pl := pool()
			if got := SpotLaunchNeedsDetail(pl, c.count, t0); got != c.wantDetail {
				t.Fatalf("needs the GPUs: %v, want %v", got, c.wantDetail)
			}
			withGPUs := SpotLaunchFits(pool(), c.count, t0)
			counted := pool()
			counted.Detail, counted.GPUs = DetailNone, nil
			withoutGPUs := SpotLaunchFits(counted, c.count, t0)
			if withGPUs != c.wantFits {
				t.Fatalf("fits (with the GPUs): %v, want %v", withGPUs, c.wantFits)
			}
			if !c.wantDetail && withoutGPUs != withGPUs {
				t.Fatalf("without the GPUs it fits: %v, with them %v", withoutGPUs, withGPUs)
			}
		})
	}
}
