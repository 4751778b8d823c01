package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/store"
)

// parseOfferingValues reads an offering search from query or form values:
// model, region, count, duration_hours, earliest, latest_end, sort, limit.
// earliest and latest_end are RFC 3339 or site-local times; from a form
// they may also be dates (earliest_date: that day's 00:00, latest_date:
// the end of that day). Missing times take the defaults of
// gpuportal.NormalizeOfferingRequest.
func parseOfferingValues(get func(string) string, loc *time.Location) (gpuportal.OfferingRequest, error) {
	model, region, err := modelAndRegion(get("model"), get("region"))
	req := gpuportal.OfferingRequest{Model: model, Region: region, Sort: strings.TrimSpace(get("sort"))}
	if err != nil {
		return req, err
	}
	if req.Count, err = wholeNumber(get, "count", true); err != nil {
		return req, err
	}
	if req.DurationHours, err = wholeNumber(get, "duration_hours", true); err != nil {
		return req, err
	}
	if req.Limit, err = wholeNumber(get, "limit", false); err != nil {
		return req, err
	}
	if strings.TrimSpace(get("limit")) != "" && req.Limit < 1 { // 0 is "not said" below; said, it is wrong
		return req, gpuportal.FieldErrorf(gpuportal.EINVALID, "limit", "limit must be a number from 1 to %d.", gpuportal.MaxOfferings)
	}
	if req.Earliest, err = rangeTime(get, "earliest", "earliest_date", 0, loc); err != nil {
		return req, err
	}
	if req.LatestEnd, err = rangeTime(get, "latest_end", "latest_date", 1, loc); err != nil {
		return req, err
	}
	return req, nil
}

// wholeNumber reads a whole-number field; an absent optional one is 0.
func wholeNumber(get func(string) string, field string, required bool) (int, error) {
	v := strings.TrimSpace(get(field))
	if v == "" && !required {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "%s must be a whole number.", field)
	}
	return n, nil
}

// rangeTime reads a time field, or a date field as the local midnight
// that many days after the date (0: its start, 1: its end); zero when
// neither is given.
func rangeTime(get func(string) string, field, dateField string, days int, loc *time.Location) (time.Time, error) {
	if v := strings.TrimSpace(get(field)); v != "" {
		return parseTime(field, v, loc)
	}
	v := strings.TrimSpace(get(dateField))
	if v == "" {
		return time.Time{}, nil
	}
	d, err := time.ParseInLocation("2006-01-02", v, loc)
	if err != nil || d.Year() < 2000 || d.Year() > 2200 {
		return time.Time{}, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "The date must look like 2026-12-01.")
	}
	return d.AddDate(0, 0, days).UTC(), nil
}

func (s *Server) apiOfferings(c echo.Context) error {
	req, err := parseOfferingValues(c.QueryParam, s.cfg.Location)
	if err != nil {
		return err
	}
	list, err := s.db.Offerings(c.Request().Context(), req)
	if err != nil {
		return err
	}
	if list == nil {
		list = []gpuportal.Offering{} // none fits: an empty list, never null
	}
	return c.JSON(http.StatusOK, list)
}

// fullWindowError is a booking refused because its window is full, with
// what could be booked instead: the JSON answer carries them beside the
// error ("offerings", "most_free").
type fullWindowError struct {
	err  error
	alts store.Alternatives
}

func (e *fullWindowError) Error() string { return e.err.Error() }
func (e *fullWindowError) Unwrap() error { return e.err }

// withAlternatives turns a capacity refusal of req into a fullWindowError
// carrying the nearest offerings; any other error passes through.
func (s *Server) withAlternatives(c echo.Context, req gpuportal.BookingRequest, err error) error {
	if gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		return err
	}
	alts, aerr := s.db.AlternativesFor(c.Request().Context(), req)
	if aerr != nil {
		return err
	}
	return &fullWindowError{err: err, alts: alts}
}

// alternativesOf returns the alternatives an error carries, if any.
func alternativesOf(err error) (store.Alternatives, bool) {
	var fw *fullWindowError
	if errors.As(err, &fw) {
		return fw.alts, true
	}
	return store.Alternatives{}, false
}

// extensionJSON is POST /reservations/{id}/extend's body.
type extensionJSON struct {
	Hours int `json:"hours"`
}

func (s *Server) apiExtension(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	_, ext, err := s.db.Extension(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ext)
}

func (s *Server) apiExtend(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in extensionJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	r, err := s.db.Extend(c.Request().Context(), currentUser(c), id, in.Hours)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) apiLaunchOnReservation(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var spec gpuportal.LaunchSpec
	if err := bindJSON(c, &spec); err != nil {
		return err
	}
	list, err := s.db.LaunchOnReservation(c.Request().Context(), currentUser(c), id, spec)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, list)
}
