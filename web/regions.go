package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// Regions' workload variables (admins): PUT /admin/regions/{id} and the
// /admin/regions page.

func (s *Server) apiSetRegion(c echo.Context) error {
	var in struct {
		WorkloadEnv *map[string]string `json:"workload_env"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.WorkloadEnv == nil {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "workload_env", "Give the region's workload_env: an object of variables ({} for none).")
	}
	r, err := s.db.SetRegionWorkloadEnv(c.Request().Context(), currentUser(c), c.Param("id"), *in.WorkloadEnv)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) handleRegionsPage(c echo.Context) error {
	return s.renderRegions(c, http.StatusOK, templates.RegionsPage{})
}

func (s *Server) renderRegions(c echo.Context, status int, p templates.RegionsPage) error {
	regions, err := s.db.Regions(c.Request().Context())
	if err != nil {
		return err
	}
	p.Regions = regions
	return s.render(c, status, templates.Regions(p))
}

// handleRegionEnvForm reads KEY=value lines (blank lines skipped).
func (s *Server) handleRegionEnvForm(c echo.Context) error {
	id, typed := c.Param("id"), c.FormValue("env")
	env, err := parseEnvLines(typed)
	if err == nil {
		_, err = s.db.SetRegionWorkloadEnv(c.Request().Context(), currentUser(c), id, env)
	}
	lang := reqOf(c).lang
	if err != nil {
		code := gpuportal.ErrorCode(err)
		if code != gpuportal.EINVALID {
			return err
		}
		return s.renderRegions(c, statusOf[code], templates.RegionsPage{Errors: map[string]string{id: i18n.Error(lang, err)}, Typed: map[string]string{id: typed}})
	}
	s.addFlash(c, "success", i18n.T(lang, "Region %s saved: instances started from now on get its variables.", id))
	return redirect(c, "/admin/regions")
}

// parseEnvLines reads the form's KEY=value lines.
func parseEnvLines(text string) (map[string]string, error) {
	env := map[string]string{}
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "workload_env", "Write one KEY=value a line (%q has no =).", line)
		}
		env[strings.TrimSpace(name)] = strings.TrimSpace(value)
	}
	return env, nil
}
