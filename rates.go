package gpuportal

import "time"

// RateBucket is the AWS-style interruption-frequency bucket of a rate
// (a fraction: 0.05 is 5 %). Edges belong to the higher bucket: exactly 5 %
// is "5-10%".
func RateBucket(rate float64) string {
	switch {
	case rate < 0.05:
		return "<5%"
	case rate < 0.10:
		return "5-10%"
	case rate < 0.15:
		return "10-15%"
	case rate < 0.20:
		return "15-20%"
	}
	return ">20%"
}

// InterruptionRates is GET /api/v1/interruption-rates's answer.
type InterruptionRates struct {
	Model      string                  `json:"model"`
	Region     string                  `json:"region"`
	Trailing   TrailingRate            `json:"trailing_30d"`
	ByHour     []float64               `json:"by_hour_of_week"` // 168 cells: Monday 00:00 first, site zone; interruptions per 100 spot GPU-hours
	GPUHours   []float64               `json:"gpu_hours_by_hour_of_week"`
	Reasons    map[InterruptReason]int `json:"reasons"`
	Bursts     int                     `json:"bursts"` // interruptions within 3 minutes of each other counted once
	SafeUntil  *time.Time              `json:"safe_until"`
	Count      int                     `json:"count"`
	TimeZone   string                  `json:"time_zone"`
	ComputedAt time.Time               `json:"computed_at"`
}

// TrailingRate is the trailing 30 days: spot instances that ran, how many
// were interrupted, the rate and its bucket.
type TrailingRate struct {
	Instances   int     `json:"instances"`
	Interrupted int     `json:"interrupted"`
	Rate        float64 `json:"rate"`
	Bucket      string  `json:"bucket"`
	// The work interruptions lost (GPU-hours since the workloads' last
	// checkpoint reports), per 100 spot GPU-hours run, and the share of
	// interruptions that lost under 5 minutes of work (1 when none lost
	// anything to measure yet).
	LostGPUHours        float64 `json:"lost_gpu_hours"`
	LostPer100GPUHours  float64 `json:"lost_gpu_hours_per_100_spot_gpu_hours"`
	ShareLostUnder5Min  float64 `json:"share_lost_under_5_min"`
	MeasuredInterrupted int     `json:"measured_interruptions"`
}

// LostUnder is the work an interruption may lose and still count as
// "lost under 5 minutes": 5 minutes on each of its GPUs.
const LostUnder = 5 * time.Minute

// HourOfWeek is the heatmap cell of t in loc: weekday (Monday = 0) × 24 +
// hour.
func HourOfWeek(t time.Time, loc *time.Location) int {
	l := t.In(loc)
	return ((int(l.Weekday())+6)%7)*24 + l.Hour()
}

// CountsForRates reports whether an interruption for reason is one of the
// spot capacity the published rates count: the platform needing the GPUs
// (a booking, an on-demand launch, a failed node, an administrator) — not
// a job task giving way, a stop for lack of money or a disabled account.
func CountsForRates(reason InterruptReason) bool {
	switch reason {
	case ReasonReservation, ReasonOnDemand, ReasonNodeFailure, ReasonAdmin:
		return true
	}
	return false
}
