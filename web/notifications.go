package web

// Notifications: a customer's in-app messages and notification settings,
// and the admins' outbox (what was sent by email and SMS, and resending).

import (
	"fmt"
	"gpuportal"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"gpuportal/i18n"
	"gpuportal/store"
	"gpuportal/web/templates"
)

func (s *Server) apiInApp(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	list, err := s.db.InAppPage(c.Request().Context(), currentUser(c).ID, p)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

func (s *Server) apiOutbox(c echo.Context) error {
	status, err := outboxStatusParam(c)
	if err != nil {
		return err
	}
	p, err := listParams(c)
	if err != nil {
		return err
	}
	list, err := s.db.OutboxPage(c.Request().Context(), status, p)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

// outboxStatusParam is ?status= of the outbox: one of a message's
// states, or none for all.
func outboxStatusParam(c echo.Context) (string, error) {
	switch v := c.QueryParam("status"); v {
	case "", "pending", "sending", "sent", "failed":
		return v, nil
	default:
		return "", gpuportal.FieldErrorf(gpuportal.EINVALID, "status", "Unknown status %q.", v)
	}
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

// handleNotificationsPage lists the user's notifications a page at a
// time, marks those not seen before, and counts them all seen from now.
func (s *Server) handleNotificationsPage(c echo.Context) error {
	ctx, u := c.Request().Context(), currentUser(c)
	page := pageParam(c)
	list, err := s.db.InAppPage(ctx, u.ID, store.Page{Limit: listPageSize + 1, Offset: (page - 1) * listPageSize})
	if err != nil {
		return err
	}
	more := len(list) > listPageSize
	list = list[:min(len(list), listPageSize)]
	seen, err := s.db.NotificationsSeenUpTo(ctx, u.ID)
	if err != nil {
		return err
	}
	rows := s.renderNotes(c, list)
	for k := range rows {
		rows[k].Unread = rows[k].N.ID > seen
		rows[k].Link = noteLink(rows[k].N)
	}
	if err := s.db.MarkNotificationsSeen(ctx, u.ID); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Notifications(rows, pagerFor(c, page, more)))
}

// noteLink is the page a notification is about.
func noteLink(n gpuportal.Notification) string {
	p := n.Params
	switch {
	case p.ReservationID != 0:
		return fmt.Sprintf("/reservations/%d", p.ReservationID)
	case p.JobID != 0:
		return fmt.Sprintf("/jobs/%d", p.JobID)
	case p.InstanceID != 0:
		return fmt.Sprintf("/instances?tab=%s", instanceTabFor(n))
	case p.EntryID != 0:
		return "/waitlist"
	case n.Kind == gpuportal.NoteBalanceLow || n.Kind == gpuportal.NoteBalanceStop || n.Kind == gpuportal.NoteBudgetReached:
		return "/ledger"
	}
	return ""
}

// instanceTabFor is where an instance a notification names is listed:
// restarts and interruptions are about instances still under way.
func instanceTabFor(n gpuportal.Notification) string {
	if n.Kind == gpuportal.NoteInstanceRestarted || n.Kind == gpuportal.NoteSpotInterruption {
		return store.TabActive
	}
	return store.TabEnded
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
