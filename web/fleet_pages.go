package web

// The admins' fleet pages: nodes and their GPUs, drain, node tokens.

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// fleetPage is a page of the fleet (templates.FleetPageSize nodes) with
// what each GPU does, filtered by ?show= (a GPU state,
// gpuportal.FleetGPUStates; "" all) and ?region=, the counts of all of it
// above.
func (s *Server) fleetPage(c echo.Context) (templates.FleetPage, error) {
	show, region := c.QueryParam("show"), c.QueryParam("region")
	if show != "" && !slices.Contains(gpuportal.FleetGPUStates, show) {
		return templates.FleetPage{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "show", "Show in_use, idle, unhealthy, draining or offline GPUs, or all of them.")
	}
	all, err := s.db.FleetGlance(c.Request().Context())
	if err != nil {
		return templates.FleetPage{}, err
	}
	uses, err := s.db.GPUUses(c.Request().Context())
	if err != nil {
		return templates.FleetPage{}, err
	}
	p := templates.FleetPage{Uses: uses, Show: show, Region: region}
	var inRegion, shown []gpuportal.Node
	for _, n := range all {
		if !slices.Contains(p.Regions, n.Region) {
			p.Regions = append(p.Regions, n.Region)
		}
		if region != "" && n.Region != region {
			continue
		}
		inRegion = append(inRegion, n)
		if templates.NodeShown(show, n, uses) {
			shown = append(shown, n)
		}
	}
	if region != "" && !slices.Contains(p.Regions, region) {
		return templates.FleetPage{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "region", "No node is in region %q.", region)
	}
	p.Counts, p.States = templates.CountFleet(inRegion), templates.GPUStates(inRegion, uses)
	page := pageParam(c)
	from := min((page-1)*templates.FleetPageSize, len(shown))
	// The page's nodes in full (their telemetry), the rest as counted.
	var ids []string
	for _, n := range shown[from:min(from+templates.FleetPageSize, len(shown))] {
		ids = append(ids, n.ID)
	}
	if p.Nodes, err = s.db.NodesByID(c.Request().Context(), ids); err != nil {
		return templates.FleetPage{}, err
	}
	p.Pager = pagerForPath(c, "/admin/nodes", page, from+templates.FleetPageSize < len(shown))
	q := url.Values{}
	for k, v := range map[string]string{"show": show, "region": region} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	p.Query = q.Encode()
	return p, nil
}

func (s *Server) handleFleetPage(c echo.Context) error {
	p, err := s.fleetPage(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Fleet(p))
}

// handleFleetTable is the fleet page's live part (its page, every 5 s):
// a poll that finds it unchanged is answered 304, with no body.
func (s *Server) handleFleetTable(c echo.Context) error {
	p, err := s.fleetPage(c)
	if err != nil {
		return err
	}
	return s.renderRevalidated(c, templates.FleetTable(p))
}

// handleFleetNodePage is one node, all of it: /admin/nodes/{id}.
func (s *Server) handleFleetNodePage(c echo.Context) error {
	nodes, err := s.db.NodesByID(c.Request().Context(), []string{c.Param("id")})
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "No node %q.", c.Param("id"))
	}
	uses, err := s.db.GPUUses(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.FleetNode(templates.FleetNodePage{Node: nodes[0], Uses: uses}))
}

func (s *Server) handleDrainForm(c echo.Context) error {
	drain := c.FormValue("drain") != "false"
	if err := s.db.SetDrain(c.Request().Context(), currentUser(c), c.Param("id"), drain); err != nil {
		return err
	}
	return redirect(c, "/admin/nodes/"+url.PathEscape(c.Param("id")))
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
	return redirect(c, "/admin/nodes/"+url.PathEscape(c.Param("id")))
}

func (s *Server) handleRevokeNodeTokenForm(c echo.Context) error {
	if err := s.db.RevokeNodeToken(c.Request().Context(), currentUser(c), c.Param("id")); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The token of node %s is revoked; enrol the node again to bring it back.", c.Param("id")))
	return redirect(c, "/admin/nodes")
}
