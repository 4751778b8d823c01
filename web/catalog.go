package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// modelJSON is a model as GET /api/v1/models shows it.
type modelJSON struct {
	gpuportal.Model
	SpotPrice           gpuportal.Fen `json:"spot_price_per_gpu_hour_fen"`
	SpotDiscountPercent int           `json:"spot_discount_percent"`
}

// modelsWithSpot lists the models with their spot prices under the
// current policies — the prices a spot launch is charged.
func (s *Server) modelsWithSpot(c echo.Context) ([]modelJSON, error) {
	models, err := s.db.Models(c.Request().Context())
	if err != nil {
		return nil, err
	}
	pol, err := s.db.Policies(c.Request().Context())
	if err != nil {
		return nil, err
	}
	out := make([]modelJSON, len(models))
	for i, m := range models {
		out[i] = modelJSON{Model: m, SpotPrice: pol.SpotPriceOf(m), SpotDiscountPercent: pol.For(m.ID).SpotDiscountPercent}
	}
	return out, nil
}

func (s *Server) apiModels(c echo.Context) error {
	models, err := s.modelsWithSpot(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, models)
}

func (s *Server) apiRegions(c echo.Context) error {
	regions, err := s.db.Regions(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, regions)
}

func (s *Server) handleSetPriceForm(c echo.Context) error {
	id := c.Param("id")
	price, err := gpuportal.ParseYuan(c.FormValue("price"))
	if err == nil {
		_, err = s.db.SetListPrice(c.Request().Context(), currentUser(c), id, price)
	}
	if err != nil {
		if code := gpuportal.ErrorCode(err); code != gpuportal.EINTERNAL && code != gpuportal.ENOTFOUND {
			return s.renderAdmin(c, statusOf[code], templates.FieldErrors{id: i18n.Error(reqOf(c).lang, err)}, nil)
		}
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The list price of %s is now %s per GPU-hour.", id, price.String()))
	return redirect(c, "/admin")
}

type setPriceRequest struct {
	ListPrice *gpuportal.Fen `json:"list_price_per_gpu_hour_fen"`
}

func (s *Server) apiSetPrice(c echo.Context) error {
	var in setPriceRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.ListPrice == nil {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "list_price_per_gpu_hour_fen", "list_price_per_gpu_hour_fen is required.")
	}
	m, err := s.db.SetListPrice(c.Request().Context(), currentUser(c), c.Param("id"), *in.ListPrice)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}
