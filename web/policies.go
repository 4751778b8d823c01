package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/web/templates"
)

func (s *Server) apiGetPolicies(c echo.Context) error {
	p, err := s.db.Policies(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// apiPutPolicies replaces the policies document; every problem is reported
// (error.fields), and nothing is saved unless all is well.
func (s *Server) apiPutPolicies(c echo.Context) error {
	p := gpuportal.PoliciesToDecode()
	if err := bindJSON(c, &p); err != nil {
		return err
	}
	if err := s.db.SetPolicies(c.Request().Context(), currentUser(c), p); err != nil {
		return err
	}
	return s.apiGetPolicies(c)
}

func auditFilter(c echo.Context) store.AuditFilter {
	return store.AuditFilter{Action: c.QueryParam("action"), Actor: c.QueryParam("actor"), Subject: c.QueryParam("subject")}
}

func (s *Server) apiAudit(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	f := auditFilter(c)
	f.Limit, f.Offset, f.Total = p.Limit, p.Offset, p.Total
	list, err := s.db.Audit(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

func (s *Server) handleAuditPage(c echo.Context) error {
	f := auditFilter(c)
	page := pageParam(c)
	f.Limit, f.Offset = listPageSize+1, (page-1)*listPageSize
	list, err := s.db.Audit(c.Request().Context(), f)
	if err != nil {
		return err
	}
	more := len(list) > listPageSize
	list = list[:min(len(list), listPageSize)]
	// People are named by their email, not user/N.
	names := map[string]string{}
	for _, e := range list {
		kind, id, ok := strings.Cut(e.Subject, "/")
		n, err := strconv.ParseInt(id, 10, 64)
		if !ok || kind != "user" || err != nil || names[e.Subject] != "" {
			continue
		}
		if u, err := s.db.UserByID(c.Request().Context(), n); err == nil {
			names[e.Subject] = u.Email
		}
	}
	return s.render(c, http.StatusOK, templates.Audit(templates.AuditPage{Entries: list, Filter: f, Pager: pagerFor(c, page, more), SubjectNames: names}))
}
