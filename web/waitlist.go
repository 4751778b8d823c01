package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// waitJSON is POST /api/v1/waitlist's body: a booking request and
// auto_book, or a flexible request (duration_hours, earliest, latest_end
// instead of start and end).
type waitJSON struct {
	bookingJSON
	AutoBook      bool   `json:"auto_book"`
	DurationHours int    `json:"duration_hours"`
	Earliest      string `json:"earliest"`
	LatestEnd     string `json:"latest_end"`
}

// flexibleWaitRequest reads a flexible waitlist request from its decoded
// JSON: the numbers as they came, the times parsed once.
func flexibleWaitRequest(in waitJSON, loc *time.Location) (gpuportal.OfferingRequest, error) {
	model, region, err := modelAndRegion(in.Model, in.Region)
	req := gpuportal.OfferingRequest{Model: model, Region: region, Count: in.Count, DurationHours: in.DurationHours}
	if err != nil {
		return req, err
	}
	if in.Earliest != "" {
		if req.Earliest, err = parseTime("earliest", in.Earliest, loc); err != nil {
			return req, err
		}
	}
	if in.LatestEnd != "" {
		if req.LatestEnd, err = parseTime("latest_end", in.LatestEnd, loc); err != nil {
			return req, err
		}
	}
	return req, nil
}

func (s *Server) apiJoinWaitlist(c echo.Context) error {
	var in waitJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.DurationHours != 0 || in.Earliest != "" || in.LatestEnd != "" {
		if in.Start != "" || in.End != "" {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "start", "Give start and end for one window, or duration_hours with earliest and latest_end for any window in a range — not both.")
		}
		req, err := flexibleWaitRequest(in, s.cfg.Location)
		if err != nil {
			return err
		}
		w, err := s.db.JoinFlexibleWaitlist(c.Request().Context(), currentUser(c), req)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, w)
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
	p, err := listParams(c)
	if err != nil {
		return err
	}
	list, err := s.db.WaitlistPage(c.Request().Context(), currentUser(c), p)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
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
	ctx := c.Request().Context()
	list, err := s.db.Waitlist(ctx, currentUser(c))
	if err != nil {
		return err
	}
	p := templates.WaitlistPage{Entries: list, Now: s.cfg.Clock.Now(), Missing: map[int64]gpuportal.Fen{}}
	if err := s.offerShortfalls(c, &p); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Waitlist(p))
}

// offerShortfalls says, for each offer the balance cannot pay, how much
// more claiming it needs (the offer's price, as claiming books it).
func (s *Server) offerShortfalls(c echo.Context, p *templates.WaitlistPage) error {
	ctx := c.Request().Context()
	b, err := s.db.Balance(ctx, currentUser(c))
	if err != nil {
		return err
	}
	p.Available = b.Available
	for _, e := range p.Entries {
		if e.Status != gpuportal.WaitOffered {
			continue
		}
		q, err := s.db.Price(ctx, gpuportal.BookingRequest{Model: e.Model, Region: e.Region, Count: e.Count, Start: e.Start, End: e.End})
		if err != nil {
			continue // the claim itself will say what is wrong
		}
		if missing := gpuportal.TopUpNeeded(q.Total, b.Available); missing > 0 {
			p.Missing[e.ID] = missing
		}
	}
	return nil
}

// handleJoinForm joins the waitlist from the calendar's "window full"
// panel, or with any window in a range from "Find a time".
func (s *Server) handleJoinForm(c echo.Context) error {
	if c.FormValue("duration_hours") != "" {
		req, err := parseOfferingValues(c.FormValue, s.cfg.Location)
		if err != nil {
			return err
		}
		w, err := s.db.JoinFlexibleWaitlist(c.Request().Context(), currentUser(c), req)
		if err != nil {
			return err
		}
		s.addFlash(c, "success", i18n.T(reqOf(c).lang, "You are number %d on the waitlist for %d hours in this range: the earliest window that frees is booked for you, and you are told %s.", w.Position, w.DurationHours, s.reachBy(c)))
		return redirect(c, "/waitlist")
	}
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
		// A lapsed offer, or one the balance cannot pay: said on the
		// waitlist, where the offer row says what to top up.
		if code := gpuportal.ErrorCode(err); code == gpuportal.EGONE || code == gpuportal.EFUNDS {
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
