package gpuportal

import (
	"testing"
	"time"
)

var shanghai, _ = time.LoadLocation("Asia/Shanghai")

// cst builds a time in Asia/Shanghai (UTC+8, no DST).
func cst(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, shanghai) }

func TestQuote(t *testing.T) {
	a100 := Model{ID: "a100-80g", ListPrice: 800}
	p := DefaultPolicy()
	for _, tt := range []struct {
		name       string
		count      int
		start, end time.Time
		perHour    []Fen // price per GPU of each hour
		total      Fen
	}{
		{"weekday daytime, no discount", 2, cst(2026, 11, 30, 10), cst(2026, 11, 30, 14), []Fen{800, 800, 800, 800}, 6400},
		{"weekday night −30 %", 1, cst(2026, 12, 1, 2), cst(2026, 12, 1, 6), []Fen{560, 560, 560, 560}, 2240},
		{"night ends at 08:00", 1, cst(2026, 12, 1, 6), cst(2026, 12, 1, 10), []Fen{560, 560, 800, 800}, 2720},
		{"weekend daytime −20 %", 1, cst(2026, 12, 5, 10), cst(2026, 12, 5, 14), []Fen{640, 640, 640, 640}, 2560},
		{"weekend night: largest wins, no stacking", 1, cst(2026, 12, 6, 2), cst(2026, 12, 6, 6), []Fen{560, 560, 560, 560}, 2240},
		{"crossing midnight into Saturday", 3, cst(2026, 12, 4, 22), cst(2026, 12, 5, 2), []Fen{800, 800, 560, 560}, 3 * 2720},
		{"crossing midnight into Monday", 1, cst(2026, 12, 6, 22), cst(2026, 12, 7, 2), []Fen{640, 640, 560, 560}, 2400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := QuoteFor(a100, tt.count, tt.start, tt.end, p, shanghai)
			if len(q.Hours) != len(tt.perHour) {
				t.Fatalf("%d hours; want %d", len(q.Hours), len(tt.perHour))
			}
			for i, h := range q.Hours {
				if h.PricePerGPU != tt.perHour[i] || h.Subtotal != tt.perHour[i]*Fen(tt.count) || h.OffPeak != (tt.perHour[i] != 800) {
					t.Errorf("hour %d (%s) = %+v; want %d per GPU", i, h.Start.In(shanghai).Format("Mon 15:04"), h, tt.perHour[i])
				}
				if !h.End.Equal(h.Start.Add(time.Hour)) {
					t.Errorf("hour %d spans %s–%s", i, h.Start, h.End)
				}
			}
			if q.Total != tt.total {
				t.Errorf("total = %d; want %d", q.Total, tt.total)
			}
			if q.ListTotal != 800*Fen(tt.count*len(tt.perHour)) || q.Discount() != q.ListTotal-q.Total {
				t.Errorf("list total %d, discount %d", q.ListTotal, q.Discount())
			}
		})
	}
}

// Off-peak hours are judged in the site zone: the same UTC hour is night in
// Shanghai and afternoon in UTC.
func TestQuoteFollowsTheSiteZone(t *testing.T) {
	p := DefaultPolicy()
	hour := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC) // 02:00 Wed in Shanghai, 18:00 Tue in UTC
	if d := OffPeakDiscount(p.OffPeak, hour, shanghai); d != 30 {
		t.Errorf("Shanghai discount = %d; want 30", d)
	}
	if d := OffPeakDiscount(p.OffPeak, hour, time.UTC); d != 0 {
		t.Errorf("UTC discount = %d; want 0", d)
	}
	// A zone with DST: on 2026-03-29 Berlin skips 02:00; 05:00 UTC is 07:00
	// local (still night), 06:00 UTC is 08:00 local (day).
	berlin, _ := time.LoadLocation("Europe/Berlin")
	weekdayNight := []OffPeakWindow{{Days: Weekdays, FromHour: 0, ToHour: 8, DiscountPercent: 30}}
	if d := OffPeakDiscount(weekdayNight, time.Date(2026, 3, 29, 5, 0, 0, 0, time.UTC), berlin); d != 30 {
		t.Errorf("Berlin 07:00 CEST = %d; want 30", d)
	}
	if d := OffPeakDiscount(weekdayNight, time.Date(2026, 3, 29, 6, 0, 0, 0, time.UTC), berlin); d != 0 {
		t.Errorf("Berlin 08:00 CEST = %d; want 0", d)
	}
}

func TestQuoteRoundsDownPerHour(t *testing.T) {
	m := Model{ID: "x", ListPrice: 333}
	q := QuoteFor(m, 1, cst(2026, 12, 1, 2), cst(2026, 12, 1, 3), DefaultPolicy(), shanghai)
	if q.Total != 233 { // 333 × 0.7 = 233.1
		t.Fatalf("total = %d; want 233", q.Total)
	}
}

func TestQuoteGroups(t *testing.T) {
	q := QuoteFor(Model{ID: "a", ListPrice: 800}, 1, cst(2026, 12, 1, 4), cst(2026, 12, 1, 12), DefaultPolicy(), shanghai)
	g := q.Groups()
	if len(g) != 2 || g[0].Hours != 4 || g[0].PricePerGPU != 560 || g[1].Hours != 4 || g[1].Subtotal != 3200 {
		t.Fatalf("groups = %+v", g)
	}
}
