// Package ics writes a reservation as an iCalendar file (RFC 5545), in
// the reader's language: the one format of its kind, at the edge, for
// the reservation page's download and the confirmation email alike.
package ics

import (
	"fmt"
	"net/url"

	ical "github.com/arran4/golang-ical"

	"gpuportal"
)

// ContentType is the media type of Reservation, for downloads and email
// parts alike.
const ContentType = "text/calendar; method=PUBLISH; charset=UTF-8"

// CalendarHost is the domain of calendar UIDs: the host of the portal's
// public address (PORTAL_PUBLIC_URL), so a reservation keeps one UID in
// every copy of it — never a request's Host header.
func CalendarHost(publicURL string) string {
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "gpuportal"
}

// Words are the words of a reservation's calendar event, in the reader's
// language with times in the reader's zone (WordsFor writes them); the
// event's own times stay UTC.
type Words struct {
	Summary, Description, Location, Alarm string
}

// Reservation renders one reservation as a VCALENDAR with one VEVENT,
// lines ended by CRLF (RFC 5545 §3.1). Its UID is reservation-<id>@<host>
// (host from CalendarHost of publicURL); SEQUENCE, LAST-MODIFIED and
// DTSTAMP move with every change, so calendars that imported it take a
// cancellation (RFC 5545 §3.8.7.4); an alarm rings an hour before the
// start, and URL leads back to the reservation.
func Reservation(r *gpuportal.Reservation, words Words, publicURL string) string {
	cal := ical.NewCalendar()
	cal.SetMethod(ical.MethodPublish)
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
	if r.Status == gpuportal.ReservationCancelled {
		ev.SetStatus(ical.ObjectStatusCancelled)
	} else {
		ev.SetStatus(ical.ObjectStatusConfirmed)
		alarm := ev.AddAlarm()
		alarm.SetAction(ical.ActionDisplay)
		alarm.SetTrigger("-PT1H")
		alarm.SetProperty(ical.ComponentPropertyDescription, words.Alarm)
	}
	return cal.Serialize(ical.WithNewLine("\r\n"))
}
