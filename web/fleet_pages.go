package web

// The admins' fleet pages: nodes and their GPUs, drain, node tokens.

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal/i18n"
	"gpuportal/web/templates"
)

func (s *Server) handleFleetPage(c echo.Context) error {
	nodes, err := s.db.Nodes(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Fleet(templates.FleetPage{Nodes: nodes}))
}

func (s *Server) handleFleetTable(c echo.Context) error {
	nodes, err := s.db.Nodes(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.FleetTable(nodes))
}

func (s *Server) handleDrainForm(c echo.Context) error {
	drain := c.FormValue("drain") != "false"
	if err := s.db.SetDrain(c.Request().Context(), currentUser(c), c.Param("id"), drain); err != nil {
		return err
	}
	return redirect(c, "/admin/nodes")
}

func (s *Server) handleRotateTokenForm(c echo.Context) error {
	if err := s.db.RotateNodeToken(c.Request().Context(), currentUser(c), c.Param("id")); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Node %s will switch to a new token at its next heartbeat.", c.Param("id")))
	return redirect(c, "/admin/nodes")
}

func (s *Server) handleRevokeNodeTokenForm(c echo.Context) error {
	if err := s.db.RevokeNodeToken(c.Request().Context(), currentUser(c), c.Param("id")); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The token of node %s is revoked; enrol the node again to bring it back.", c.Param("id")))
	return redirect(c, "/admin/nodes")
}
