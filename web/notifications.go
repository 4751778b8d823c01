package web

// Notifications: a customer's in-app messages and notification settings,
// and the admins' outbox (what was sent by email and SMS, and resending).

import (
	"gpuportal"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"gpuportal/i18n"
	"gpuportal/web/templates"
)

func (s *Server) apiInApp(c echo.Context) error {
	list, err := s.db.InApp(c.Request().Context(), currentUser(c).ID, 200)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiOutbox(c echo.Context) error {
	list, err := s.db.Outbox(c.Request().Context(), c.QueryParam("status"), 0)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiResend(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.Resend(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"id": id, "status": "pending"})
}

// --- pages ---

func (s *Server) handleNotificationsPage(c echo.Context) error {
	list, err := s.db.InApp(c.Request().Context(), currentUser(c).ID, 200)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Notifications(s.renderNotes(c, list)))
}

func (s *Server) handleOutboxPage(c echo.Context) error {
	list, err := s.db.Outbox(c.Request().Context(), c.QueryParam("status"), 0)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Outbox(templates.OutboxPage{Notes: s.renderNotes(c, list), Status: c.QueryParam("status"),
		EmailOff: !s.db.Channels[gpuportal.ChannelEmail], SMSOff: !s.db.Channels[gpuportal.ChannelSMS]}))
}

func (s *Server) handleResendForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.Resend(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Notification %s queued again.", strconv.FormatInt(id, 10)))
	return redirect(c, "/admin/notifications")
}

func (s *Server) handlePrefsForm(c echo.Context) error {
	p := prefsFromForm(c)
	if err := s.db.SetPrefs(c.Request().Context(), currentUser(c).ID, p); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Your notification settings have been saved."))
	return redirect(c, "/settings")
}
