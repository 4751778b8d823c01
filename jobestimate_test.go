package gpuportal

import "testing"

func TestEstimateJob(t *testing.T) {
	spot, list := Fen(240), Fen(800) // ¥2.40 and ¥8.00 per GPU-hour
	for _, tc := range []struct {
		name      string
		req       JobRequest
		taskHours float64
		healthy   int
		want      JobEstimate
	}{
		{
			name: "spot: 20 one-GPU tasks, 4 at once, 1.5 h each",
			req:  JobRequest{Kind: JobSpot, Tasks: 20, GPUsPerTask: 1, MaxParallel: 4}, taskHours: 1.5, healthy: 16,
			want: JobEstimate{TaskHours: 1.5, GPUHours: 30, Parallel: 4, Waves: 5, Hours: 7.5, Cost: 7200, AllOnDemand: 24000},
		},
		{
			name: "the region's GPUs bound the parallelism",
			req:  JobRequest{Kind: JobSpot, Tasks: 10, GPUsPerTask: 4, MaxParallel: 8}, taskHours: 2, healthy: 8,
			want: JobEstimate{TaskHours: 2, GPUHours: 80, Parallel: 2, Waves: 5, Hours: 10, Cost: 19200, AllOnDemand: 64000},
		},
		{
			name: "fewer tasks than tasks at once",
			req:  JobRequest{Kind: JobSpot, Tasks: 3, GPUsPerTask: 1, MaxParallel: 10}, taskHours: 1, healthy: 0,
			want: JobEstimate{TaskHours: 1, GPUHours: 3, Parallel: 3, Waves: 1, Hours: 1, Cost: 720, AllOnDemand: 2400},
		},
		{
			name: "hybrid: 1 of 4 workers on-demand",
			req:  JobRequest{Kind: JobHybrid, Tasks: 8, GPUsPerTask: 1, MaxParallel: 4, OnDemandWorkers: 1}, taskHours: 1, healthy: 16,
			want: JobEstimate{TaskHours: 1, GPUHours: 8, Parallel: 4, Waves: 2, Hours: 2, OnDemandPercent: 25, Cost: 3040, AllOnDemand: 6400},
		},
		{
			name: "a spot job's on-demand workers count for nothing",
			req:  JobRequest{Kind: JobSpot, Tasks: 1, GPUsPerTask: 1, MaxParallel: 1, OnDemandWorkers: 3}, taskHours: 0.25, healthy: 8,
			want: JobEstimate{TaskHours: 0.25, GPUHours: 0.25, Parallel: 1, Waves: 1, Hours: 0.25, Cost: 60, AllOnDemand: 200},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EstimateJob(tc.req, tc.taskHours, spot, list, tc.healthy)
			if err != nil || got != tc.want {
				t.Fatalf("EstimateJob = %+v, %v\n want %+v", got, err, tc.want)
			}
			if got.Saved() != tc.want.AllOnDemand-tc.want.Cost {
				t.Errorf("saved %s", got.Saved())
			}
		})
	}
	for _, bad := range []float64{0, -1, MaxTaskHoursEstimate + 1} {
		if _, err := EstimateJob(JobRequest{Tasks: 1, GPUsPerTask: 1, MaxParallel: 1}, bad, spot, list, 8); ErrorField(err) != "task_hours" {
			t.Errorf("task hours %v: %v", bad, err)
		}
	}
}
