package gpuportal

import (
	"reflect"
	"testing"
	"time"
)

func TestCancellationFeeTierBoundaries(t *testing.T) {
	start := time.Date(2026, 12, 10, 10, 0, 0, 0, time.UTC)
	tiers := DefaultPolicy().CancellationTiers
	const price Fen = 10000
	for _, tt := range []struct {
		before time.Duration
		fee    Fen
	}{
		{72 * time.Hour, 0},
		{24 * time.Hour, 0},                // exactly 24 h: free
		{24*time.Hour - time.Second, 5000}, // just under: 50 %
		{2 * time.Hour, 5000},              // exactly 2 h: 50 %
		{2*time.Hour - time.Second, 10000}, // just under: 100 %
		{time.Minute, 10000},               // minutes before
		{0, 10000},                         // at the start: no refund
		{-time.Hour, 10000},                // after the start: no refund
	} {
		fee, refund := CancellationFee(price, tiers, start, start.Add(-tt.before))
		if fee != tt.fee || refund != price-tt.fee {
			t.Errorf("%v before start: fee %d refund %d; want fee %d", tt.before, fee, refund, tt.fee)
		}
	}
	// Tiers in any order give the same answer; an odd price rounds the fee down.
	rev := []CancellationTier{tiers[2], tiers[0], tiers[1]}
	if fee, refund := CancellationFee(333, rev, start, start.Add(-3*time.Hour)); fee != 166 || refund != 167 {
		t.Errorf("unordered tiers: fee %d refund %d; want 166/167", fee, refund)
	}
}

func TestValidateBooking(t *testing.T) {
	now := time.Date(2026, 11, 30, 2, 15, 0, 0, time.UTC)
	p := DefaultPolicy()
	next := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	good := BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: next.Add(24 * time.Hour), End: next.Add(28 * time.Hour)}
	for _, tt := range []struct {
		name        string
		edit        func(*BookingRequest)
		code, field string
	}{
		{"valid", func(*BookingRequest) {}, "", ""},
		{"the next whole hour is fine", func(r *BookingRequest) { r.Start, r.End = next, next.Add(4*time.Hour) }, "", ""},
		{"exactly the minimum", func(r *BookingRequest) { r.End = r.Start.Add(4 * time.Hour) }, "", ""},
		{"exactly the maximum", func(r *BookingRequest) { r.End = r.Start.Add(336 * time.Hour) }, "", ""},
		{"exactly 90 days ahead", func(r *BookingRequest) {
			r.Start = next.Add(90*24*time.Hour - time.Hour)
			r.End = r.Start.Add(4 * time.Hour)
		}, "", ""},
		{"count 0", func(r *BookingRequest) { r.Count = 0 }, EINVALID, "count"},
		{"count -1", func(r *BookingRequest) { r.Count = -1 }, EINVALID, "count"},
		{"count 10^9", func(r *BookingRequest) { r.Count = 1_000_000_000 }, EINVALID, "count"},
		{"no start", func(r *BookingRequest) { r.Start = time.Time{} }, EINVALID, "start"},
		{"no end", func(r *BookingRequest) { r.End = time.Time{} }, EINVALID, "end"},
		{"end before start", func(r *BookingRequest) { r.End = r.Start.Add(-4 * time.Hour) }, EINVALID, "end"},
		{"end equals start", func(r *BookingRequest) { r.End = r.Start }, EINVALID, "end"},
		{"start off the hour", func(r *BookingRequest) { r.Start = r.Start.Add(30 * time.Minute) }, EPOLICY, "start"},
		{"end off the hour", func(r *BookingRequest) { r.End = r.End.Add(time.Second) }, EPOLICY, "end"},
		{"start in the current hour", func(r *BookingRequest) { r.Start, r.End = next.Add(-time.Hour), next.Add(3*time.Hour) }, EPOLICY, "start"},
		{"start in the past", func(r *BookingRequest) { r.Start, r.End = next.Add(-48*time.Hour), next.Add(-40*time.Hour) }, EPOLICY, "start"},
		{"more than 90 days ahead", func(r *BookingRequest) { r.Start = next.Add(91 * 24 * time.Hour); r.End = r.Start.Add(4 * time.Hour) }, EPOLICY, "start"},
		{"shorter than the minimum", func(r *BookingRequest) { r.End = r.Start.Add(3 * time.Hour) }, EPOLICY, "duration"},
		{"longer than the maximum", func(r *BookingRequest) { r.End = r.Start.Add(337 * time.Hour) }, EPOLICY, "duration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := good
			tt.edit(&r)
			err := ValidateBooking(r, p, now)
			if ErrorCode(err) != tt.code || ErrorField(err) != tt.field {
				t.Fatalf("ValidateBooking = %v; want code %q field %q", err, tt.code, tt.field)
			}
		})
	}
}

func TestCreditBlockedUntil(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	if got := CreditBlockedUntil([]time.Time{ago(1 * day), ago(2 * day), ago(3 * day)}, 3, now); !got.IsZero() {
		t.Errorf("3 late cancels with limit 3: blocked until %v", got)
	}
	four := []time.Time{ago(1 * day), ago(2 * day), ago(3 * day), ago(10 * day)}
	if got, want := CreditBlockedUntil(four, 3, now), ago(10*day).Add(30*day); !got.Equal(want) {
		t.Errorf("4 late cancels: blocked until %v; want %v", got, want)
	}
	five := append(four, ago(20*day))
	if got, want := CreditBlockedUntil(five, 3, now), ago(10*day).Add(30*day); !got.Equal(want) {
		t.Errorf("5 late cancels: blocked until %v; want %v (two must age out)", got, want)
	}
	old := []time.Time{ago(1 * day), ago(2 * day), ago(3 * day), ago(30 * day)}
	if got := CreditBlockedUntil(old, 3, now); !got.IsZero() {
		t.Errorf("the 4th is exactly 30 days old: blocked until %v", got)
	}
}

func TestPoliciesValidate(t *testing.T) {
	models := []string{"a100-80g", "h100-80g"}
	if errs := DefaultPolicies().Validate(models); len(errs) != 0 {
		t.Fatalf("defaults invalid: %v", errs)
	}
	eight, thirty, tooLong := 8, 30, 1000
	for _, tt := range []struct {
		name  string
		edit  func(*Policies)
		field string
	}{
		{"override ok", func(p *Policies) { p.Models["h100-80g"] = PolicyOverride{MinDurationHours: &eight} }, ""},
		{"percent > 100", func(p *Policies) { p.Global.ReservablePercent = 101 }, "global.reservable_percent"},
		{"spot discount < 0", func(p *Policies) { p.Global.SpotDiscountPercent = -1 }, "global.spot_discount_percent"},
		{"notice 9 s", func(p *Policies) { p.Global.SpotNoticeSeconds = 9 }, "global.spot_notice_seconds"},
		{"notice 601 s", func(p *Policies) { p.Global.SpotNoticeSeconds = 601 }, "global.spot_notice_seconds"},
		{"grace 4 s", func(p *Policies) { p.Global.SpotGraceSeconds = 4 }, "global.spot_grace_seconds"},
		{"grace 301 s", func(p *Policies) { p.Global.SpotGraceSeconds = 301 }, "global.spot_grace_seconds"},
		{"min > max", func(p *Policies) { p.Global.MinDurationHours = 400 }, "global.min_duration_hours"},
		{"tiers out of order", func(p *Policies) {
			p.Global.CancellationTiers = []CancellationTier{{2, 50}, {24, 0}, {0, 100}}
		}, "global.cancellation_tiers[1].min_hours_before"},
		{"later tier cheaper", func(p *Policies) {
			p.Global.CancellationTiers = []CancellationTier{{24, 50}, {2, 10}, {0, 100}}
		}, "global.cancellation_tiers[1].fee_percent"},
		{"no zero tier", func(p *Policies) { p.Global.CancellationTiers = []CancellationTier{{24, 0}, {2, 50}} }, "global.cancellation_tiers[1].min_hours_before"},
		{"no tiers", func(p *Policies) { p.Global.CancellationTiers = nil }, "global.cancellation_tiers"},
		{"off-peak bad day", func(p *Policies) { p.Global.OffPeak[0].Days = []string{"monday"} }, "global.off_peak[0].days"},
		{"off-peak no days", func(p *Policies) { p.Global.OffPeak[1].Days = nil }, "global.off_peak[1].days"},
		{"off-peak to <= from", func(p *Policies) { p.Global.OffPeak[0].FromHour, p.Global.OffPeak[0].ToHour = 22, 6 }, "global.off_peak[0].to_hour"},
		{"off-peak to 25", func(p *Policies) { p.Global.OffPeak[0].ToHour = 25 }, "global.off_peak[0].to_hour"},
		{"off-peak discount 101", func(p *Policies) { p.Global.OffPeak[0].DiscountPercent = 101 }, "global.off_peak[0].discount_percent"},
		{"unknown model override", func(p *Policies) { p.Models["v100"] = PolicyOverride{MinDurationHours: &eight} }, "models.v100"},
		{"override makes min > max", func(p *Policies) {
			p.Models["h100-80g"] = PolicyOverride{MinDurationHours: &tooLong}
		}, "models.h100-80g.min_duration_hours"},
		{"override bad percent", func(p *Policies) {
			v := 130
			p.Models["a100-80g"] = PolicyOverride{ReservablePercent: &v, WaitlistClaimMinutes: &thirty}
		}, "models.a100-80g.reservable_percent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicies()
			tt.edit(&p)
			errs := p.Validate(models)
			if tt.field == "" {
				if len(errs) != 0 {
					t.Fatalf("errors: %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tt.field {
					return
				}
			}
			t.Fatalf("no error for %s; got %v", tt.field, errs)
		})
	}
}

func TestPoliciesFor(t *testing.T) {
	p := DefaultPolicies()
	eight := 8
	tiers := []CancellationTier{{48, 0}, {0, 100}}
	p.Models["h100-80g"] = PolicyOverride{MinDurationHours: &eight, CancellationTiers: &tiers}
	h := p.For("h100-80g")
	if h.MinDurationHours != 8 || len(h.CancellationTiers) != 2 || h.MaxDurationHours != 336 {
		t.Errorf("h100 policy = %+v", h)
	}
	if a := p.For("a100-80g"); a.MinDurationHours != 4 || len(a.CancellationTiers) != 3 {
		t.Errorf("a100 policy = %+v", a)
	}
}

func TestPreviewCancellation(t *testing.T) {
	start := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	r := &Reservation{Price: 16000, Start: start, CancellationTiers: DefaultPolicies().Global.CancellationTiers}
	for _, tc := range []struct {
		before time.Duration
		want   CancellationPreview
	}{
		{25 * time.Hour, CancellationPreview{Fee: 0, Refund: 16000}},
		{24 * time.Hour, CancellationPreview{Fee: 0, Refund: 16000}},
		{23 * time.Hour, CancellationPreview{Fee: 8000, Refund: 8000, FeePercent: 50, Late: true}},
		{time.Hour, CancellationPreview{Fee: 16000, Refund: 0, FeePercent: 100, Late: true}},
	} {
		if got := PreviewCancellation(r, start.Add(-tc.before)); got != tc.want {
			t.Errorf("%s before the start: %+v, want %+v", tc.before, got, tc.want)
		}
	}
}

func TestOfferExpiry(t *testing.T) {
	now := time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		start time.Time
		claim int
		want  time.Time
	}{
		{now.Add(5 * time.Hour), 30, now.Add(30 * time.Minute)},
		{now.Add(20 * time.Minute), 30, now.Add(20 * time.Minute)}, // never past the start
		{now.Add(5 * time.Hour), 600, now.Add(5 * time.Hour)},
	} {
		if got := OfferExpiry(now, tc.start, tc.claim); !got.Equal(tc.want) {
			t.Errorf("start %s claim %d min: %s, want %s", tc.start, tc.claim, got, tc.want)
		}
	}
}

func TestCancellationSchedule(t *testing.T) {
	start := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	tiers := DefaultPolicies().Global.CancellationTiers // ≥24 h: 0 %, ≥2 h: 50 %, else 100 %
	for _, tc := range []struct {
		name string
		now  time.Time
		want []CancellationStep
	}{
		{"booked days ahead", start.Add(-72 * time.Hour), []CancellationStep{{FeePercent: 0}, {From: start.Add(-24 * time.Hour), FeePercent: 50}, {From: start.Add(-2 * time.Hour), FeePercent: 100}}},
		{"booked 5 hours ahead", start.Add(-5 * time.Hour), []CancellationStep{{FeePercent: 50}, {From: start.Add(-2 * time.Hour), FeePercent: 100}}},
		{"booked an hour ahead", start.Add(-time.Hour), []CancellationStep{{FeePercent: 100}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CancellationSchedule(tiers, start, tc.now)
			if len(got) != len(tc.want) {
				t.Fatalf("schedule = %+v, want %+v", got, tc.want)
			}
			for k := range got {
				if !got[k].From.Equal(tc.want[k].From) || got[k].FeePercent != tc.want[k].FeePercent {
					t.Fatalf("schedule = %+v, want %+v", got, tc.want)
				}
			}
			// Each step agrees with the fee actually charged once it has
			// begun (a tier's boundary itself still belongs to the one
			// before: "free until 10:00" includes 10:00).
			for _, s := range got {
				at := s.From.Add(time.Second)
				if s.From.IsZero() {
					at = tc.now
				}
				if fee, _ := CancellationFee(10000, tiers, start, at); int(fee/100) != s.FeePercent {
					t.Errorf("at %s the schedule says %d %%, the fee is %s", at, s.FeePercent, fee)
				}
			}
		})
	}
}

func TestCancellationPostings(t *testing.T) {
	for _, c := range []struct {
		name string
		p    CancellationPreview
		want []Posting
	}{
		{"free: the price back", CancellationPreview{Refund: 10000},
			[]Posting{{LedgerRefund, -10000, "Reservation #7 cancelled: price returned"}}},
		{"half: the price back, the fee again", CancellationPreview{Fee: 5000, Refund: 5000, FeePercent: 50, Late: true},
			[]Posting{{LedgerRefund, -10000, "Reservation #7 cancelled: price returned"}, {LedgerCancellationFee, 5000, "Reservation #7: cancellation fee (50%)"}}},
		{"after the start: nothing moves", CancellationPreview{Fee: 10000, FeePercent: 100, Late: true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.p.Postings(7, 10000)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Postings = %+v, want %+v", got, c.want)
			}
			var net Fen
			for _, l := range got {
				net += l.Amount
			}
			if c.p.Refund > 0 && net != -c.p.Refund {
				t.Errorf("the lines move %s, want the refund %s back", net, c.p.Refund)
			}
		})
	}
}

func TestShortfallRefund(t *testing.T) {
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	r := &Reservation{Count: 8, Start: start, End: start.Add(10 * time.Hour), Price: 8 * 10 * 5000} // ¥50 a GPU-hour
	for _, c := range []struct {
		name      string
		missing   int
		now       time.Time
		refund    Fen
		hoursLeft int
	}{
		{"at the start, one GPU", 1, start, 10 * 5000, 10},
		{"mid-hour counts the hour under way", 2, start.Add(3*time.Hour + 20*time.Minute), 2 * 7 * 5000, 7},
		{"last hour", 8, start.Add(9*time.Hour + 59*time.Minute), 8 * 5000, 1},
		{"after the end: nothing", 1, start.Add(11 * time.Hour), 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			refund, left := ShortfallRefund(r, c.missing, c.now)
			if refund != c.refund || left != c.hoursLeft {
				t.Errorf("ShortfallRefund = %s for %d h, want %s for %d h", refund, left, c.refund, c.hoursLeft)
			}
		})
	}
}

func TestBookingWindow(t *testing.T) {
	p := DefaultPolicy()
	p.MaxAdvanceDays = 30
	for _, c := range []struct {
		now              time.Time
		earliest, latest time.Time
	}{
		{time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)},
		{time.Date(2026, 3, 2, 10, 59, 30, 0, time.UTC), time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 10, 59, 30, 0, time.UTC)},
	} {
		earliest, latest := p.BookingWindow(c.now)
		if !earliest.Equal(c.earliest) || !latest.Equal(c.latest) {
			t.Errorf("BookingWindow(%s) = %s – %s, want %s – %s", c.now, earliest, latest, c.earliest, c.latest)
		}
	}
}
