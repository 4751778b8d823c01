package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// waitJSON is POST /api/v1/waitlist's body: a booking request and auto_book.
type waitJSON struct {
	bookingJSON
	AutoBook bool `json:"auto_book"`
}

func (s *Server) apiJoinWaitlist(c echo.Context) error {
	var in waitJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	req, err := bookingFields(in.Model, in.Region, in.Count, in.Start, in.End, s.cfg.Location)
	if err != nil {
		return err
	}
	w, err := s.db.JoinWaitlist(c.Request().Context(), currentUser(c), req, in.AutoBook)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, w)
}

func (s *Server) apiWaitlist(c echo.Context) error {
	list, err := s.db.Waitlist(c.Request().Context(), currentUser(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiLeaveWaitlist(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.LeaveWaitlist(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiClaim(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.db.ClaimOffer(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, r)
}

func (s *Server) handleWaitlistPage(c echo.Context) error {
	list, err := s.db.Waitlist(c.Request().Context(), currentUser(c))
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Waitlist(templates.WaitlistPage{Entries: list, Now: s.cfg.Clock.Now()}))
}

// handleJoinForm joins the waitlist from the calendar's "window full" panel.
func (s *Server) handleJoinForm(c echo.Context) error {
	req, err := parseBookingValues(c.FormValue, s.cfg.Location)
	if err == nil {
		var w *gpuportal.WaitlistEntry
		if w, err = s.db.JoinWaitlist(c.Request().Context(), currentUser(c), req, c.FormValue("auto_book") == "true"); err == nil {
			s.addFlash(c, "success", i18n.T(reqOf(c).lang, "You are number %d on the waitlist for this window. We will tell you %s when it frees.", w.Position, s.reachBy(c)))
			return redirect(c, "/waitlist")
		}
	}
	return err
}

func (s *Server) handleClaimForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.db.ClaimOffer(c.Request().Context(), currentUser(c), id)
	if err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EGONE {
			s.addFlash(c, "error", i18n.Error(reqOf(c).lang, err))
			return redirect(c, "/waitlist")
		}
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Claimed: reservation #%d is confirmed.", r.ID))
	return redirect(c, resPath(r.ID))
}

func (s *Server) handleLeaveForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.LeaveWaitlist(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "You left the waitlist (entry #%d).", id))
	return redirect(c, "/waitlist")
}
