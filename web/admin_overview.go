package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal/web/templates"
)

func (s *Server) handleAdmin(c echo.Context) error {
	return s.renderAdmin(c, http.StatusOK, nil, nil)
}

func (s *Server) renderAdmin(c echo.Context, status int, errs templates.FieldErrors, reset *templates.IssuedReset) error {
	models, err := s.db.Models(c.Request().Context())
	if err != nil {
		return err
	}
	o, err := s.db.Overview(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, status, templates.Admin(templates.AdminPage{Models: models, Errors: errs, Overview: o, Reset: reset}))
}
