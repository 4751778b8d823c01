package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal"
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
	var p gpuportal.Policies
	if err := bindJSON(c, &p); err != nil {
		return err
	}
	if err := s.db.SetPolicies(c.Request().Context(), currentUser(c), p); err != nil {
		return err
	}
	return s.apiGetPolicies(c)
}
