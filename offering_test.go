package gpuportal

import (
	"testing"
	"time"
)

// grid is a week from Monday 2026-11-30 00:00 Shanghai with free GPUs per
// hour given by fn.
func offeringGrid(hours int, fn func(h int) int) HourGrid {
	g := HourGrid{From: cst(2026, 11, 30, 0).UTC(), Model: Model{ID: "h100-80g", ListPrice: 1000}, Policy: DefaultPolicy(), Loc: shanghai}
	for h := 0; h < hours; h++ {
		g.Free = append(g.Free, fn(h))
	}
	return g
}

func offeringRequest(count, duration int, earliest, latestEnd time.Time, sort string, limit int) OfferingRequest {
	return OfferingRequest{Model: "h100-80g", Region: "cd-1", Count: count, DurationHours: duration, Earliest: earliest.UTC(), LatestEnd: latestEnd.UTC(), Sort: sort, Limit: limit}
}

func TestFindOfferings(t *testing.T) {
	now := cst(2026, 11, 29, 12) // Sunday noon, before the grid
	week := 7 * 24
	for _, tt := range []struct {
		name   string
		grid   HourGrid
		req    OfferingRequest
		starts []time.Time // the offerings' starts, in order
		totals []Fen       // their totals (nil: not checked)
	}{
		{
			name:   "cheapest first: the weekday nights (-30 %) beat the days",
			grid:   offeringGrid(week, func(int) int { return 8 }),
			req:    offeringRequest(8, 4, cst(2026, 11, 30, 0), cst(2026, 12, 2, 0), OfferingsByPrice, 3),
			starts: []time.Time{cst(2026, 11, 30, 0), cst(2026, 11, 30, 1), cst(2026, 11, 30, 2)},
			totals: []Fen{8 * 4 * 700, 8 * 4 * 700, 8 * 4 * 700},
		},
		{
			name: "off-peak first when cheapest: a weekend window beats a weekday one of the same length",
			grid: offeringGrid(week, func(int) int { return 8 }),
			// Friday 08:00 to Sunday 08:00: 24 h windows; Saturday 00:00–24:00 is
			// all off-peak (-20 %, nights -30 %) and cheapest.
			req:    offeringRequest(1, 24, cst(2026, 12, 4, 8), cst(2026, 12, 6, 8), OfferingsByPrice, 1),
			starts: []time.Time{cst(2026, 12, 5, 0)},
			totals: []Fen{8*700 + 16*800},
		},
		{
			name:   "never an hour over capacity: a full hour splits the range",
			grid:   offeringGrid(week, func(h int) int { return map[bool]int{true: 2, false: 8}[h == 14] }),
			req:    offeringRequest(4, 4, cst(2026, 11, 30, 8), cst(2026, 11, 30, 22), OfferingsByStart, 10),
			starts: []time.Time{cst(2026, 11, 30, 8), cst(2026, 11, 30, 9), cst(2026, 11, 30, 10), cst(2026, 11, 30, 15), cst(2026, 11, 30, 16), cst(2026, 11, 30, 17), cst(2026, 11, 30, 18)},
		},
		{
			name:   "nothing fits: no offerings",
			grid:   offeringGrid(week, func(int) int { return 3 }),
			req:    offeringRequest(4, 4, cst(2026, 11, 30, 0), cst(2026, 12, 6, 0), OfferingsByPrice, 10),
			starts: nil,
		},
		{
			name:   "earliest first, limited",
			grid:   offeringGrid(week, func(int) int { return 8 }),
			req:    offeringRequest(1, 8, cst(2026, 12, 1, 9), cst(2026, 12, 3, 0), OfferingsByStart, 2),
			starts: []time.Time{cst(2026, 12, 1, 9), cst(2026, 12, 1, 10)},
		},
		{
			name:   "the last window ends exactly at latest_end",
			grid:   offeringGrid(week, func(int) int { return 8 }),
			req:    offeringRequest(1, 4, cst(2026, 12, 1, 9), cst(2026, 12, 1, 14), OfferingsByStart, 10),
			starts: []time.Time{cst(2026, 12, 1, 9), cst(2026, 12, 1, 10)},
		},
		{
			name: "nearest to a full window, either side",
			grid: offeringGrid(week, func(h int) int { return map[bool]int{true: 0, false: 8}[h >= 30 && h < 40] }),
			req: func() OfferingRequest {
				r := offeringRequest(8, 4, cst(2026, 11, 30, 0), cst(2026, 12, 3, 0), OfferingsNear, 3)
				r.Near = cst(2026, 12, 1, 8).UTC() // 32 h in: full
				return r
			}(),
			// 02:00 is 6 h early, 01:00 7 h; 00:00 and 16:00 (hour 40) are
			// both 8 h away: the tie goes to the earlier.
			starts: []time.Time{cst(2026, 12, 1, 2), cst(2026, 12, 1, 1), cst(2026, 12, 1, 0)},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := FindOfferings(tt.grid, tt.req, now)
			if len(got) != len(tt.starts) {
				t.Fatalf("%d offerings %v; want %d", len(got), startsOf(got), len(tt.starts))
			}
			seen := map[time.Time]bool{}
			for k, o := range got {
				if !o.Start.Equal(tt.starts[k]) {
					t.Errorf("offering %d starts %s; want %s", k, o.Start.In(shanghai), tt.starts[k])
				}
				if seen[o.Start] {
					t.Errorf("two offerings start at %s", o.Start)
				}
				seen[o.Start] = true
				if o.Hours() != tt.req.DurationHours || o.Count != tt.req.Count {
					t.Errorf("offering %d is %d h × %d", k, o.Hours(), o.Count)
				}
				// The price is the quote's, to the fen.
				q := QuoteFor(tt.grid.Model, o.Count, o.Start, o.End, tt.grid.Policy, shanghai)
				if o.Total != q.Total || o.ListTotal != q.ListTotal || o.Saving != q.Discount() {
					t.Errorf("offering %d costs %d (list %d, saving %d); the quote says %d (list %d)", k, o.Total, o.ListTotal, o.Saving, q.Total, q.ListTotal)
				}
				off := 0
				for _, h := range q.Hours {
					if h.OffPeak {
						off++
					}
				}
				if o.OffPeakHours != off {
					t.Errorf("offering %d: %d off-peak hours; the quote has %d", k, o.OffPeakHours, off)
				}
				if tt.totals != nil && o.Total != tt.totals[k] {
					t.Errorf("offering %d total %d; want %d", k, o.Total, tt.totals[k])
				}
				if len(o.Cancellation) == 0 {
					t.Errorf("offering %d has no cancellation terms", k)
				}
				// Every hour of it has the GPUs.
				first := int(o.Start.Sub(tt.grid.From) / time.Hour)
				for h := first; h < first+o.Hours(); h++ {
					if tt.grid.Free[h] < o.Count {
						t.Errorf("offering %d takes hour %d with %d free", k, h, tt.grid.Free[h])
					}
				}
			}
		})
	}
}

func startsOf(list []Offering) []string {
	var out []string
	for _, o := range list {
		out = append(out, o.Start.In(shanghai).Format("Mon 15:04"))
	}
	return out
}

// Ties on price go to the earlier start.
func TestOfferingsTiesGoToTheEarlierStart(t *testing.T) {
	g := offeringGrid(48, func(int) int { return 4 })
	got := FindOfferings(g, offeringRequest(1, 4, cst(2026, 11, 30, 9), cst(2026, 11, 30, 20), OfferingsByPrice, 10), cst(2026, 11, 29, 0))
	for k := 1; k < len(got); k++ {
		if got[k].Total < got[k-1].Total || (got[k].Total == got[k-1].Total && got[k].Start.Before(got[k-1].Start)) {
			t.Fatalf("not cheapest-then-earliest: %v", startsOf(got))
		}
	}
}

// Windows never start later than the lead time allows.
func TestOfferingsRespectTheLeadTime(t *testing.T) {
	g := offeringGrid(7*24, func(int) int { return 4 })
	g.Policy.MaxAdvanceDays = 1
	now := cst(2026, 11, 29, 23) // so the latest start is Mon 30 23:00
	got := FindOfferings(g, offeringRequest(1, 4, cst(2026, 11, 30, 0), cst(2026, 12, 6, 0), OfferingsByStart, 100), now)
	if len(got) != 24 {
		t.Fatalf("%d offerings; want the 24 starts of Monday", len(got))
	}
	if last := got[len(got)-1].Start; last.After(now.Add(24 * time.Hour)) {
		t.Errorf("an offering starts %s, past the lead time", last)
	}
}

func TestNormalizeOfferingRequest(t *testing.T) {
	p := DefaultPolicy()
	now := cst(2026, 12, 1, 10).Add(17 * time.Minute)
	ok := offeringRequest(8, 48, time.Time{}, time.Time{}, "", 0)
	got, err := NormalizeOfferingRequest(ok, p, now)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Earliest.Equal(cst(2026, 12, 1, 11)) || !got.LatestEnd.Equal(cst(2026, 12, 15, 11)) || got.Sort != OfferingsByPrice || got.Limit != DefaultOfferings {
		t.Errorf("defaults: %+v", got)
	}
	past, _ := NormalizeOfferingRequest(offeringRequest(1, 4, cst(2026, 11, 1, 0), cst(2026, 12, 3, 0), "start", 5), p, now)
	if !past.Earliest.Equal(cst(2026, 12, 1, 11)) {
		t.Errorf("an earliest in the past starts at %s; want the next whole hour", past.Earliest)
	}
	for _, tt := range []struct {
		name  string
		req   OfferingRequest
		code  string
		field string
	}{
		{"no GPUs", offeringRequest(0, 8, time.Time{}, time.Time{}, "", 0), EINVALID, "count"},
		{"too many GPUs", offeringRequest(MaxGPUsPerRequest+1, 8, time.Time{}, time.Time{}, "", 0), EINVALID, "count"},
		{"no duration", offeringRequest(1, 0, time.Time{}, time.Time{}, "", 0), EINVALID, "duration_hours"},
		{"shorter than the policy", offeringRequest(1, 3, time.Time{}, time.Time{}, "", 0), EPOLICY, "duration_hours"},
		{"longer than the policy", offeringRequest(1, 337, time.Time{}, cst(2026, 12, 31, 0), "", 0), EPOLICY, "duration_hours"},
		{"earliest off the hour", offeringRequest(1, 4, cst(2026, 12, 2, 0).Add(30*time.Minute), time.Time{}, "", 0), EPOLICY, "earliest"},
		{"earliest past the lead time", offeringRequest(1, 4, cst(2027, 6, 1, 0), cst(2027, 6, 3, 0), "", 0), EPOLICY, "earliest"},
		{"range shorter than the duration", offeringRequest(1, 48, cst(2026, 12, 2, 0), cst(2026, 12, 3, 0), "", 0), EINVALID, "latest_end"},
		{"range too long", offeringRequest(1, 4, cst(2026, 12, 2, 0), cst(2027, 6, 1, 0), "", 0), EINVALID, "latest_end"},
		{"latest end off the hour", offeringRequest(1, 4, cst(2026, 12, 2, 0), cst(2026, 12, 3, 0).Add(time.Minute), "", 0), EPOLICY, "latest_end"},
		{"unknown sort", offeringRequest(1, 4, time.Time{}, time.Time{}, "cheap", 0), EINVALID, "sort"},
		{"limit too large", offeringRequest(1, 4, time.Time{}, time.Time{}, "", MaxOfferings+1), EINVALID, "limit"},
		{"negative limit", offeringRequest(1, 4, time.Time{}, time.Time{}, "", -1), EINVALID, "limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NormalizeOfferingRequest(tt.req, p, now)
			if ErrorCode(err) != tt.code || ErrorField(err) != tt.field {
				t.Errorf("err = %v; want %s on %s", err, tt.code, tt.field)
			}
		})
	}
}

func TestExtensionFor(t *testing.T) {
	p := DefaultPolicy()
	p.MaxDurationHours = 12
	r := &Reservation{ID: 7, Count: 4, Start: cst(2026, 12, 1, 10).UTC(), End: cst(2026, 12, 1, 18).UTC(), Status: ReservationActive}
	grid := func(free ...int) HourGrid {
		return HourGrid{From: r.End, Free: free, Model: Model{ListPrice: 1000}, Policy: p, Loc: shanghai}
	}
	// Free for two hours, then full: two options.
	ext := ExtensionFor(r, grid(4, 6, 3, 8))
	if ext.MaxHours != 2 || ext.LimitedBy != ExtensionLimitCapacity || len(ext.Options) != 2 {
		t.Fatalf("ext = %+v; want 2 hours, limited by capacity", ext)
	}
	if o := ext.Options[1]; o.Hours != 2 || !o.End.Equal(cst(2026, 12, 1, 20)) || o.Price != 2*4*1000 {
		t.Errorf("option 2 = %+v", o)
	}
	// Room for more but the policy stops at 12 h in all.
	ext = ExtensionFor(r, grid(8, 8, 8, 8, 8, 8, 8, 8))
	if ext.MaxHours != 4 || ext.LimitedBy != ExtensionLimitDuration {
		t.Errorf("ext = %+v; want 4 hours, limited by the maximum duration", ext)
	}
	// Extending into the night costs the off-peak price.
	night := &Reservation{ID: 8, Count: 1, Start: cst(2026, 12, 1, 20).UTC(), End: cst(2026, 12, 2, 0).UTC(), Status: ReservationConfirmed}
	g := grid(1, 1, 1)
	g.From = night.End
	if ext := ExtensionFor(night, g); ext.Options[0].Price != 700 {
		t.Errorf("an hour after midnight costs %d; want the off-peak 700", ext.Options[0].Price)
	}
	for _, tt := range []struct {
		hours int
		code  string
	}{{0, EINVALID}, {5, EPOLICY}, {3, ECAPACITY}, {2, ""}} {
		ext := ExtensionFor(r, grid(4, 6, 3, 8))
		if err := ValidateExtension(r, tt.hours, ext, p, shanghai); ErrorCode(err) != tt.code {
			t.Errorf("extend by %d: %v; want %q", tt.hours, err, tt.code)
		}
	}
	ended := *r
	ended.Status = ReservationCompleted
	if err := CanExtend(&ended, r.Start); ErrorCode(err) != ECONFLICT {
		t.Errorf("a completed reservation: %v", err)
	}
	if err := CanExtend(r, r.End); ErrorCode(err) != ECONFLICT {
		t.Errorf("at its end: %v", err)
	}
}
