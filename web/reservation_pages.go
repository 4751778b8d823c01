package web

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// isHTMX reports whether the request came from htmx (render a fragment).
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// calendarGrid builds one week of the availability calendar. week is any
// date ("2006-01-02") in the wanted week; empty means this week.
func (s *Server) calendarGrid(c echo.Context, modelID, regionID, week string) (templates.CalendarGrid, []gpuportal.Model, []gpuportal.Region, error) {
	ctx := c.Request().Context()
	loc := s.cfg.Location
	models, err := s.db.Models(ctx)
	if err != nil {
		return templates.CalendarGrid{}, nil, nil, err
	}
	regions, err := s.db.Regions(ctx)
	if err != nil {
		return templates.CalendarGrid{}, nil, nil, err
	}
	g := templates.CalendarGrid{Model: models[0], Region: regions[0].ID}
	if modelID != "" {
		m, err := s.db.Model(ctx, modelID)
		if err != nil {
			return g, nil, nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "model", "Unknown GPU model %q.", modelID)
		}
		g.Model = *m
	}
	if regionID != "" {
		if _, err := s.db.Region(ctx, regionID); err != nil {
			return g, nil, nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "region", "Unknown region %q.", regionID)
		}
		g.Region = regionID
	}
	thisWeek := mondayOf(s.cfg.Clock.Now().In(loc))
	start := thisWeek
	if week != "" {
		d, err := time.ParseInLocation("2006-01-02", week, loc)
		if err != nil || d.Year() > 2200 {
			return g, nil, nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "week", "The week must be a date like 2026-12-01.")
		}
		start = mondayOf(d)
	}
	// A week that has passed cannot be booked: say so over this week's
	// calendar rather than refuse the page (an old link, a bookmark).
	if start.Before(thisWeek) {
		g.Notice = i18n.T(reqOf(c).lang, "The week of %s has passed; this is the current week.", start.Format("2006-01-02"))
		start = thisWeek
	}
	end := start.AddDate(0, 0, 7)
	slots, err := s.db.Availability(ctx, g.Model.ID, g.Region, start, end)
	if err != nil {
		return g, nil, nil, err
	}
	for d := 0; d < 7; d++ {
		g.Days = append(g.Days, start.AddDate(0, 0, d))
	}
	for i := range slots {
		local := slots[i].Start.In(loc)
		day := int(local.Sub(start).Hours()) / 24
		if day >= 0 && day < 7 {
			g.Cells[local.Hour()][day] = &slots[i]
		}
		g.Capacity = slots[i].Capacity
	}
	g.ThisWeek = start.Format("2006-01-02")
	g.PrevWeek = start.AddDate(0, 0, -7).Format("2006-01-02")
	g.NextWeek = end.Format("2006-01-02")
	g.HasPrev = start.After(thisWeek)
	return g, models, regions, nil
}

// mondayOf returns local midnight of the Monday of t's week.
func mondayOf(t time.Time) time.Time {
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
	return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
}

// quotePanel prices what the booking form asks for, or says what is missing.
func (s *Server) quotePanel(c echo.Context, get func(string) string, model, region string) templates.QuotePanel {
	lang := reqOf(c).lang
	f := readBookingForm(get, model, region)
	q := templates.QuotePanel{Model: model, Region: region, Count: 1, Start: f.Start, End: f.End, Typed: f.Typed}
	if f.Count != "" {
		q.Count = atoiOr(f.Count, 0)
	}
	switch {
	case q.Start == "":
		q.Hint = i18n.T(lang, "Click the first hour you want on the calendar.")
		return q
	case q.End == "":
		q.Hint = i18n.T(lang, "Now click the last hour you want.")
		return q
	}
	req, err := f.request(s.cfg.Location)
	if err == nil {
		var quote gpuportal.Quote
		if quote, err = s.db.Quote(c.Request().Context(), req); err == nil {
			q.Quote = &quote
			if images, err := s.launchImages(c); err == nil {
				q.Images = images
			}
			q.Resumable = s.resumable(c, req.Model, req.Region)
			s.fundsFor(c, &q, quote.Total)
			if policies, err := s.db.Policies(c.Request().Context()); err == nil {
				q.Terms = gpuportal.CancellationSchedule(policies.For(model).CancellationTiers, quote.Start, s.cfg.Clock.Now())
			}
			return q
		}
	}
	q.Error = i18n.Error(lang, err)
	q.ErrorCap = gpuportal.ErrorCode(err) == gpuportal.ECAPACITY
	if q.ErrorCap {
		s.fullWindow(c, &q, req)
	}
	return q
}

// fullWindow fills in what a full window's panel offers: the waitlist for
// exactly it, and the nearest windows of the same shape that fit.
func (s *Server) fullWindow(c echo.Context, q *templates.QuotePanel, req gpuportal.BookingRequest) {
	q.JoinStart, q.JoinEnd = req.Start.Format(time.RFC3339), req.End.Format(time.RFC3339)
	q.ReachBy = s.reachBy(c)
	if price, err := s.db.Price(c.Request().Context(), req); err == nil {
		q.WaitPrice = price.Total
	}
	if policies, err := s.db.Policies(c.Request().Context()); err == nil {
		q.ClaimMinutes = policies.For(req.Model).WaitlistClaimMinutes
	}
	if alts, err := s.db.AlternativesFor(c.Request().Context(), req); err == nil {
		q.Alternatives, q.MostFree = alts.Offerings, alts.MostFree
	}
}

// offeringsPanel runs the calendar's "Find a time" search when the values
// ask for one (duration_hours given), or shows the empty form with
// today's defaults.
func (s *Server) offeringsPanel(c echo.Context, get func(string) string, model, region string) templates.OfferingsPanel {
	now := s.cfg.Clock.Now().In(s.cfg.Location)
	f := readOfferingForm(get, model, region)
	// The GPU count the calendar's quote has is the search's too.
	p := templates.OfferingsPanel{Model: model, Region: region, Count: max(atoiOr(f.values["count"], 1), 1), Sort: gpuportal.OfferingsByPrice, ReachBy: s.reachBy(c),
		EarliestDate: now.Format("2006-01-02"), LatestDate: now.Add(gpuportal.DefaultOfferingRange - 24*time.Hour).Format("2006-01-02")}
	if policies, err := s.db.Policies(c.Request().Context()); err == nil {
		p.DurationHours = policies.For(model).MinDurationHours
	}
	if f.values["duration_hours"] == "" {
		return p
	}
	p.Searched = true
	p.Count, p.DurationHours = atoiOr(f.values["count"], p.Count), atoiOr(f.values["duration_hours"], p.DurationHours)
	for field, into := range map[string]*string{"earliest_date": &p.EarliestDate, "latest_date": &p.LatestDate, "sort": &p.Sort} {
		if v := f.values[field]; v != "" {
			*into = v
		}
	}
	req, err := parseOfferingValues(f.get, s.cfg.Location)
	if err == nil {
		p.Offerings, err = s.db.Offerings(c.Request().Context(), req)
	}
	if err != nil {
		p.Error = i18n.Error(reqOf(c).lang, err)
	}
	return p
}

// offeringForm is the calendar's "Find a time" form, read once: what the
// panel shows back and what the search is parsed from (the calendar's
// model and region, five offerings).
type offeringForm struct {
	values map[string]string
}

func readOfferingForm(get func(string) string, model, region string) offeringForm {
	f := offeringForm{values: map[string]string{"model": model, "region": region, "limit": "5"}}
	for _, field := range []string{"count", "duration_hours", "earliest", "earliest_date", "latest_end", "latest_date", "sort"} {
		f.values[field] = get(field)
	}
	return f
}

// get is the form's value of a field, for parseOfferingValues.
func (f offeringForm) get(field string) string { return f.values[field] }

func (s *Server) handleCalendarOfferings(c echo.Context) error {
	return s.render(c, http.StatusOK, templates.OfferingsView(s.offeringsPanel(c, c.QueryParam, c.QueryParam("model"), c.QueryParam("region"))))
}

// fundsFor tells a signed-in user how much of a price they have, and how
// much more a booking needs.
func (s *Server) fundsFor(c echo.Context, q *templates.QuotePanel, price gpuportal.Fen) {
	u := currentUser(c)
	if u == nil {
		return
	}
	if b, err := s.db.Balance(c.Request().Context(), u); err == nil {
		q.Available = b.Available
		q.Missing = gpuportal.TopUpNeeded(price, b.Available)
	}
}

func atoiOr(s string, fallback int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fallback
	}
	return n
}

func (s *Server) handleCalendar(c echo.Context) error {
	g, models, regions, err := s.calendarGrid(c, c.QueryParam("model"), c.QueryParam("region"), c.QueryParam("week"))
	if err != nil {
		return err
	}
	q := s.quotePanel(c, c.QueryParam, g.Model.ID, g.Region)
	g.Selection = [2]string{q.Start, q.End}
	find := s.offeringsPanel(c, c.QueryParam, g.Model.ID, g.Region)
	return s.render(c, http.StatusOK, templates.Calendar(templates.CalendarPage{Models: models, Regions: regions, Grid: g, Quote: q, Find: find}))
}

func (s *Server) handleCalendarGrid(c echo.Context) error {
	g, _, _, err := s.calendarGrid(c, c.QueryParam("model"), c.QueryParam("region"), c.QueryParam("week"))
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.CalendarGridView(g))
}

func (s *Server) handleCalendarQuote(c echo.Context) error {
	q := s.quotePanel(c, c.QueryParam, c.QueryParam("model"), c.QueryParam("region"))
	return s.render(c, http.StatusOK, templates.QuoteFormView(q))
}

// handleBookForm books from the calendar's quote panel; a refusal shows the
// calendar again with the reason where the quote was.
func (s *Server) handleBookForm(c echo.Context) error {
	f := readBookingForm(c.FormValue, c.FormValue("model"), c.FormValue("region"))
	req, err := f.request(s.cfg.Location)
	req.Launch = launchSpecValues(c.FormValue)
	if err == nil {
		var r *gpuportal.Reservation
		if r, err = s.db.Book(c.Request().Context(), currentUser(c), req); err == nil {
			lang := reqOf(c).lang
			s.addFlash(c, "success", i18n.T(lang, "Booked: reservation #%d, %d GPUs from %s, %s.", r.ID, r.Count, r.Start.In(s.cfg.Location).Format("2006-01-02 15:04"), r.Price.String()))
			return redirect(c, resPath(r.ID))
		}
	}
	code := gpuportal.ErrorCode(err)
	if code == gpuportal.EINTERNAL {
		return err
	}
	week := ""
	if !req.Start.IsZero() {
		week = req.Start.In(s.cfg.Location).Format("2006-01-02")
	}
	g, models, regions, gerr := s.calendarGrid(c, f.Model, f.Region, week)
	if gerr != nil {
		return err
	}
	q := templates.QuotePanel{Model: g.Model.ID, Region: g.Region, Count: req.Count, Error: i18n.Error(reqOf(c).lang, err), ErrorCap: code == gpuportal.ECAPACITY}
	if code == gpuportal.EFUNDS {
		if quote, qerr := s.db.Quote(c.Request().Context(), req); qerr == nil {
			s.fundsFor(c, &q, quote.Total)
		}
	}
	find := s.offeringsPanel(c, c.FormValue, g.Model.ID, g.Region)
	if find.Searched {
		// Booked from "Find a time": the refusal shows there, with the
		// search run again (the next offerings when this one was taken).
		if code == gpuportal.ECAPACITY {
			find.Taken = i18n.T(reqOf(c).lang, "Someone booked that window a moment ago. These are the windows that fit now.")
		} else {
			find.Taken = q.Error
		}
		q = templates.QuotePanel{Model: g.Model.ID, Region: g.Region, Count: req.Count, Hint: i18n.T(reqOf(c).lang, "Click the first hour you want on the calendar.")}
		return s.render(c, statusOf[code], templates.Calendar(templates.CalendarPage{Models: models, Regions: regions, Grid: g, Quote: q, Find: find}))
	}
	if q.ErrorCap {
		s.fullWindow(c, &q, req)
	}
	if !req.Start.IsZero() && !req.End.IsZero() {
		q.Start = req.Start.In(s.cfg.Location).Format("2006-01-02T15:04")
		q.End = req.End.In(s.cfg.Location).Format("2006-01-02T15:04")
	}
	return s.render(c, statusOf[code], templates.Calendar(templates.CalendarPage{Models: models, Regions: regions, Grid: g, Quote: q, Find: find}))
}

func resPath(id int64) string { return "/reservations/" + strconv.FormatInt(id, 10) }

func (s *Server) reservationRows(c echo.Context, list []gpuportal.Reservation) ([]templates.ReservationRow, error) {
	models, err := s.db.Models(c.Request().Context())
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, m := range models {
		names[m.ID] = m.Name
	}
	owners := map[int64]string{}
	rows := make([]templates.ReservationRow, 0, len(list))
	for _, r := range list {
		row := templates.ReservationRow{R: r, ModelName: names[r.Model]}
		if currentUser(c).IsAdmin() {
			if _, ok := owners[r.UserID]; !ok {
				if u, err := s.db.UserByID(c.Request().Context(), r.UserID); err == nil {
					owners[r.UserID] = u.Email
				}
			}
			row.Owner = owners[r.UserID]
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (s *Server) handleReservationsPage(c echo.Context) error {
	tab, err := tabParam(c, store.TabUpcoming, store.TabPast)
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
	page := pageParam(c)
	list, err := s.db.Reservations(c.Request().Context(), currentUser(c), store.ReservationFilter{Tab: tab, Limit: listPageSize + 1, Offset: (page - 1) * listPageSize,
		UserID: ownerID(owner), Labels: labels})
	if err != nil {
		return err
	}
	more := len(list) > listPageSize
	list = list[:min(len(list), listPageSize)]
	rows, err := s.reservationRows(c, list)
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	p := templates.ReservationsPage{Rows: rows, Past: tab == store.TabPast, AllUsers: currentUser(c).IsAdmin(), Pager: pagerFor(c, page, more), Owner: owner, Labels: labels,
		Tabs: []templates.Tab{
			{Label: i18n.T(lang, "Upcoming and active"), URL: withLabels(withOwner("/reservations", owner), labels), Current: tab == store.TabUpcoming},
			{Label: i18n.T(lang, "Past and cancelled"), URL: withLabels(withOwner("/reservations?tab=past", owner), labels), Current: tab == store.TabPast},
		}}
	return s.render(c, http.StatusOK, templates.Reservations(p))
}

func (s *Server) handleReservationPage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.db.Reservation(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	rows, err := s.reservationRows(c, []gpuportal.Reservation{*r})
	if err != nil {
		return err
	}
	d := templates.ReservationDetail{Row: rows[0], SSHHost: s.cfg.SSH.Host, SSHPort: s.cfg.SSH.Port}
	if images, err := s.launchImages(c); err == nil {
		d.Images = images
	}
	if u := currentUser(c); r.UserID == u.ID && r.Status == gpuportal.ReservationActive {
		if d.Volumes, err = s.volumesIn(c, r.Region); err != nil {
			return err
		}
		// What runs on it now, to connect to.
		list, err := s.db.Instances(c.Request().Context(), u, 0)
		if err != nil {
			return err
		}
		for _, i := range list {
			if i.ReservationID != nil && *i.ReservationID == r.ID && gpuportal.AcceptsSessions(i.Status) {
				d.Running = append(d.Running, i)
			}
		}
	}
	if u := currentUser(c); r.UserID == u.ID && gpuportal.CanExtend(r, s.cfg.Clock.Now()) == nil {
		if _, ext, err := s.db.Extension(c.Request().Context(), u, id); err == nil {
			d.Extend = &templates.ExtendPanel{R: *r, Extension: ext}
			if b, err := s.db.Balance(c.Request().Context(), u); err == nil {
				d.Extend.Available = b.Available
			}
		}
	}
	if _, p, err := s.db.PreviewCancellation(c.Request().Context(), currentUser(c), id); err == nil {
		d.Cancel = &templates.CancelPanel{R: *r, Fee: p.Fee, Refund: p.Refund, FeePercent: p.FeePercent, Late: p.Late}
	}
	return s.render(c, http.StatusOK, templates.ReservationPage(d))
}

// handleCancelPage shows the fee before the user confirms: a fragment for
// htmx (inline in the list), a page otherwise.
func (s *Server) handleCancelPage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, p, err := s.db.PreviewCancellation(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	panel := templates.CancelPanel{R: *r, Fee: p.Fee, Refund: p.Refund, FeePercent: p.FeePercent, Late: p.Late}
	if isHTMX(c) {
		return s.render(c, http.StatusOK, templates.CancelConfirm(panel))
	}
	return s.render(c, http.StatusOK, templates.CancelPage(panel))
}

// handleLaunchOnReservationForm is the reservation page's "Launch on this
// reservation": the command (or a machine to log into) on all its GPUs.
func (s *Server) handleLaunchOnReservationForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	spec := launchSpecValues(c.FormValue)
	if spec == nil {
		spec = &gpuportal.LaunchSpec{}
	}
	_, spec.Volumes = volumeIDs(formValues(c, "volume"))
	lang := reqOf(c).lang
	list, err := s.db.LaunchOnReservation(c.Request().Context(), currentUser(c), id, *spec)
	if code := gpuportal.ErrorCode(err); code == gpuportal.ECONFLICT || code == gpuportal.EINVALID || code == gpuportal.EFUNDS {
		s.addFlash(c, "error", i18n.Error(lang, err))
		return redirect(c, resPath(id))
	} else if err != nil {
		return err
	}
	gpus := 0
	for _, i := range list {
		gpus += i.Count
	}
	s.addFlash(c, "success", i18n.T(lang, "Launched on reservation #%d: %d instances on its %d free GPUs.", id, len(list), gpus))
	return redirect(c, "/instances")
}

// handleExtendForm extends a reservation from its page's "Extend".
func (s *Server) handleExtendForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	hours, err := wholeNumber(c.FormValue, "hours", true)
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	r, err := s.db.Extend(c.Request().Context(), currentUser(c), id, hours)
	if code := gpuportal.ErrorCode(err); code == gpuportal.ECAPACITY || code == gpuportal.EFUNDS || code == gpuportal.EPOLICY {
		s.addFlash(c, "error", i18n.Error(lang, err))
		return redirect(c, resPath(id)+"#extend")
	} else if err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(lang, "Reservation #%d is extended by %d hours, until %s; its price is now %s.", r.ID, hours, r.End.In(s.cfg.Location).Format("2006-01-02 15:04"), r.Price.String()))
	return redirect(c, resPath(r.ID))
}

func (s *Server) handleCancelForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	r, err := s.db.Cancel(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Reservation #%d is cancelled: paid %s, fee %s, refund %s.", r.ID, r.Price.String(), r.Fee.String(), r.Refund.String()))
	return redirect(c, "/reservations?tab=past") // where it is listed now
}

// hourValue is the form's start or end as "2006-01-02T15:04" (site time):
// from its date and 24-hour clock fields when they are given, else the
// value itself (calendar clicks, links, scripts).
func hourValue(get func(string) string, name string) string {
	date, hour := get(name+"_date"), get(name+"_hour")
	if date == "" && hour == "" {
		return get(name)
	}
	h, err := strconv.Atoi(hour)
	if date == "" || err != nil || h < 0 || h > 23 {
		return "" // not picked yet: the panel asks for it
	}
	return fmt.Sprintf("%sT%02d:00", date, h)
}

// resumable are the signed-in user's stopped instances with kept disks of
// model and region, which a booking may resume at its start.
func (s *Server) resumable(c echo.Context, model, region string) []gpuportal.Instance {
	u := currentUser(c)
	if u == nil {
		return nil
	}
	list, err := s.db.Instances(c.Request().Context(), u, 0)
	if err != nil {
		return nil
	}
	var out []gpuportal.Instance
	for _, i := range list {
		if i.UserID == u.ID && i.Model == model && i.Region == region && gpuportal.CanStart(&i) == nil {
			out = append(out, i)
		}
	}
	return out
}
