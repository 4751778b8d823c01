package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/web/templates"
)

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
	} else if p.Landing, err = s.landing(c, p.Models); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Home(p))
}

// landing gathers what a visitor reads first: the GPUs free now by model
// and region, how the nodes are built, and the spot terms.
func (s *Server) landing(c echo.Context, models []templates.ModelRow) (*templates.Landing, error) {
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
	l := &templates.Landing{SpotNoticeSeconds: pol.Global.SpotNoticeSeconds, OnDemandMinMinutes: pol.Global.OnDemandMinBillableMinutes}
	for _, m := range models {
		l.MaxSpotDiscount = max(l.MaxSpotDiscount, m.SpotDiscountPercent)
	}
	for _, st := range states {
		row := templates.AvailabilityRow{Model: st.Model, Region: st.Region, Free: st.Idle,
			InService: st.Idle + st.Reserved + st.OnDemand + st.Spot, Spot: st.Spot}
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
	for _, status := range []gpuportal.ReservationStatus{gpuportal.ReservationActive, gpuportal.ReservationConfirmed} {
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
