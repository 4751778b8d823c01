package gpuportal

import (
	"fmt"
	"time"

	ics "github.com/arran4/golang-ical"
)

// ReservationICS renders one reservation as a VCALENDAR with one VEVENT.
func ReservationICS(r *Reservation, m *Model, host string) string {
	cal := ics.NewCalendar()
	cal.SetMethod(ics.MethodPublish)
	cal.SetProductId("-//gpuportal//reservations//EN")
	ev := cal.AddEvent(fmt.Sprintf("reservation-%d@%s", r.ID, host))
	ev.SetCreatedTime(r.CreatedAt)
	ev.SetDtStampTime(r.CreatedAt)
	ev.SetStartAt(r.Start.UTC())
	ev.SetEndAt(r.End.UTC())
	ev.SetSummary(fmt.Sprintf("%d × %s (%s) — reservation #%d", r.Count, m.Name, r.Region, r.ID))
	ev.SetDescription(fmt.Sprintf("gpuportal reservation #%d: %d × %s (%s) in region %s, %s to %s UTC, price %s. Status: %s.",
		r.ID, r.Count, m.Name, m.ID, r.Region, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339), r.Price, r.Status))
	ev.SetLocation("Region " + r.Region)
	if r.Status == ReservationCancelled {
		ev.SetStatus(ics.ObjectStatusCancelled)
	} else {
		ev.SetStatus(ics.ObjectStatusConfirmed)
	}
	return cal.Serialize()
}
