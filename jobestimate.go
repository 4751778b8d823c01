package gpuportal

import "math"

// MaxTaskHoursEstimate bounds the hours a customer may guess one task takes.
const MaxTaskHoursEstimate = 720

// JobEstimate is what a job would cost and how long it would take, worked
// out before it is submitted from the customer's guess of one task's
// hours. It assumes no interruption: each one repeats part of a task, on
// spot, from its last checkpoint.
type JobEstimate struct {
	TaskHours float64 // the guess it is built on
	GPUHours  float64 // tasks × GPUs per task × task hours
	// Parallel is how many tasks run at once: the job's tasks at once,
	// bounded by its tasks and by the region's healthy GPUs.
	Parallel int
	Waves    int     // rounds of Parallel tasks
	Hours    float64 // Waves × task hours
	// OnDemandPercent is the share of tasks a hybrid job's on-demand
	// workers run (at list price).
	OnDemandPercent int
	Cost            Fen // at today's prices
	AllOnDemand     Fen // the same GPU-hours at list price
}

// Saved is what the estimate saves against running it all on-demand.
func (e JobEstimate) Saved() Fen { return e.AllOnDemand - e.Cost }

// EstimateJob works out a job's estimate. req must be valid (its
// defaults filled); spot and list are the model's prices per GPU-hour;
// healthyGPUs are the model's healthy GPUs in the region (0: none now, the
// estimate then assumes the job's own parallelism).
func EstimateJob(req JobRequest, taskHours float64, spot, list Fen, healthyGPUs int) (JobEstimate, error) {
	if math.IsNaN(taskHours) || taskHours <= 0 || taskHours > MaxTaskHoursEstimate {
		return JobEstimate{}, FieldErrorf(EINVALID, "task_hours", "Hours per task must be more than 0 and at most %d.", MaxTaskHoursEstimate)
	}
	e := JobEstimate{TaskHours: taskHours, GPUHours: float64(req.Tasks*req.GPUsPerTask) * taskHours}
	e.Parallel = max(min(req.MaxParallel, req.Tasks), 1)
	if fit := healthyGPUs / req.GPUsPerTask; fit > 0 && fit < e.Parallel {
		e.Parallel = fit
	}
	e.Waves = (req.Tasks + e.Parallel - 1) / e.Parallel
	e.Hours = float64(e.Waves) * taskHours
	share := 0.0
	if req.Kind == JobHybrid && req.OnDemandWorkers > 0 {
		share = float64(min(req.OnDemandWorkers, e.Parallel)) / float64(e.Parallel)
	}
	e.OnDemandPercent = int(math.Round(share * 100))
	e.Cost = Fen(math.Ceil(e.GPUHours * (share*float64(list) + (1-share)*float64(spot))))
	e.AllOnDemand = Fen(math.Ceil(e.GPUHours * float64(list)))
	return e, nil
}
