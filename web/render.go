package web

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/web/templates"
)

// render writes a templ component as the response, with the request's View
// (user, language, CSRF token, flashes) in its context.
func (s *Server) render(c echo.Context, status int, page templ.Component) error {
	r := reqOf(c)
	v := &templates.View{
		User:      r.user,
		Lang:      r.lang,
		CSRF:      csrfToken(c),
		Path:      c.Request().URL.Path,
		Here:      here(c),
		Location:  s.cfg.Location,
		TestClock: s.cfg.TestClock != nil,
		Now:       s.cfg.Clock.Now(),
	}
	if status < 300 || status >= 400 {
		v.Flashes = s.takeFlashes(c)
	}
	if r.user != nil {
		v.Person = person(c)
		if r.team != nil {
			v.Team = r.team.Acting
		}
	}
	if r.user != nil && c.Request().Header.Get("HX-Request") == "" {
		ctx := c.Request().Context()
		// The balance in the header is the one launches draw on: the
		// team's while acting for it (for the roles that see it).
		account := v.Person
		if r.team != nil {
			account = nil
			if gpuportal.TeamMay(r.team.Acting.Role, gpuportal.AreaMoney, false) {
				account = r.team
			}
		}
		if account != nil {
			if b, err := s.db.Balance(ctx, account); err == nil {
				v.Available = &b.Available
			}
		}
		if n, err := s.db.UnreadCount(ctx, v.Person.ID); err == nil {
			v.Unread = n
		}
		v.Offer = s.navOffer(c, r.user)
		if teams, err := s.db.TeamsOf(ctx, v.Person); err == nil {
			v.Teams = teams
		}
	}
	if models, err := s.db.Models(c.Request().Context()); err == nil {
		v.ModelNames = make(map[string]string, len(models))
		for _, m := range models {
			v.ModelNames[m.ID] = m.Name
		}
	}
	if regions, err := s.db.Regions(c.Request().Context()); err == nil {
		v.RegionNames = make(map[string]string, len(regions))
		for _, r := range regions {
			v.RegionNames[r.ID] = r.Name
		}
	}
	ctx := templates.WithView(c.Request().Context(), v)
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().WriteHeader(status)
	return page.Render(ctx, c.Response())
}

// navOffer is the user's first held waitlist offer with what claiming it
// costs now (nil when none is held, or it cannot be priced).
func (s *Server) navOffer(c echo.Context, u *gpuportal.User) *templates.NavOffer {
	offers, err := s.db.HeldOffers(c.Request().Context(), u.ID, s.cfg.Clock.Now())
	if err != nil || len(offers) == 0 || offers[0].OfferExpiresAt == nil {
		return nil
	}
	w := offers[0]
	q, err := s.db.Price(c.Request().Context(), gpuportal.BookingRequest{Model: w.Model, Region: w.Region, Count: w.Count, Start: w.Start, End: w.End})
	if err != nil {
		return nil
	}
	return &templates.NavOffer{Expires: *w.OfferExpiresAt, Price: q.Total}
}

// redirect sends the browser to path with 303 (so a POST becomes a GET).
func redirect(c echo.Context, path string) error {
	return c.Redirect(http.StatusSeeOther, path)
}

// here is the address to come back to on this page (switching language
// keeps the week, the quote, the filter): a GET's whole address, or the
// path of a page a form's answer showed.
func here(c echo.Context) string {
	if c.Request().Method == http.MethodGet {
		return c.Request().URL.RequestURI()
	}
	return c.Request().URL.Path
}

// safeNext returns next if it is a path on this site, else fallback, so
// that a ?next= parameter cannot send users to another site. Browsers drop
// tabs and newlines from URLs and read a backslash as a slash, so
// "/%09/evil.example" or "/\\evil.example" would leave the site: any control
// character, white space or backslash refuses next outright.
func safeNext(next, fallback string) string {
	if next == "" || len(next) > 2048 || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return fallback
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f || r == '\\' || unicode.IsSpace(r) {
			return fallback
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return fallback
	}
	return next
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func asErr[T any](err error, target *T) bool { return errors.As(err, target) }

// renderRevalidated renders a live part that a browser polls with an ETag
// of what it says: the browser asks again with If-None-Match, and a poll
// that finds the part unchanged is answered 304 with no body (the
// browser's cache hands htmx the same part). Only what changed travels.
func (s *Server) renderRevalidated(c echo.Context, page templ.Component) error {
	res := c.Response()
	real := res.Writer
	rec := &recorder{header: real.Header()} // the same headers: the session's cookie lands there
	res.Writer = rec
	err := s.render(c, http.StatusOK, page)
	// What render wrote is held; the answer goes out now.
	res.Writer, res.Committed, res.Size = real, false, 0
	if err != nil {
		return err
	}
	sum := sha256.Sum256(rec.body.Bytes())
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	res.Header().Set("ETag", etag)
	res.Header().Set("Cache-Control", "private, no-cache")
	if c.Request().Header.Get("If-None-Match") == etag {
		return c.NoContent(http.StatusNotModified)
	}
	return c.HTMLBlob(http.StatusOK, rec.body.Bytes())
}
