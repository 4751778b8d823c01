package web

import (
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// statusOf maps error codes to HTTP statuses: the one table (DESIGN §6).
var statusOf = map[string]int{
	gpuportal.EINVALID:      http.StatusBadRequest,
	gpuportal.EUNAUTHORIZED: http.StatusUnauthorized,
	gpuportal.EFORBIDDEN:    http.StatusForbidden,
	gpuportal.ENOTFOUND:     http.StatusNotFound,
	gpuportal.ECONFLICT:     http.StatusConflict,
	gpuportal.ECAPACITY:     http.StatusConflict,
	gpuportal.EGONE:         http.StatusGone,
	gpuportal.EPOLICY:       http.StatusUnprocessableEntity,
	gpuportal.EFUNDS:        http.StatusPaymentRequired,
	gpuportal.ERATELIMITED:  http.StatusTooManyRequests,
	gpuportal.EUNAVAILABLE:  http.StatusServiceUnavailable,
	gpuportal.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	gpuportal.EINTERNAL:     http.StatusInternalServerError,
}

// codeOfStatus maps echo's own errors (404 route, 405, 413) back to codes.
var codeOfStatus = map[int]string{
	http.StatusBadRequest:            gpuportal.EINVALID,
	http.StatusUnauthorized:          gpuportal.EUNAUTHORIZED,
	http.StatusForbidden:             gpuportal.EFORBIDDEN,
	http.StatusNotFound:              gpuportal.ENOTFOUND,
	http.StatusMethodNotAllowed:      gpuportal.ENOTFOUND,
	http.StatusRequestEntityTooLarge: gpuportal.EINVALID,
	http.StatusUnsupportedMediaType:  gpuportal.EINVALID,
	http.StatusTooManyRequests:       gpuportal.ERATELIMITED,
	http.StatusServiceUnavailable:    gpuportal.EUNAVAILABLE,
}

type errorBody struct {
	Error errorDetail `json:"error"`
	// Offerings and MostFree come with a booking refused because its
	// window is full: what could be booked instead.
	Offerings []gpuportal.Offering `json:"offerings,omitempty"`
	MostFree  *int                 `json:"most_free,omitempty"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Fields lists every problem when there are several (a policies
	// document); the first is also in Field and Message.
	Fields []fieldError `json:"fields,omitempty"`
}

type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// handleError is echo's one error handler: the JSON envelope under /api/,
// an error page (or an htmx fragment) otherwise. Only internal errors are
// logged; their details never reach the user.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code, ok := codeOfStatus[he.Code]
		if !ok {
			code = gpuportal.EINTERNAL
		}
		msg := http.StatusText(he.Code)
		if he.Code == http.StatusNotFound || he.Code == http.StatusMethodNotAllowed {
			msg = "Not found."
		} else if he.Code == http.StatusRequestEntityTooLarge {
			msg = "The request body is too large."
		}
		err = &gpuportal.Error{Code: code, Message: msg, Format: msg}
	}
	code := gpuportal.ErrorCode(err)
	status := statusOf[code]
	if code == gpuportal.EINTERNAL {
		s.log.Error("internal error", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	lang := reqOf(c).lang
	if isAPI(c) {
		detail := errorDetail{Code: code, Message: gpuportal.ErrorMessage(err), Field: gpuportal.ErrorField(err)}
		var all gpuportal.ValidationErrors
		if errors.As(err, &all) {
			for _, e := range all {
				detail.Fields = append(detail.Fields, fieldError{Field: e.Field, Message: e.Message})
			}
		}
		body := errorBody{Error: detail}
		if alts, ok := alternativesOf(err); ok {
			body.Offerings, body.MostFree = alts.Offerings, &alts.MostFree
		}
		_ = c.JSON(status, body)
		return
	}
	title := titleOf(lang, code)
	_ = s.render(c, status, templates.ErrorPage(status, title, i18n.Error(lang, err)))
}

func titleOf(lang, code string) string {
	switch code {
	case gpuportal.ENOTFOUND:
		return i18n.T(lang, "Page not found")
	case gpuportal.EFORBIDDEN:
		return i18n.T(lang, "Not allowed")
	case gpuportal.EUNAUTHORIZED:
		return i18n.T(lang, "Please log in")
	case gpuportal.ERATELIMITED:
		return i18n.T(lang, "Too many attempts")
	case gpuportal.EINTERNAL:
		return i18n.T(lang, "Something went wrong")
	}
	return i18n.T(lang, "That did not work")
}

// formError puts a store error where a form shows it, translated: on its
// field when the form has that field (fields; none listed: any field), or
// at the top. It returns the status to answer with, or the error itself
// when it is an internal one, for the error page.
func formError(c echo.Context, err error, fieldErrs *templates.FieldErrors, topErr *string, fields ...string) (int, error) {
	code := gpuportal.ErrorCode(err)
	if code == gpuportal.EINTERNAL {
		return 0, err
	}
	msg := i18n.Error(reqOf(c).lang, err)
	if f := gpuportal.ErrorField(err); f != "" && (len(fields) == 0 || slices.Contains(fields, f)) {
		*fieldErrs = templates.FieldErrors{f: msg}
	} else {
		*topErr = msg
	}
	return statusOf[code], nil
}
