package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// Maintenance windows (admins): POST/GET /admin/maintenance, DELETE
// /admin/maintenance/{id}, and the /admin/maintenance page.

func (s *Server) apiCreateMaintenance(c echo.Context) error {
	var in struct {
		NodeID string `json:"node_id"`
		Region string `json:"region"`
		Start  string `json:"start"`
		End    string `json:"end"`
		Reason string `json:"reason"`
		DryRun bool   `json:"dry_run"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	req, err := maintenanceRequest(in.NodeID, in.Region, in.Start, in.End, in.Reason, in.DryRun, s)
	if err != nil {
		return err
	}
	m, err := s.db.CreateMaintenance(c.Request().Context(), currentUser(c), req)
	if err != nil {
		return err
	}
	if req.DryRun {
		return c.JSON(http.StatusOK, m)
	}
	return c.JSON(http.StatusCreated, m)
}

func maintenanceRequest(node, region, start, end, reason string, dryRun bool, s *Server) (gpuportal.MaintenanceRequest, error) {
	req := gpuportal.MaintenanceRequest{NodeID: strings.TrimSpace(node), Region: strings.TrimSpace(region), Reason: reason, DryRun: dryRun}
	var err error
	if req.Start, err = parseTime("start", start, s.cfg.Location); err != nil {
		return req, err
	}
	if req.End, err = parseTime("end", end, s.cfg.Location); err != nil {
		return req, err
	}
	return req, nil
}

func (s *Server) apiMaintenance(c echo.Context) error {
	list, err := s.db.Maintenances(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiEndMaintenance(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.EndMaintenance(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) handleMaintenancePage(c echo.Context) error {
	return s.renderMaintenance(c, http.StatusOK, templates.MaintenancePage{})
}

func (s *Server) renderMaintenance(c echo.Context, status int, p templates.MaintenancePage) error {
	ctx := c.Request().Context()
	var err error
	if p.Windows, err = s.db.Maintenances(ctx); err != nil {
		return err
	}
	if p.Nodes, err = s.db.Nodes(ctx); err != nil {
		return err
	}
	if p.Regions, err = s.db.Regions(ctx); err != nil {
		return err
	}
	p.Now = s.cfg.Clock.Now()
	return s.render(c, status, templates.Maintenance(p))
}

// handleMaintenanceForm plans a window, or with "check" shows what it
// would cancel first.
func (s *Server) handleMaintenanceForm(c echo.Context) error {
	target := c.FormValue("target") // "node:ID" or "region:ID"
	kind, id, _ := strings.Cut(target, ":")
	node, region := "", ""
	if kind == "node" {
		node = id
	} else {
		region = id
	}
	dry := c.FormValue("check") != ""
	typed := templates.MaintenanceForm{Target: target, Start: c.FormValue("start"), End: c.FormValue("end"), Reason: c.FormValue("reason")}
	req, err := maintenanceRequest(node, region, typed.Start, typed.End, typed.Reason, dry, s)
	var m *gpuportal.Maintenance
	if err == nil {
		m, err = s.db.CreateMaintenance(c.Request().Context(), currentUser(c), req)
	}
	if err != nil {
		code := gpuportal.ErrorCode(err)
		if code == gpuportal.EINTERNAL {
			return err
		}
		return s.renderMaintenance(c, statusOf[code], templates.MaintenancePage{Form: typed,
			Errors: templates.FieldErrors{gpuportal.ErrorField(err): i18n.Error(reqOf(c).lang, err)}})
	}
	if dry {
		return s.renderMaintenance(c, http.StatusOK, templates.MaintenancePage{Form: typed, Check: m})
	}
	lang := reqOf(c).lang
	s.addFlash(c, "success", i18n.T(lang, "Maintenance #%d planned: %d GPUs out of service, %d reservations cancelled with a full refund; their owners are told.", m.ID, m.GPUs, len(m.Affected)))
	return redirect(c, "/admin/maintenance")
}

func (s *Server) handleEndMaintenanceForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.EndMaintenance(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "Maintenance #%d ended: its nodes are back in service and its hours bookable.", id))
	return redirect(c, "/admin/maintenance")
}
