package gpuportal

import "time"

// What stops a reservation from being extended further.
const (
	ExtensionLimitDuration = "max_duration" // the policy's longest booking
	ExtensionLimitCapacity = "capacity"     // the next hour is full for its count
)

// ExtensionOption is one way to extend a reservation: by Hours, to End,
// for Price (the added hours at today's prices, off-peak included).
type ExtensionOption struct {
	Hours int       `json:"hours"`
	End   time.Time `json:"end"`
	Price Fen       `json:"price_fen"`
}

// Extension is what a reservation could be extended by now
// (GET /reservations/{id}/extension).
type Extension struct {
	MaxHours int               `json:"max_hours"`
	Options  []ExtensionOption `json:"options"`
	// LimitedBy says why it stops at MaxHours: ExtensionLimitDuration or
	// ExtensionLimitCapacity.
	LimitedBy string `json:"limited_by"`
}

// CanExtend refuses a reservation that is neither confirmed nor active, or
// that has ended.
func CanExtend(r *Reservation, now time.Time) error {
	if (r.Status != ReservationConfirmed && r.Status != ReservationActive) || !r.End.After(now) {
		return Errorf(ECONFLICT, "Reservation %d is %s: only a confirmed or active reservation can be extended.", r.ID, r.Status)
	}
	return nil
}

// ExtensionFor is how r could be extended given the grid of the hours
// from its end on (g.From == r.End; Free not counting r itself): every
// added hour must have r's count free, and the whole stay within the
// policy's maximum duration. Each option is priced like a quote.
func ExtensionFor(r *Reservation, g HourGrid) Extension {
	room := g.Policy.MaxDurationHours - r.Hours()
	ext := Extension{Options: []ExtensionOption{}, LimitedBy: ExtensionLimitDuration}
	var price Fen
	for h := 0; h < room; h++ {
		if h >= len(g.Free) || g.Free[h] < r.Count {
			ext.LimitedBy = ExtensionLimitCapacity
			break
		}
		p, _ := HourPrice(g.Model.ListPrice, g.Policy, g.From.Add(time.Duration(h)*time.Hour), g.Loc)
		price += p * Fen(r.Count)
		ext.MaxHours = h + 1
		ext.Options = append(ext.Options, ExtensionOption{Hours: h + 1, End: g.From.Add(time.Duration(h+1) * time.Hour), Price: price})
	}
	return ext
}

// ValidateExtension checks a request to add hours to r against what
// ExtensionFor allows: past the maximum duration is a policy violation
// (422), an added hour that is full is capacity_unavailable (409).
func ValidateExtension(r *Reservation, hours int, ext Extension, p Policy, loc *time.Location) error {
	if hours < 1 {
		return FieldErrorf(EINVALID, "hours", "Extend by at least 1 hour.")
	}
	if r.Hours()+hours > p.MaxDurationHours {
		return FieldErrorf(EPOLICY, "hours", "The maximum booking is %d hours: this reservation can be extended by at most %d more.", p.MaxDurationHours, max(0, p.MaxDurationHours-r.Hours()))
	}
	if hours > ext.MaxHours {
		full := r.End.Add(time.Duration(ext.MaxHours) * time.Hour)
		return FieldErrorf(ECAPACITY, "hours", "Not enough GPUs free at %s (%s) to extend by %d hours: it can be extended by at most %d now.",
			full.In(loc).Format("2006-01-02 15:04"), loc.String(), hours, ext.MaxHours)
	}
	return nil
}

// Choices are the options a page offers for a balance of available: only
// what it pays for, every hour up to 12, then every 6 up to 48, then
// every 24 (the longest it pays for always among them); next is the first
// option it does not pay for (nil: none), to say what a top-up would add.
func (e Extension) Choices(available Fen) (choices []ExtensionOption, next *ExtensionOption) {
	for k, o := range e.Options {
		if o.Price > available {
			next = &e.Options[k]
			break
		}
		last := k+1 == len(e.Options) || e.Options[k+1].Price > available
		if o.Hours <= 12 || o.Hours <= 48 && o.Hours%6 == 0 || o.Hours%24 == 0 || last {
			choices = append(choices, o)
		}
	}
	return choices, next
}
