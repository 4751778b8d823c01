package gpuportal

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// ReservationStatus is where a reservation is: confirmed → active →
// completed, or cancelled before its end.
type ReservationStatus string

// Reservation statuses.
const (
	ReservationConfirmed ReservationStatus = "confirmed"
	ReservationActive    ReservationStatus = "active"
	ReservationCompleted ReservationStatus = "completed"
	ReservationCancelled ReservationStatus = "cancelled"
)

// MaxGPUsPerRequest bounds the count of any request; anything larger is a
// typo or an attack, not a booking.
const MaxGPUsPerRequest = 4096

// Reservation is count GPUs of a model in a region for [Start, End), booked
// ahead at a fixed price.
type Reservation struct {
	ID     int64 `json:"id"`
	UserID int64 `json:"user_id"`
	// TeamID: the team it was booked for (nil: personal); CreatedBy: the
	// member who booked it.
	TeamID    *int64            `json:"team_id"`
	CreatedBy *int64            `json:"created_by"`
	Model     string            `json:"model"`
	Region    string            `json:"region"`
	Count     int               `json:"count"`
	Start     time.Time         `json:"start"`
	End       time.Time         `json:"end"`
	Status    ReservationStatus `json:"status"`
	// Price is fixed at booking; the quote and cancellation tiers it was
	// booked under are kept with it, so later policy changes do not touch it.
	Price             Fen                `json:"price_fen"`
	Quote             *Quote             `json:"quote,omitempty"`
	CancellationTiers []CancellationTier `json:"cancellation_tiers"`
	GPUs              []string           `json:"gpus,omitempty"`
	CreatedAt         time.Time          `json:"created_at"`
	CancelledAt       *time.Time         `json:"cancelled_at,omitempty"`
	Fee               *Fen               `json:"fee_fen,omitempty"`
	Refund            *Fen               `json:"refund_fen,omitempty"`
	// Launch is what runs by itself at its start (nil: nothing).
	Launch *LaunchSpec `json:"launch,omitempty"`
	Labels Labels      `json:"labels,omitempty"`
	// Sequence counts the changes a calendar must take (a cancellation,
	// an extension), ModifiedAt is the last one: the .ics's SEQUENCE and
	// LAST-MODIFIED.
	Sequence   int       `json:"-"`
	ModifiedAt time.Time `json:"-"`
}

// Hours returns the reservation's length in hours.
func (r *Reservation) Hours() int { return int(r.End.Sub(r.Start) / time.Hour) }

// BookingRequest asks for count GPUs of a model in a region for [Start, End).
type BookingRequest struct {
	Model  string    `json:"model"`
	Region string    `json:"region"`
	Count  int       `json:"count"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	// Launch, when set, runs at the start on all the reservation's GPUs.
	Launch *LaunchSpec `json:"launch,omitempty"`
	Labels Labels      `json:"labels,omitempty"`
}

// LaunchSpec is what a reservation runs by itself at its start (and what
// "Launch on this reservation" runs): a command in a catalog image, one
// instance per node on all its GPUs.
type LaunchSpec struct {
	Image   string `json:"image,omitempty"` // a catalog image id; empty: the first
	Command string `json:"command"`
	// Volumes the launch's instances mount.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// DiskGiB sizes each instance's disk (nil: the policy's).
	DiskGiB *int `json:"disk_gib,omitempty"`
	// ResumeInstanceID: book your resume — at the start, the booker's
	// stopped instance with this id starts on the reservation's GPUs with
	// its kept disk (its own image, command and volumes; the rest of the
	// spec is not used).
	ResumeInstanceID *int64 `json:"resume_instance_id,omitempty"`
}

// MachineCommand is the command of "a machine to log into": it runs until
// the reservation ends, doing nothing.
const MachineCommand = "while :; do sleep 3600; done"

// MaxCommandLength bounds a launch's command.
const MaxCommandLength = 4096

// Validate checks the shape of a launch spec.
func (s *LaunchSpec) Validate() error {
	if s.ResumeInstanceID != nil {
		if *s.ResumeInstanceID <= 0 {
			return FieldErrorf(EINVALID, "launch.resume_instance_id", "Name the stopped instance to resume by its id.")
		}
		return nil
	}
	s.Command = strings.TrimSpace(s.Command)
	if s.Command == "" {
		return FieldErrorf(EINVALID, "launch.command", "Say what to run at the start (a command), or choose a machine to log into.")
	}
	if len(s.Command) > MaxCommandLength {
		return FieldErrorf(EINVALID, "launch.command", "The command is longer than %d characters.", MaxCommandLength)
	}
	return nil
}

// ValidateBooking checks a booking request against a policy at now: the
// shape of the request (invalid_input) and the duration and lead-time rules
// (policy_violation), each naming its field. Capacity and credit need the
// database and are checked by the store.
func ValidateBooking(req BookingRequest, p Policy, now time.Time) error {
	if err := ValidateLabels(req.Labels); err != nil {
		return err
	}
	if req.Count <= 0 {
		return FieldErrorf(EINVALID, "count", "The GPU count must be at least 1.")
	}
	if req.Count > MaxGPUsPerRequest {
		return FieldErrorf(EINVALID, "count", "The GPU count must be at most %d.", MaxGPUsPerRequest)
	}
	if req.Start.IsZero() {
		return FieldErrorf(EINVALID, "start", "The start time is required (RFC 3339, e.g. 2026-12-01T10:00:00+08:00).")
	}
	if req.End.IsZero() {
		return FieldErrorf(EINVALID, "end", "The end time is required (RFC 3339, e.g. 2026-12-01T14:00:00+08:00).")
	}
	if !req.End.After(req.Start) {
		return FieldErrorf(EINVALID, "end", "The end must be after the start.")
	}
	if !OnTheHour(req.Start) {
		return FieldErrorf(EPOLICY, "start", "Bookings start on a whole hour (like 10:00).")
	}
	if !OnTheHour(req.End) {
		return FieldErrorf(EPOLICY, "end", "Bookings end on a whole hour (like 14:00).")
	}
	earliest, latest := p.BookingWindow(now)
	if req.Start.Before(earliest) {
		return FieldErrorf(EPOLICY, "start", "The earliest start you can book now is %s.", SiteTime(earliest, now.Location()))
	}
	if req.Start.After(latest) {
		return FieldErrorf(EPOLICY, "start", "Bookings can start at most %d days ahead.", p.MaxAdvanceDays)
	}
	hours := int(req.End.Sub(req.Start) / time.Hour)
	if hours < p.MinDurationHours {
		return FieldErrorf(EPOLICY, "duration", "The minimum booking is %d hours.", p.MinDurationHours)
	}
	if hours > p.MaxDurationHours {
		return FieldErrorf(EPOLICY, "duration", "The maximum booking is %d hours.", p.MaxDurationHours)
	}
	return nil
}

// BookingWindow is when a booking made at now may start under p: from
// the next whole hour (the one under way has begun) to MaxAdvanceDays
// ahead. Booking, the calendar, offerings and the waitlist all ask it.
func (p Policy) BookingWindow(now time.Time) (earliest, latest time.Time) {
	return now.Truncate(time.Hour).Add(time.Hour), now.Add(time.Duration(p.MaxAdvanceDays) * 24 * time.Hour)
}

// OnTheHour reports whether t is a whole hour (in UTC, which for every zone
// with whole-hour offsets is the same thing).
func OnTheHour(t time.Time) bool { return t.Equal(t.Truncate(time.Hour)) }

// CancellationFee returns what cancelling a reservation at now costs under
// the tiers it was booked with: the first tier (ordered earliest first)
// whose min_hours_before the time left reaches. After the start nothing is
// refunded.
func CancellationFee(price Fen, tiers []CancellationTier, start, now time.Time) (fee, refund Fen) {
	if !now.Before(start) {
		return price, 0
	}
	left := start.Sub(now)
	percent := 100
	sorted := append([]CancellationTier(nil), tiers...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].MinHoursBefore > sorted[j].MinHoursBefore })
	for _, t := range sorted {
		if left >= time.Duration(t.MinHoursBefore)*time.Hour {
			percent = t.FeePercent
			break
		}
	}
	fee = price * Fen(percent) / 100
	return fee, price - fee
}

// CancellationStep is a stretch of a booking's cancellation terms: from
// From (zero: from the booking on) until the next step, cancelling costs
// FeePercent of the price.
type CancellationStep struct {
	From       time.Time `json:"from,omitzero"`
	FeePercent int       `json:"fee_percent"`
}

// CancellationSchedule lays a booking's tiers out as dates, as a customer
// reads them before booking: what cancelling costs from now until the
// start (from the start on there is no refund). Tiers already past
// collapse into the one in force now; equal neighbours merge.
func CancellationSchedule(tiers []CancellationTier, start, now time.Time) []CancellationStep {
	sorted := append([]CancellationTier(nil), tiers...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].MinHoursBefore > sorted[j].MinHoursBefore })
	var steps []CancellationStep
	add := func(from time.Time, fee int) {
		if !from.After(now) {
			from = time.Time{}
			steps = steps[:0] // what was in force before now no longer matters
		}
		if n := len(steps); n > 0 && steps[n-1].FeePercent == fee {
			return
		}
		steps = append(steps, CancellationStep{From: from, FeePercent: fee})
	}
	if len(sorted) > 0 {
		add(time.Time{}, sorted[0].FeePercent)
	}
	for k, t := range sorted {
		next := 100 // after the last tier's boundary: the whole price
		if k+1 < len(sorted) {
			next = sorted[k+1].FeePercent
		}
		add(start.Add(-time.Duration(t.MinHoursBefore)*time.Hour), next)
	}
	add(start, 100)
	return steps
}

// CreditWindow is how long a late cancellation counts against a user's
// credit.
const CreditWindow = 30 * 24 * time.Hour

// CancellationPreview is what cancelling a reservation now would cost.
type CancellationPreview struct {
	Fee        Fen  `json:"fee_fen"`
	Refund     Fen  `json:"refund_fen"`
	FeePercent int  `json:"fee_percent"`
	Late       bool `json:"late_cancellation"`
}

// PreviewCancellation is the fee and refund of cancelling r at now under
// the tiers it was booked with; a cancellation with a fee is late.
func PreviewCancellation(r *Reservation, now time.Time) CancellationPreview {
	fee, refund := CancellationFee(r.Price, r.CancellationTiers, r.Start, now)
	p := CancellationPreview{Fee: fee, Refund: refund, Late: fee > 0}
	if r.Price > 0 {
		p.FeePercent = int(fee * 100 / r.Price)
	}
	return p
}

// Posting is one ledger line a rule asks for: its kind, its amount
// (positive: the customer pays; negative: money back) and its words.
type Posting struct {
	Kind        string
	Amount      Fen
	Description string
}

// CancelledPaidBack is the stored words of a cancellation's first ledger
// line (what was paid, back; the fee line follows), which the ledger's
// pages recognise to say it in the reader's language.
func CancelledPaidBack(id int64) string {
	return fmt.Sprintf("Reservation #%d cancelled: price returned", id)
}

// Postings are the ledger lines of cancelling reservation id, of price,
// as p says: the whole price back, then the fee charged again (two lines,
// so that the statement shows both). Without a refund nothing is posted:
// the price already paid is the fee.
func (p CancellationPreview) Postings(id int64, price Fen) []Posting {
	if p.Refund <= 0 {
		return nil
	}
	out := []Posting{{Kind: LedgerRefund, Amount: -price, Description: CancelledPaidBack(id)}}
	if p.Fee > 0 {
		out = append(out, Posting{Kind: LedgerCancellationFee, Amount: p.Fee, Description: fmt.Sprintf("Reservation #%d: cancellation fee (%d%%)", id, p.FeePercent)})
	}
	return out
}

// ShortfallRefund is what a reservation short of missing GPUs from now
// to its end gets back: its price per GPU-hour for each missing GPU and
// each hour left, counting the hour under way (the customer cannot use
// what remains of it), with hoursLeft for the ledger's words.
func ShortfallRefund(r *Reservation, missing int, now time.Time) (refund Fen, hoursLeft int) {
	left := r.End.Sub(now.Truncate(time.Hour))
	hoursLeft = max(0, int((left+time.Hour-1)/time.Hour))
	if r.Count <= 0 || r.Hours() <= 0 {
		return 0, hoursLeft
	}
	return r.Price * Fen(missing*hoursLeft) / Fen(r.Count*r.Hours()), hoursLeft
}

// CreditBlockedUntil applies the late-cancellation limit: given the times
// of a user's late (fee-bearing) cancellations, it returns the time from
// which they may book again, or the zero time when they may book now. More
// than limit late cancellations in the trailing 30 days block booking.
func CreditBlockedUntil(lateCancels []time.Time, limit int, now time.Time) time.Time {
	const window = CreditWindow
	var recent []time.Time
	for _, t := range lateCancels {
		if now.Sub(t) < window && !t.After(now) {
			recent = append(recent, t)
		}
	}
	if len(recent) <= limit {
		return time.Time{}
	}
	sort.Slice(recent, func(i, j int) bool { return recent[i].Before(recent[j]) })
	// Booking is possible again once enough of the oldest have aged out
	// that at most limit remain.
	return recent[len(recent)-limit-1].Add(window)
}

// LedgerEntry is one charge (positive) or refund (negative) of a user.
type LedgerEntry struct {
	ID            int64     `json:"id"`
	At            time.Time `json:"at"`
	Kind          string    `json:"kind"`
	Amount        Fen       `json:"amount_fen"` // > 0 takes money out of the balance, < 0 puts it in
	ReservationID *int64    `json:"reservation_id,omitempty"`
	InstanceID    *int64    `json:"instance_id,omitempty"`
	TopUpID       *int64    `json:"topup_id,omitempty"`
	VolumeID      *int64    `json:"volume_id,omitempty"`
	Description   string    `json:"description"`
	// What the entry is about, for display in any language: the GPUs and
	// model of its reservation or instance.
	Count int    `json:"count,omitempty"`
	Model string `json:"model,omitempty"`
	// VolumeName is the name of the volume a volume charge is for.
	VolumeName string `json:"volume_name,omitempty"`
}

// SiteTime is how a time reads to a customer: in the site's time zone, to
// the minute, naming the zone (never a bare UTC "Z").
func SiteTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04") + " (" + loc.String() + ")"
}
