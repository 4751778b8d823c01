package gpuportal

import (
	"fmt"
	"net/url"

	ics "github.com/arran4/golang-ical"
)

// ICSContentType is the media type of ReservationICS, for downloads and
// email parts alike.
const ICSContentType = "text/calendar; method=PUBLISH; charset=UTF-8"

// CalendarHost is the domain of calendar UIDs: the host of the portal's
// public address (PORTAL_PUBLIC_URL), so a reservation keeps one UID in
// every copy of it — never a request's Host header.
func CalendarHost(publicURL string) string {
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "gpuportal"
}

// ICSWords are the words of a reservation's calendar event, in the
// reader's language with times in the reader's zone (notify.ICSWords
// writes them); the event's own times stay UTC.
type ICSWords struct {
	Summary, Description, Location, Alarm string
}

// ReservationICS renders one reservation as a VCALENDAR with one VEVENT,
// lines ended by CRLF (RFC 5545 §3.1). Its UID is reservation-<id>@<host>
// (host from CalendarHost of publicURL); SEQUENCE, LAST-MODIFIED and
// DTSTAMP move with every change, so calendars that imported it take a
// cancellation (RFC 5545 §3.8.7.4); an alarm rings an hour before the
// start, and URL leads back to the reservation.
func ReservationICS(r *Reservation, words ICSWords, publicURL string) string {
	cal := ics.NewCalendar()
	cal.SetMethod(ics.MethodPublish)
	cal.SetProductId("-//gpuportal//reservations//EN")
	ev := cal.AddEvent(fmt.Sprintf("reservation-%d@%s", r.ID, CalendarHost(publicURL)))
	modified := r.ModifiedAt
	if modified.IsZero() {
		modified = r.CreatedAt
	}
	ev.SetCreatedTime(r.CreatedAt)
	ev.SetDtStampTime(modified)
	ev.SetLastModifiedAt(modified)
	ev.SetSequence(r.Sequence)
	ev.SetStartAt(r.Start.UTC())
	ev.SetEndAt(r.End.UTC())
	ev.SetSummary(words.Summary)
	ev.SetDescription(words.Description)
	ev.SetLocation(words.Location)
	if u, err := url.Parse(publicURL); err == nil && u.IsAbs() {
		ev.SetURL(u.JoinPath("reservations", fmt.Sprint(r.ID)).String())
	}
	if r.Status == ReservationCancelled {
		ev.SetStatus(ics.ObjectStatusCancelled)
	} else {
		ev.SetStatus(ics.ObjectStatusConfirmed)
		alarm := ev.AddAlarm()
		alarm.SetAction(ics.ActionDisplay)
		alarm.SetTrigger("-PT1H")
		alarm.SetProperty(ics.ComponentPropertyDescription, words.Alarm)
	}
	return cal.Serialize(ics.WithNewLine("\r\n"))
}
