package web

// The admins' fleet pages: nodes and their GPUs, drain, node tokens.

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// fleetPage is the fleet with what each GPU does, filtered by ?show= (a
// GPU state, gpuportal.FleetGPUStates; "" all).
func (s *Server) fleetPage(c echo.Context) (templates.FleetPage, error) {
	show := c.QueryParam("show")
	if show != "" && !slices.Contains(gpuportal.FleetGPUStates, show) {
		return templates.FleetPage{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "show", "Show in_use, idle, unhealthy, draining or offline GPUs, or all of them.")
	}
	nodes, err := s.db.Nodes(c.Request().Context())
	if err != nil {
		return templates.FleetPage{}, err
	}
	uses, err := s.db.GPUUses(c.Request().Context())
	if err != nil {
		return templates.FleetPage{}, err
	}
	return templates.FleetPage{Nodes: nodes, Uses: uses, Show: show}, nil
}

func (s *Server) handleFleetPage(c echo.Context) error {
	p, err := s.fleetPage(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Fleet(p))
}

func (s *Server) handleFleetTable(c echo.Context) error {
	p, err := s.fleetPage(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.FleetTable(p))
}

func (s *Server) handleDrainForm(c echo.Context) error {
	drain := c.FormValue("drain") != "false"
	if err := s.db.SetDrain(c.Request().Context(), currentUser(c), c.Param("id"), drain); err != nil {
		return err
	}
	return redirect(c, "/admin/nodes")
}

// handleReturnGPUForm puts a failed GPU back in service.
func (s *Server) handleReturnGPUForm(c echo.Context) error {
	if err := s.db.ReturnGPU(c.Request().Context(), currentUser(c), c.Param("uuid")); err != nil {
		if gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
			return err
		}
		s.addFlash(c, "error", i18n.Error(reqOf(c).lang, err))
		return redirect(c, "/admin/nodes")
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "GPU %s is back in service.", c.Param("uuid")))
	return redirect(c, "/admin/nodes")
}

// apiReturnGPU is POST /admin/gpus/{uuid}/return.
func (s *Server) apiReturnGPU(c echo.Context) error {
	if err := s.db.ReturnGPU(c.Request().Context(), currentUser(c), c.Param("uuid")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
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
