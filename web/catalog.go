package web

import (
	"context"
	"net/http"
	"sync"
	"time"

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

// catalogTTL is how long GET /catalog's answer is reused: reading it
// walks the fleet and each pool's rates and offerings (tens of
// milliseconds at 10,000 GPUs); cached, an orchestrator polling it every
// few seconds costs the portal nothing, and a 10-second-old "free now"
// is as true as the launch that follows finds it.
const catalogTTL = 10 * time.Second

// catalogCache is the last catalog and when it goes stale (wall clock),
// for the business-clock minute it was read in.
type catalogCache struct {
	mu      sync.Mutex
	entries []gpuportal.CatalogEntry
	minute  int64
	expires time.Time
}

// cachedCatalog answers GET /catalog.
func (s *Server) cachedCatalog(ctx context.Context) ([]gpuportal.CatalogEntry, error) {
	c := &s.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	minute, now := s.cfg.Clock.Now().Unix()/60, s.cfg.WallClock.Now()
	if c.entries != nil && c.minute == minute && now.Before(c.expires) {
		return c.entries, nil
	}
	list, err := s.db.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	c.entries, c.minute, c.expires = list, minute, now.Add(catalogTTL)
	return list, nil
}

func (s *Server) apiCatalog(c echo.Context) error {
	list, err := s.cachedCatalog(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}
