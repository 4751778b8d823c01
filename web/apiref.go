package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal/web/openapi"
	"gpuportal/web/templates"
)

// apiOpenAPI serves the API's OpenAPI 3.1 description.
func (s *Server) apiOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapi.Document)
}

// handleAPIReference is the reference page: every operation of the
// OpenAPI document, by subject.
func (s *Server) handleAPIReference(c echo.Context) error {
	ops, err := openapi.Operations()
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.APIReferencePage(templates.APIReference{Operations: ops}))
}
