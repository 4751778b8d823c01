package gpuportal

import (
	"time"
)

// QuoteHour is one hour of a quote: what one GPU costs that hour and why.
type QuoteHour struct {
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	ListPerGPU      Fen       `json:"list_price_per_gpu_hour_fen"`
	DiscountPercent int       `json:"discount_percent"`
	PricePerGPU     Fen       `json:"price_per_gpu_hour_fen"`
	Subtotal        Fen       `json:"subtotal_fen"`
	OffPeak         bool      `json:"off_peak"`
}

// Quote is the price of count GPUs of a model for [Start, End), hour by hour.
type Quote struct {
	Model string      `json:"model"`
	Count int         `json:"count"`
	Start time.Time   `json:"start"`
	End   time.Time   `json:"end"`
	Hours []QuoteHour `json:"hours"`
	// ListTotal is what the hours would cost at list price; Total is what
	// they cost with off-peak discounts.
	ListTotal Fen `json:"list_total_fen"`
	Total     Fen `json:"total_fen"`
}

// Discount returns the total off-peak discount of the quote.
func (q Quote) Discount() Fen { return q.ListTotal - q.Total }

// QuoteFor prices count GPUs of model for the whole hours [start, end)
// under policy. It does not validate the request (see ValidateBooking);
// start and end are expected on whole hours.
func QuoteFor(model Model, count int, start, end time.Time, policy Policy, loc *time.Location) Quote {
	q := Quote{Model: model.ID, Count: count, Start: start.UTC(), End: end.UTC()}
	for t := q.Start; t.Before(q.End); t = t.Add(time.Hour) {
		price, d := HourPrice(model.ListPrice, policy, t, loc)
		h := QuoteHour{
			Start: t, End: t.Add(time.Hour), ListPerGPU: model.ListPrice, DiscountPercent: d,
			PricePerGPU: price, Subtotal: price * Fen(count), OffPeak: d > 0,
		}
		q.Hours = append(q.Hours, h)
		q.ListTotal += model.ListPrice * Fen(count)
		q.Total += h.Subtotal
	}
	return q
}

// QuoteGroup is a run of consecutive hours at the same price, for showing a
// long quote compactly ("16 h × ¥5.60").
type QuoteGroup struct {
	Start, End      time.Time
	Hours           int
	DiscountPercent int
	PricePerGPU     Fen
	Subtotal        Fen
}

// Groups folds the quote's hours into runs of the same price.
func (q Quote) Groups() []QuoteGroup {
	var out []QuoteGroup
	for _, h := range q.Hours {
		if n := len(out); n > 0 && out[n-1].End.Equal(h.Start) && out[n-1].PricePerGPU == h.PricePerGPU && out[n-1].DiscountPercent == h.DiscountPercent {
			out[n-1].End = h.End
			out[n-1].Hours++
			out[n-1].Subtotal += h.Subtotal
			continue
		}
		out = append(out, QuoteGroup{Start: h.Start, End: h.End, Hours: 1, DiscountPercent: h.DiscountPercent, PricePerGPU: h.PricePerGPU, Subtotal: h.Subtotal})
	}
	return out
}
