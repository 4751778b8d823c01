package gpuportal

import (
	"cmp"
	"slices"
	"time"
)

// How offerings are ranked.
const (
	OfferingsByPrice = "price" // cheapest first; ties: earliest
	OfferingsByStart = "start" // earliest first
	// OfferingsNear ranks by distance from OfferingRequest.Near (ties:
	// earlier): the alternatives shown next to a full window.
	OfferingsNear = "near"
)

// Offering search bounds.
const (
	DefaultOfferings      = 10
	MaxOfferings          = 100
	DefaultOfferingRange  = 14 * 24 * time.Hour // latest_end when none is given
	MaxOfferingRangeHours = 104 * 24            // the longest lead time plus the longest booking
)

// OfferingRequest asks "when can I get Count GPUs for DurationHours
// somewhere in [Earliest, LatestEnd), and what does it cost?".
type OfferingRequest struct {
	Model         string
	Region        string
	Count         int
	DurationHours int
	Earliest      time.Time
	LatestEnd     time.Time
	Sort          string
	Limit         int
	Near          time.Time // OfferingsNear only
}

// Offering is a window that fits every hour right now, priced by the quote
// rules (off-peak included) and with its cancellation terms as dates.
type Offering struct {
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Count     int       `json:"count"`
	Total     Fen       `json:"total_fen"`
	ListTotal Fen       `json:"list_total_fen"`
	// Saving is what the off-peak hours take off the list price.
	Saving       Fen                `json:"saving_fen"`
	OffPeakHours int                `json:"off_peak_hours"`
	Cancellation []CancellationStep `json:"cancellation"`
}

// Hours returns the offering's length in hours.
func (o Offering) Hours() int { return int(o.End.Sub(o.Start) / time.Hour) }

// Booking is the booking request that takes the offering.
func (o Offering) Booking(model, region string) BookingRequest {
	return BookingRequest{Model: model, Region: region, Count: o.Count, Start: o.Start, End: o.End}
}

// NormalizeOfferingRequest fills in the defaults (from the next whole hour,
// a two-week range, by price, ten) and checks the request against the
// policy at now: the shape (invalid_input) and the duration and lead-time
// rules (policy_violation), naming the field.
func NormalizeOfferingRequest(req OfferingRequest, p Policy, now time.Time) (OfferingRequest, error) {
	if req.Count <= 0 {
		return req, FieldErrorf(EINVALID, "count", "The GPU count must be at least 1.")
	}
	if req.Count > MaxGPUsPerRequest {
		return req, FieldErrorf(EINVALID, "count", "The GPU count must be at most %d.", MaxGPUsPerRequest)
	}
	if req.DurationHours <= 0 {
		return req, FieldErrorf(EINVALID, "duration_hours", "The duration must be a whole number of hours, at least 1.")
	}
	if req.DurationHours < p.MinDurationHours {
		return req, FieldErrorf(EPOLICY, "duration_hours", "The minimum booking is %d hours.", p.MinDurationHours)
	}
	if req.DurationHours > p.MaxDurationHours {
		return req, FieldErrorf(EPOLICY, "duration_hours", "The maximum booking is %d hours.", p.MaxDurationHours)
	}
	first, latest := p.BookingWindow(now)
	if req.Earliest.IsZero() || req.Earliest.Before(first) {
		req.Earliest = first
	} else if !OnTheHour(req.Earliest) {
		return req, FieldErrorf(EPOLICY, "earliest", "The earliest start must be a whole hour (like 10:00).")
	}
	if req.Earliest.After(latest) {
		return req, FieldErrorf(EPOLICY, "earliest", "Bookings can start at most %d days ahead.", p.MaxAdvanceDays)
	}
	if req.LatestEnd.IsZero() {
		req.LatestEnd = req.Earliest.Add(DefaultOfferingRange)
	} else if !OnTheHour(req.LatestEnd) {
		return req, FieldErrorf(EPOLICY, "latest_end", "The latest end must be a whole hour (like 18:00).")
	}
	if req.LatestEnd.Before(req.Earliest.Add(time.Duration(req.DurationHours) * time.Hour)) {
		return req, FieldErrorf(EINVALID, "latest_end", "The range must be at least as long as the duration (%d h).", req.DurationHours)
	}
	if req.LatestEnd.Sub(req.Earliest) > MaxOfferingRangeHours*time.Hour {
		return req, FieldErrorf(EINVALID, "latest_end", "Search at most %d days at a time.", MaxOfferingRangeHours/24)
	}
	req.Earliest, req.LatestEnd = req.Earliest.UTC(), req.LatestEnd.UTC()
	switch req.Sort {
	case "":
		req.Sort = OfferingsByPrice
	case OfferingsByPrice, OfferingsByStart, OfferingsNear:
	default:
		return req, FieldErrorf(EINVALID, "sort", "sort must be price or start.")
	}
	if req.Limit == 0 {
		req.Limit = DefaultOfferings
	}
	if req.Limit < 1 || req.Limit > MaxOfferings {
		return req, FieldErrorf(EINVALID, "limit", "limit must be a number from 1 to %d.", MaxOfferings)
	}
	return req, nil
}

// HourGrid is the book of one model in one region as offerings see it: the
// GPUs still free to book in each hour from From on, and how those hours
// are priced.
type HourGrid struct {
	From   time.Time
	Free   []int
	Model  Model
	Policy Policy
	Loc    *time.Location
}

// FindOfferings lists the windows of a normalised request that fit every
// hour of the grid, ranked as asked, at most one per start hour and at
// most req.Limit. Windows start no later than the policy's lead time
// allows, and every price comes from HourPrice: the quote's own rule.
func FindOfferings(g HourGrid, req OfferingRequest, now time.Time) []Offering {
	n := len(g.Free)
	d := req.DurationHours
	if n < d || d <= 0 {
		return nil
	}
	// fitRun[i]: how many hours from hour i on have the GPUs free, so a
	// window starting at i fits when fitRun[i] >= d (linear in the range).
	fitRun := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		if g.Free[i] >= req.Count {
			fitRun[i] = fitRun[i+1] + 1
		}
	}
	// Prefix sums of the per-GPU hour price and of the off-peak hours.
	price := make([]Fen, n+1)
	offPeak := make([]int, n+1)
	for i := 0; i < n; i++ {
		p, disc := HourPrice(g.Model.ListPrice, g.Policy, g.From.Add(time.Duration(i)*time.Hour), g.Loc)
		price[i+1] = price[i] + p
		offPeak[i+1] = offPeak[i]
		if disc > 0 {
			offPeak[i+1]++
		}
	}
	_, latestStart := g.Policy.BookingWindow(now)
	first := int(req.Earliest.Sub(g.From) / time.Hour)
	last := int(req.LatestEnd.Sub(g.From)/time.Hour) - d
	var out []Offering
	for i := max(0, first); i <= min(last, n-d); i++ {
		start := g.From.Add(time.Duration(i) * time.Hour)
		if start.After(latestStart) {
			break
		}
		if fitRun[i] < d {
			continue
		}
		list := g.Model.ListPrice * Fen(req.Count*d)
		total := (price[i+d] - price[i]) * Fen(req.Count)
		out = append(out, Offering{
			Start: start, End: start.Add(time.Duration(d) * time.Hour), Count: req.Count,
			Total: total, ListTotal: list, Saving: list - total, OffPeakHours: offPeak[i+d] - offPeak[i],
		})
	}
	slices.SortStableFunc(out, offeringOrder(req))
	out = out[:min(len(out), req.Limit)]
	for k := range out {
		out[k].Cancellation = CancellationSchedule(g.Policy.CancellationTiers, out[k].Start, now)
	}
	return out
}

// offeringOrder compares two offerings as the request ranks them; the
// candidates come earliest first, so a stable sort breaks ties by start.
func offeringOrder(req OfferingRequest) func(a, b Offering) int {
	switch req.Sort {
	case OfferingsByStart:
		return func(a, b Offering) int { return a.Start.Compare(b.Start) }
	case OfferingsNear:
		dist := func(o Offering) time.Duration { return max(o.Start.Sub(req.Near), req.Near.Sub(o.Start)) }
		return func(a, b Offering) int { return cmp.Compare(dist(a), dist(b)) }
	}
	return func(a, b Offering) int { return cmp.Compare(a.Total, b.Total) }
}
