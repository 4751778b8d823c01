package ics

import (
	"time"

	"gpuportal"
	"gpuportal/i18n"
)

// WordsFor writes a reservation's calendar event in the reader's language,
// with its times in loc (the portal's zone, named) — the same whether the
// event comes with the confirmation email or is downloaded from the
// reservation's page.
func WordsFor(r *gpuportal.Reservation, m *gpuportal.Model, lang string, loc *time.Location) Words {
	T := func(key string, args ...any) string { return i18n.T(lang, key, args...) }
	when := func(t time.Time) string { return t.In(loc).Format("2006-01-02 15:04") }
	return Words{
		Summary: T("%d × %s (%s), reservation #%d", r.Count, m.Name, r.Region, r.ID),
		Description: T("gpuportal reservation #%d: %d × %s in region %s, %s to %s (%s), price %s. Status: %s.",
			r.ID, r.Count, m.Name, r.Region, when(r.Start), when(r.End), loc.String(), r.Price.String(), T(string(r.Status))),
		Location: T("Region %s", r.Region),
		Alarm:    T("Reservation #%d starts in 1 hour", r.ID),
	}
}
