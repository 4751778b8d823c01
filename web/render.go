package web

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/web/templates"
)

// maxJSONBody bounds request bodies; nothing the API accepts is larger.
const maxJSONBody = 1 << 20

// render writes a templ component as the response, with the request's View
// (user, language, CSRF token, flashes) in its context.
func (s *Server) render(c echo.Context, status int, page templ.Component) error {
	r := reqOf(c)
	v := &templates.View{
		User:      r.user,
		Lang:      r.lang,
		CSRF:      csrfToken(c),
		Path:      c.Request().URL.Path,
		Location:  s.cfg.Location,
		TestClock: s.cfg.TestClock != nil,
		Now:       s.cfg.Clock.Now(),
	}
	if status < 300 || status >= 400 {
		v.Flashes = s.takeFlashes(c)
	}
	if r.user != nil && c.Request().Header.Get("HX-Request") == "" {
		if b, err := s.db.Balance(c.Request().Context(), r.user); err == nil {
			v.Available = &b.Available
		}
		if n, err := s.db.UnreadCount(c.Request().Context(), r.user.ID); err == nil {
			v.Unread = n
		}
	}
	if models, err := s.db.Models(c.Request().Context()); err == nil {
		v.ModelNames = make(map[string]string, len(models))
		for _, m := range models {
			v.ModelNames[m.ID] = m.Name
		}
	}
	ctx := templates.WithView(c.Request().Context(), v)
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().WriteHeader(status)
	return page.Render(ctx, c.Response())
}

// bindJSON decodes a JSON request body strictly: unknown fields, wrong
// types, trailing data and oversized bodies are invalid_input, never a 500.
func bindJSON(c echo.Context, dst any) error {
	return decodeStrict(http.MaxBytesReader(c.Response(), c.Request().Body, maxJSONBody), dst)
}

// decodeStrict decodes exactly one JSON value with no unknown fields.
func decodeStrict(r io.Reader, dst any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body must be a single JSON object.")
	}
	return nil
}

func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var maxErr *http.MaxBytesError
	switch {
	case err == io.EOF:
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body is empty; send a JSON object.")
	case asErr(err, &typeErr) && typeErr.Field == "":
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body must be a JSON object, not %s.", typeErr.Value)
	case asErr(err, &typeErr):
		return wrongType(typeErr.Field, typeErr.Type)
	case asErr(err, &syntaxErr):
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body is not valid JSON (at byte %d).", syntaxErr.Offset)
	case asErr(err, &maxErr):
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body is too large.")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return gpuportal.FieldErrorf(gpuportal.EINVALID, field, "Unknown field %q.", field)
	}
	return gpuportal.Errorf(gpuportal.EINVALID, "The request body is not valid JSON.")
}

// wrongType says what a field must be in JSON's words (never the Go
// type's name: that is the portal's business).
func wrongType(field string, t reflect.Type) error {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	format := "The field %q must be an object."
	switch t.Kind() {
	case reflect.String:
		format = "The field %q must be a string."
	case reflect.Bool:
		format = "The field %q must be true or false."
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		format = "The field %q must be a whole number."
	case reflect.Float32, reflect.Float64:
		format = "The field %q must be a number."
	case reflect.Slice, reflect.Array:
		format = "The field %q must be a list."
	}
	if t == reflect.TypeFor[time.Time]() {
		format = "The field %q must be an RFC 3339 time."
	}
	return gpuportal.FieldErrorf(gpuportal.EINVALID, field, format, field)
}

// redirect sends the browser to path with 303 (so a POST becomes a GET).
func redirect(c echo.Context, path string) error {
	return c.Redirect(http.StatusSeeOther, path)
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
