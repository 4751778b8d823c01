package web

import (
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/ics"
	"gpuportal/store"
)

// availabilityJSON is GET /api/v1/availability's answer.
type availabilityJSON struct {
	Model  string           `json:"model"`
	Region string           `json:"region"`
	Slots  []gpuportal.Slot `json:"slots"`
}

func (s *Server) apiAvailability(c echo.Context) error {
	from, err := parseTime("from", c.QueryParam("from"), s.cfg.Location)
	if err != nil {
		return err
	}
	to, err := parseTime("to", c.QueryParam("to"), s.cfg.Location)
	if err != nil {
		return err
	}
	slots, err := s.db.Availability(c.Request().Context(), c.QueryParam("model"), c.QueryParam("region"), from, to)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, availabilityJSON{Model: c.QueryParam("model"), Region: c.QueryParam("region"), Slots: slots})
}

func (s *Server) apiQuote(c echo.Context) error {
	req, err := parseBookingValues(c.QueryParam, s.cfg.Location)
	if err != nil {
		return err
	}
	q, err := s.db.Quote(c.Request().Context(), req)
	if err != nil {
		return err
	}
	// What the calendar's quote panel says beside the price: the
	// cancellation terms as dates and, signed in, the top-up it needs.
	out := quoteJSON{Quote: q}
	if policies, err := s.db.Policies(c.Request().Context()); err == nil {
		out.Cancellation = gpuportal.CancellationSchedule(policies.For(q.Model).CancellationTiers, q.Start, s.cfg.Clock.Now())
	}
	if u := currentUser(c); u != nil {
		b, err := s.db.Balance(c.Request().Context(), u)
		if err != nil {
			return err
		}
		out.Available, out.TopUpNeeded = &b.Available, gpuportal.TopUpNeeded(q.Total, b.Available)
	}
	return c.JSON(http.StatusOK, out)
}

// quoteJSON is GET /quote's answer: the quote, its cancellation terms and
// (signed in) what is available and what to top up first.
type quoteJSON struct {
	gpuportal.Quote
	Cancellation []gpuportal.CancellationStep `json:"cancellation"`
	Available    *gpuportal.Fen               `json:"available_fen,omitempty"`
	TopUpNeeded  gpuportal.Fen                `json:"top_up_needed_fen"`
}

func (s *Server) apiBook(c echo.Context) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxJSONBody))
	if err != nil {
		return jsonError(err)
	}
	req, err := parseBookingJSON(body, s.cfg.Location)
	if err != nil {
		return err
	}
	r, err := s.db.Book(c.Request().Context(), currentUser(c), req)
	if err != nil {
		return s.withAlternatives(c, req, err)
	}
	return c.JSON(http.StatusCreated, r)
}

func (s *Server) apiReservations(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	owner, err := s.ownerParam(c)
	if err != nil {
		return err
	}
	labels, err := labelParam(c)
	if err != nil {
		return err
	}
	f := store.ReservationFilter{Status: gpuportal.ReservationStatus(c.QueryParam("status")), Tab: c.QueryParam("tab"), Limit: p.Limit, Offset: p.Offset, Total: p.Total, UserID: ownerID(owner), Labels: labels}
	list, err := s.db.Reservations(c.Request().Context(), currentUser(c), f)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

func (s *Server) apiReservation(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.db.Reservation(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) apiCancellationPreview(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	_, p, err := s.db.PreviewCancellation(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// cancelJSON is POST /reservations/{id}/cancel's answer.
type cancelJSON struct {
	ID     int64                       `json:"id"`
	Status gpuportal.ReservationStatus `json:"status"`
	Fee    gpuportal.Fen               `json:"fee_fen"`
	Refund gpuportal.Fen               `json:"refund_fen"`
}

func (s *Server) apiCancel(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.db.Cancel(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, cancelJSON{ID: r.ID, Status: r.Status, Fee: *r.Fee, Refund: *r.Refund})
}

// handleICS serves a reservation as an iCalendar event (its times in UTC,
// its words in the reader's language with times in the portal's zone),
// for the API and the "add to calendar" link alike.
func (s *Server) handleICS(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.db.Reservation(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	m, err := s.db.Model(c.Request().Context(), r.Model)
	if err != nil {
		return err
	}
	body := ics.Reservation(r, ics.WordsFor(r, m, reqOf(c).lang, s.cfg.Location), s.cfg.PublicURL)
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="reservation-%d.ics"`, r.ID))
	return c.Blob(http.StatusOK, ics.ContentType, []byte(body))
}
