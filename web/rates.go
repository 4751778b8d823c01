package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/web/templates"
)

func (s *Server) rates(c echo.Context) (*gpuportal.InterruptionRates, error) {
	count := 1
	if v := c.QueryParam("count"); v != "" {
		var err error
		if count, err = strconv.Atoi(v); err != nil {
			return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "count", "The GPU count must be a whole number.")
		}
		if count < 1 { // the store reads 0 as "not said"; said, it is wrong
			return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "count", "An instance runs on 1 to %d GPUs of one node.", gpuportal.MaxGPUsPerInstance)
		}
	}
	model, region := c.QueryParam("model"), c.QueryParam("region")
	if !isAPI(c) {
		if model == "" {
			model = "a100-80g"
		}
		if region == "" {
			region = "cd-1"
		}
	}
	return s.cachedRates(c.Request().Context(), model, region, count)
}

func (s *Server) apiRates(c echo.Context) error {
	r, err := s.rates(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) handleRatesPage(c echo.Context) error {
	r, err := s.rates(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	models, err := s.db.Models(ctx)
	if err != nil {
		return err
	}
	regions, err := s.db.Regions(ctx)
	if err != nil {
		return err
	}
	p := templates.RatesPage{Models: models, Regions: regions, Rates: r}
	for _, v := range r.ByHour {
		p.Max = max(p.Max, v)
	}
	return s.render(c, http.StatusOK, templates.Rates(p))
}
