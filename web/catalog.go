package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
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

func (s *Server) handleHome(c echo.Context) error {
	models, err := s.modelsWithSpot(c)
	if err != nil {
		return err
	}
	regions, err := s.db.Regions(c.Request().Context())
	if err != nil {
		return err
	}
	p := templates.HomePage{Regions: regions}
	for _, m := range models {
		p.Models = append(p.Models, templates.ModelRow{Model: m.Model, SpotPrice: m.SpotPrice, SpotDiscountPercent: m.SpotDiscountPercent})
	}
	if u := currentUser(c); u != nil {
		if p.Dashboard, err = s.dashboard(c, u); err != nil {
			return err
		}
	} else if p.Landing, err = s.landing(c, p.Models, regions); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Home(p))
}

// landing gathers what a visitor reads first: the GPUs free now by model
// and region, how the nodes are built, and the spot terms.
func (s *Server) landing(c echo.Context, models []templates.ModelRow, regions []gpuportal.Region) (*templates.Landing, error) {
	ctx := c.Request().Context()
	states, err := s.db.GPUStatesNow(ctx)
	if err != nil {
		return nil, err
	}
	shape, err := s.db.FleetShape(ctx)
	if err != nil {
		return nil, err
	}
	pol, err := s.db.Policies(ctx)
	if err != nil {
		return nil, err
	}
	l := &templates.Landing{SpotNoticeSeconds: pol.Global.SpotNoticeSeconds}
	for _, m := range models {
		l.MaxSpotDiscount = max(l.MaxSpotDiscount, m.SpotDiscountPercent)
	}
	for _, st := range states {
		row := templates.AvailabilityRow{Model: st.Model, Region: st.Region, RegionName: st.Region, Free: st.Idle,
			InService: st.Idle + st.Reserved + st.OnDemand + st.Spot, Spot: st.Spot}
		for _, r := range regions {
			if r.ID == st.Region {
				row.RegionName = r.Name
			}
		}
		for _, part := range shape {
			if part.Model == st.Model && part.Region == st.Region {
				row.GPUsPerNode = max(row.GPUsPerNode, part.GPUsPerNode)
			}
		}
		l.Available = append(l.Available, row)
	}
	return l, nil
}

// dashboard gathers a user's money, running instances, next reservations
// and this month's spend.
func (s *Server) dashboard(c echo.Context, u *gpuportal.User) (*templates.Dashboard, error) {
	ctx := c.Request().Context()
	d := &templates.Dashboard{TopUps: s.topUpsEnabled()}
	var err error
	if d.Balance, err = s.db.Balance(ctx, u); err != nil {
		return nil, err
	}
	instances, err := s.db.Instances(ctx, &gpuportal.User{ID: u.ID, Role: gpuportal.RoleCustomer}, 50)
	if err != nil {
		return nil, err
	}
	for _, i := range instances {
		if i.Status == gpuportal.InstancePending || i.Status == gpuportal.InstanceRunning || i.Status == gpuportal.InstanceInterrupting {
			d.Running = append(d.Running, i)
		}
	}
	for _, status := range []string{gpuportal.ReservationActive, gpuportal.ReservationConfirmed} {
		list, err := s.db.Reservations(ctx, &gpuportal.User{ID: u.ID, Role: gpuportal.RoleCustomer}, store.ReservationFilter{Status: status, Limit: 5})
		if err != nil {
			return nil, err
		}
		d.Upcoming = append(d.Upcoming, list...)
	}
	d.Upcoming = d.Upcoming[:min(len(d.Upcoming), 5)]
	now := s.cfg.Clock.Now().In(s.cfg.Location)
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, s.cfg.Location)
	if d.Spend, err = s.db.SpendByKind(ctx, u.ID, month, month.AddDate(0, 1, 0)); err != nil {
		return nil, err
	}
	if d.Volumes, err = s.db.Volumes(ctx, u); err != nil {
		return nil, err
	}
	if d.Days, err = s.spendDays(c, spendDaysDefault); err != nil {
		return nil, err
	}
	if d.Budget, err = s.db.Budget(ctx, u.ID); err != nil {
		return nil, err
	}
	return d, nil
}

func (s *Server) handleAdmin(c echo.Context) error {
	return s.renderAdmin(c, http.StatusOK, nil, nil)
}

func (s *Server) renderAdmin(c echo.Context, status int, errs templates.FieldErrors, reset *templates.IssuedReset) error {
	models, err := s.db.Models(c.Request().Context())
	if err != nil {
		return err
	}
	o, err := s.db.Overview(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, status, templates.Admin(templates.AdminPage{Models: models, Errors: errs, Overview: o, Reset: reset}))
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
