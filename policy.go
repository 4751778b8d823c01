package gpuportal

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Weekdays as policies name them, Monday first (the order of the
// interruption-rate heatmap and the calendar).
var Weekdays = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}

// OffPeakWindow is a discount on some hours of some days, in the site time
// zone: hours [FromHour, ToHour) on each of Days.
type OffPeakWindow struct {
	Days            []string `json:"days"`
	FromHour        int      `json:"from_hour"`
	ToHour          int      `json:"to_hour"`
	DiscountPercent int      `json:"discount_percent"`
}

// CancellationTier: cancelling at least MinHoursBefore hours before the
// start costs FeePercent of the booking price.
type CancellationTier struct {
	MinHoursBefore int `json:"min_hours_before"`
	FeePercent     int `json:"fee_percent"`
}

// Policy is the set of rules that applies to one model (DESIGN §2).
type Policy struct {
	MinDurationHours           int                `json:"min_duration_hours"`
	MaxDurationHours           int                `json:"max_duration_hours"`
	MaxAdvanceDays             int                `json:"max_advance_days"`
	ReservablePercent          int                `json:"reservable_percent"`
	OffPeak                    []OffPeakWindow    `json:"off_peak"`
	CancellationTiers          []CancellationTier `json:"cancellation_tiers"`
	LateCancelLimit30d         int                `json:"late_cancel_limit_30d"`
	SpotDiscountPercent        int                `json:"spot_discount_percent"`
	SpotNoticeSeconds          int                `json:"spot_notice_seconds"`
	SpotGraceSeconds           int                `json:"spot_grace_seconds"`
	WaitlistClaimMinutes       int                `json:"waitlist_claim_minutes"`
	OnDemandMinBillableMinutes int                `json:"on_demand_min_billable_minutes"`
	// Work-preserving preemption: the bounds of the notice a spot launch
	// may ask for (notice_seconds), and how long before a notice is due a
	// rebalance recommendation goes out (0: none).
	SpotNoticeMinSeconds int `json:"spot_notice_min_seconds"`
	SpotNoticeMaxSeconds int `json:"spot_notice_max_seconds"`
	RebalanceLeadMinutes int `json:"rebalance_lead_minutes"`
	// Volumes (global only: a volume belongs to no model): the price per
	// GiB-month of the size provisioned, and each user's quota of GiB in
	// all their volumes (admins override it per user).
	VolumePricePerGiBMonthFen int `json:"volume_price_per_gib_month_fen"`
	MaxVolumeGiB              int `json:"max_volume_gib"`
	// Instances' disks (global only): the size a launch gets unless it
	// asks (disk_gib), the largest it may ask, and how much of each disk
	// is free — the rest is billed per GiB-hour at the volume price.
	ContainerDiskGiB     int `json:"container_disk_gib"`
	MaxContainerDiskGiB  int `json:"max_container_disk_gib"`
	ContainerDiskFreeGiB int `json:"container_disk_free_gib"`
	// NoGPUPricePerHourFen (global only) is the hourly price of an
	// instance started with no GPU (无卡模式: start {count:0}), to set up
	// an environment or move data without paying for GPUs.
	NoGPUPricePerHourFen int `json:"no_gpu_price_per_hour_fen"`
	// GPUFailureCreditPercent (global only) is how much of the hour in
	// progress an instance whose GPU failed under it is credited back
	// (100: all of it; 0: nothing).
	GPUFailureCreditPercent int `json:"gpu_failure_credit_percent"`
}

// PolicyOverride names only what differs from the global policy for one
// model; nil fields inherit.
type PolicyOverride struct {
	MinDurationHours           *int                `json:"min_duration_hours,omitempty"`
	MaxDurationHours           *int                `json:"max_duration_hours,omitempty"`
	MaxAdvanceDays             *int                `json:"max_advance_days,omitempty"`
	ReservablePercent          *int                `json:"reservable_percent,omitempty"`
	OffPeak                    *[]OffPeakWindow    `json:"off_peak,omitempty"`
	CancellationTiers          *[]CancellationTier `json:"cancellation_tiers,omitempty"`
	LateCancelLimit30d         *int                `json:"late_cancel_limit_30d,omitempty"`
	SpotDiscountPercent        *int                `json:"spot_discount_percent,omitempty"`
	SpotNoticeSeconds          *int                `json:"spot_notice_seconds,omitempty"`
	SpotGraceSeconds           *int                `json:"spot_grace_seconds,omitempty"`
	WaitlistClaimMinutes       *int                `json:"waitlist_claim_minutes,omitempty"`
	OnDemandMinBillableMinutes *int                `json:"on_demand_min_billable_minutes,omitempty"`
	SpotNoticeMinSeconds       *int                `json:"spot_notice_min_seconds,omitempty"`
	SpotNoticeMaxSeconds       *int                `json:"spot_notice_max_seconds,omitempty"`
	RebalanceLeadMinutes       *int                `json:"rebalance_lead_minutes,omitempty"`
}

// Policies is the whole policies document: the global policy and per-model
// overrides (GET/PUT /api/v1/admin/policies).
type Policies struct {
	Global Policy                    `json:"global"`
	Models map[string]PolicyOverride `json:"models"`
}

// Clone is a copy of the document that shares nothing a change to one
// could reach the other through (the store keeps the decoded document
// between reads and hands out clones).
func (p Policies) Clone() Policies {
	out := Policies{Global: p.Global.clone()}
	if p.Models != nil {
		out.Models = make(map[string]PolicyOverride, len(p.Models))
	}
	for id, o := range p.Models {
		out.Models[id] = o.clone()
	}
	return out
}

func (p Policy) clone() Policy {
	p.OffPeak = slices.Clone(p.OffPeak)
	p.CancellationTiers = slices.Clone(p.CancellationTiers)
	return p
}

func (o PolicyOverride) clone() PolicyOverride {
	for _, field := range []**int{&o.MinDurationHours, &o.MaxDurationHours, &o.MaxAdvanceDays, &o.ReservablePercent, &o.LateCancelLimit30d,
		&o.SpotDiscountPercent, &o.SpotNoticeSeconds, &o.SpotGraceSeconds, &o.WaitlistClaimMinutes, &o.OnDemandMinBillableMinutes,
		&o.SpotNoticeMinSeconds, &o.SpotNoticeMaxSeconds, &o.RebalanceLeadMinutes} {
		if *field != nil {
			v := **field
			*field = &v
		}
	}
	if o.OffPeak != nil {
		v := slices.Clone(*o.OffPeak)
		o.OffPeak = &v
	}
	if o.CancellationTiers != nil {
		v := slices.Clone(*o.CancellationTiers)
		o.CancellationTiers = &v
	}
	return o
}

// DefaultPolicy is the policy of DESIGN §2.
func DefaultPolicy() Policy {
	return Policy{
		MinDurationHours: 4, MaxDurationHours: 336, MaxAdvanceDays: 90, ReservablePercent: 100,
		OffPeak: []OffPeakWindow{
			{Days: slices.Clone(Weekdays), FromHour: 0, ToHour: 8, DiscountPercent: 30},
			{Days: []string{"sat", "sun"}, FromHour: 0, ToHour: 24, DiscountPercent: 20},
		},
		CancellationTiers: []CancellationTier{
			{MinHoursBefore: 24, FeePercent: 0},
			{MinHoursBefore: 2, FeePercent: 50},
			{MinHoursBefore: 0, FeePercent: 100},
		},
		LateCancelLimit30d:  3,
		SpotDiscountPercent: 70, SpotNoticeSeconds: 120, SpotGraceSeconds: 30,
		WaitlistClaimMinutes: 30, OnDemandMinBillableMinutes: 60,
		SpotNoticeMinSeconds: 10, SpotNoticeMaxSeconds: 600, RebalanceLeadMinutes: 30,
		VolumePricePerGiBMonthFen: 30, MaxVolumeGiB: 2048,
		ContainerDiskGiB: 50, MaxContainerDiskGiB: 500, ContainerDiskFreeGiB: 50,
		NoGPUPricePerHourFen: 10, GPUFailureCreditPercent: 100,
	}
}

// PoliciesToDecode is what a policies document is decoded into: rules
// added after a document was written (the notice bounds, the rebalance
// lead) keep their defaults when it does not name them.
func PoliciesToDecode() Policies {
	d := DefaultPolicy()
	return Policies{Global: Policy{SpotNoticeMinSeconds: d.SpotNoticeMinSeconds, SpotNoticeMaxSeconds: d.SpotNoticeMaxSeconds, RebalanceLeadMinutes: d.RebalanceLeadMinutes,
		VolumePricePerGiBMonthFen: d.VolumePricePerGiBMonthFen, MaxVolumeGiB: d.MaxVolumeGiB,
		ContainerDiskGiB: d.ContainerDiskGiB, MaxContainerDiskGiB: d.MaxContainerDiskGiB, ContainerDiskFreeGiB: d.ContainerDiskFreeGiB,
		NoGPUPricePerHourFen: d.NoGPUPricePerHourFen, GPUFailureCreditPercent: d.GPUFailureCreditPercent}}
}

// DefaultPolicies is the policies document with no overrides.
func DefaultPolicies() Policies {
	return Policies{Global: DefaultPolicy(), Models: map[string]PolicyOverride{}}
}

// For returns the policy that applies to a model: the global one with the
// model's override laid over it.
func (p Policies) For(modelID string) Policy {
	out := p.Global
	o, ok := p.Models[modelID]
	if !ok {
		return out
	}
	setInt := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	setInt(&out.MinDurationHours, o.MinDurationHours)
	setInt(&out.MaxDurationHours, o.MaxDurationHours)
	setInt(&out.MaxAdvanceDays, o.MaxAdvanceDays)
	setInt(&out.ReservablePercent, o.ReservablePercent)
	setInt(&out.LateCancelLimit30d, o.LateCancelLimit30d)
	setInt(&out.SpotDiscountPercent, o.SpotDiscountPercent)
	setInt(&out.SpotNoticeSeconds, o.SpotNoticeSeconds)
	setInt(&out.SpotGraceSeconds, o.SpotGraceSeconds)
	setInt(&out.WaitlistClaimMinutes, o.WaitlistClaimMinutes)
	setInt(&out.OnDemandMinBillableMinutes, o.OnDemandMinBillableMinutes)
	setInt(&out.SpotNoticeMinSeconds, o.SpotNoticeMinSeconds)
	setInt(&out.SpotNoticeMaxSeconds, o.SpotNoticeMaxSeconds)
	setInt(&out.RebalanceLeadMinutes, o.RebalanceLeadMinutes)
	if o.OffPeak != nil {
		out.OffPeak = *o.OffPeak
	}
	if o.CancellationTiers != nil {
		out.CancellationTiers = *o.CancellationTiers
	}
	return out
}

// Validate checks a whole policies document against the known models and
// returns every problem, each naming its field path (e.g.
// "models.h100-80g.off_peak[0].to_hour").
func (p Policies) Validate(knownModels []string) []*Error {
	errs := p.Global.validate("global")
	if p.Global.MinDurationHours > p.Global.MaxDurationHours && p.Global.MaxDurationHours > 0 {
		errs = append(errs, FieldErrorf(EINVALID, "global.min_duration_hours", "The minimum duration must not exceed the maximum."))
	}
	names := make([]string, 0, len(p.Models))
	for id := range p.Models {
		names = append(names, id)
	}
	sort.Strings(names)
	for _, id := range names {
		if !slices.Contains(knownModels, id) {
			errs = append(errs, FieldErrorf(EINVALID, "models."+id, "Unknown GPU model %q.", id))
			continue
		}
		// An override is valid when the policy it produces is.
		eff := p.For(id)
		errs = append(errs, eff.validate("models."+id)...)
		if eff.MinDurationHours > eff.MaxDurationHours {
			errs = append(errs, FieldErrorf(EINVALID, "models."+id+".min_duration_hours", "The minimum duration must not exceed the maximum."))
		}
	}
	return errs
}

// NoticeFor is the notice, in seconds, an instance gets when it is
// interrupted or stopped for any reason (the book, a balance run out, a
// drill): what its launch asked for (asked > 0, spot only), else the
// policy's.
func (p Policy) NoticeFor(asked int) int {
	if asked > 0 {
		return asked
	}
	return p.SpotNoticeSeconds
}

func (p Policy) validate(prefix string) []*Error {
	var errs []*Error
	check := func(field string, v, lo, hi int, format string) {
		if v < lo || v > hi {
			errs = append(errs, FieldErrorf(EINVALID, prefix+"."+field, format, lo, hi))
		}
	}
	check("min_duration_hours", p.MinDurationHours, 1, 24*366, "Must be between %d and %d hours.")
	check("max_duration_hours", p.MaxDurationHours, 1, 24*366, "Must be between %d and %d hours.")
	check("max_advance_days", p.MaxAdvanceDays, 1, 730, "Must be between %d and %d days.")
	check("reservable_percent", p.ReservablePercent, 0, 100, "Must be a percentage between %d and %d.")
	check("late_cancel_limit_30d", p.LateCancelLimit30d, 0, 1000, "Must be between %d and %d.")
	check("spot_discount_percent", p.SpotDiscountPercent, 0, 100, "Must be a percentage between %d and %d.")
	check("spot_notice_seconds", p.SpotNoticeSeconds, 10, 600, "Must be between %d and %d seconds (10 s to 10 min).")
	check("spot_grace_seconds", p.SpotGraceSeconds, 5, 300, "Must be between %d and %d seconds (5 s to 5 min).")
	check("waitlist_claim_minutes", p.WaitlistClaimMinutes, 1, 7*24*60, "Must be between %d and %d minutes.")
	check("on_demand_min_billable_minutes", p.OnDemandMinBillableMinutes, 0, 24*60, "Must be between %d and %d minutes.")
	check("spot_notice_min_seconds", p.SpotNoticeMinSeconds, 10, 600, "Must be between %d and %d seconds (10 s to 10 min).")
	check("spot_notice_max_seconds", p.SpotNoticeMaxSeconds, 10, 3600, "Must be between %d and %d seconds (10 s to an hour).")
	check("rebalance_lead_minutes", p.RebalanceLeadMinutes, 0, 240, "Must be between %d and %d minutes.")
	check("volume_price_per_gib_month_fen", p.VolumePricePerGiBMonthFen, 0, 100_000, "Must be between %d and %d fen.")
	check("max_volume_gib", p.MaxVolumeGiB, 0, 1_000_000, "Must be between %d and %d GiB.")
	check("max_container_disk_gib", p.MaxContainerDiskGiB, 1, 100_000, "Must be between %d and %d GiB.")
	check("container_disk_gib", p.ContainerDiskGiB, 1, max(p.MaxContainerDiskGiB, 1), "Must be between %d and %d GiB (the largest disk).")
	check("container_disk_free_gib", p.ContainerDiskFreeGiB, 0, 100_000, "Must be between %d and %d GiB.")
	check("no_gpu_price_per_hour_fen", p.NoGPUPricePerHourFen, 0, 100_000, "Must be between %d and %d fen.")
	check("gpu_failure_credit_percent", p.GPUFailureCreditPercent, 0, 100, "Must be between %d and %d percent.")
	if p.SpotNoticeMinSeconds > p.SpotNoticeMaxSeconds {
		errs = append(errs, FieldErrorf(EINVALID, prefix+".spot_notice_min_seconds", "The shortest notice must not exceed the longest."))
	}
	for i, w := range p.OffPeak {
		f := fmt.Sprintf("%s.off_peak[%d]", prefix, i)
		if len(w.Days) == 0 {
			errs = append(errs, FieldErrorf(EINVALID, f+".days", "Name at least one day (mon … sun)."))
		}
		seen := map[string]bool{}
		for _, d := range w.Days {
			if !slices.Contains(Weekdays, d) {
				errs = append(errs, FieldErrorf(EINVALID, f+".days", "Unknown day %q: use mon, tue, wed, thu, fri, sat or sun.", d))
			} else if seen[d] {
				errs = append(errs, FieldErrorf(EINVALID, f+".days", "Day %q is listed twice.", d))
			}
			seen[d] = true
		}
		if w.FromHour < 0 || w.FromHour > 23 {
			errs = append(errs, FieldErrorf(EINVALID, f+".from_hour", "The start hour must be between 0 and 23."))
		}
		if w.ToHour < 1 || w.ToHour > 24 || w.ToHour <= w.FromHour {
			errs = append(errs, FieldErrorf(EINVALID, f+".to_hour", "The end hour must be after the start hour and at most 24 (split windows that cross midnight in two)."))
		}
		if w.DiscountPercent < 0 || w.DiscountPercent > 100 {
			errs = append(errs, FieldErrorf(EINVALID, f+".discount_percent", "Must be a percentage between %d and %d.", 0, 100))
		}
	}
	if len(p.CancellationTiers) == 0 {
		errs = append(errs, FieldErrorf(EINVALID, prefix+".cancellation_tiers", "At least one cancellation tier is needed (one with min_hours_before 0)."))
	}
	for i, t := range p.CancellationTiers {
		f := fmt.Sprintf("%s.cancellation_tiers[%d]", prefix, i)
		if t.MinHoursBefore < 0 || t.MinHoursBefore > 24*365 {
			errs = append(errs, FieldErrorf(EINVALID, f+".min_hours_before", "Must be between %d and %d hours.", 0, 24*365))
		}
		if t.FeePercent < 0 || t.FeePercent > 100 {
			errs = append(errs, FieldErrorf(EINVALID, f+".fee_percent", "Must be a percentage between %d and %d.", 0, 100))
		}
		if i > 0 {
			prev := p.CancellationTiers[i-1]
			if t.MinHoursBefore >= prev.MinHoursBefore {
				errs = append(errs, FieldErrorf(EINVALID, f+".min_hours_before", "Tiers must be ordered from the earliest cancellation to the latest (min_hours_before decreasing)."))
			} else if t.FeePercent < prev.FeePercent {
				errs = append(errs, FieldErrorf(EINVALID, f+".fee_percent", "A later cancellation cannot cost less than an earlier one."))
			}
		}
	}
	if n := len(p.CancellationTiers); n > 0 && p.CancellationTiers[n-1].MinHoursBefore != 0 {
		errs = append(errs, FieldErrorf(EINVALID, fmt.Sprintf("%s.cancellation_tiers[%d].min_hours_before", prefix, n-1), "The last tier must have min_hours_before 0 so every cancellation before the start has a fee."))
	}
	return errs
}

// String is the override as compact JSON (for "is anything overridden").
func (o PolicyOverride) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}
