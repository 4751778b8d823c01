package web

import (
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/notify"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// renderNotes renders notifications for display (subject and text in the
// viewer's language).
func (s *Server) renderNotes(c echo.Context, list []gpuportal.Notification) []templates.NoteRow {
	out := make([]templates.NoteRow, len(list))
	for i, n := range list {
		m := notify.Render(n, reqOf(c).lang, "", s.cfg.Location)
		out[i] = templates.NoteRow{N: n, Subject: m.Subject, Text: m.Body}
	}
	return out
}

func prefsFromForm(c echo.Context) store.NotificationPrefs {
	return store.NotificationPrefs{Email: c.FormValue("email") == "on", SMS: c.FormValue("sms") == "on"}
}
