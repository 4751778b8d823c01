package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/store"
)

func (s *Server) apiLaunch(c echo.Context) error {
	var req gpuportal.LaunchRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	inst, err := s.db.Launch(c.Request().Context(), currentUser(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, inst)
}

func (s *Server) apiInstances(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	owner, err := s.ownerParam(c)
	if err != nil {
		return err
	}
	labels, err := labelParam(c)
	if err != nil {
		return err
	}
	f := store.InstanceFilter{Tab: c.QueryParam("tab"), Limit: p.Limit, Offset: p.Offset, Total: p.Total, UserID: ownerID(owner), Labels: labels}
	list, err := s.db.InstanceList(c.Request().Context(), currentUser(c), f)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

func (s *Server) apiInstance(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	inst, err := s.db.Instance(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, inst)
}

func (s *Server) apiStop(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var opts gpuportal.StopOptions
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &opts); err != nil {
			return err
		}
	}
	inst, err := s.db.StopWith(c.Request().Context(), currentUser(c), id, opts)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, inst)
}

// apiStart starts a stopped instance whose disk was kept.
func (s *Server) apiStart(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in struct {
		Count *int `json:"count"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	if in.Count != nil && *in.Count < 0 {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "count", "The GPU count is a whole number, 0 for no-GPU mode.")
	}
	inst, err := s.db.StartInstance(c.Request().Context(), currentUser(c), id, in.Count)
	if gpuportal.ErrorCode(err) == gpuportal.ECAPACITY {
		// Its GPUs are not free now: the nearest windows to book for this
		// start instead (a booking that resumes it, launch.resume_instance_id).
		if req, ok := s.bookingForStart(c, id, in.Count); ok {
			return s.withAlternatives(c, req, err)
		}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, inst)
}

// bookingForStart is the booking a refused start would make instead: its
// GPUs from the next hour, for the policy's shortest booking, resuming it.
func (s *Server) bookingForStart(c echo.Context, id int64, count *int) (gpuportal.BookingRequest, bool) {
	ctx := c.Request().Context()
	i, err := s.db.Instance(ctx, currentUser(c), id)
	if err != nil {
		return gpuportal.BookingRequest{}, false
	}
	pol, err := s.db.Policies(ctx)
	if err != nil {
		return gpuportal.BookingRequest{}, false
	}
	n := i.Count
	if count != nil {
		n = *count
	}
	start := s.cfg.Clock.Now().Truncate(time.Hour).Add(time.Hour)
	return gpuportal.BookingRequest{Model: i.Model, Region: i.Region, Count: n, Start: start,
		End: start.Add(time.Duration(max(pol.For(i.Model).MinDurationHours, 1)) * time.Hour), Launch: &gpuportal.LaunchSpec{ResumeInstanceID: &id}}, true
}

// apiReleaseDisk is DELETE /instances/{id}: its kept disk, for good.
func (s *Server) apiReleaseDisk(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.ReleaseDisk(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// drillJSON is POST /instances/{id}/drill's answer.
type drillJSON struct {
	NoticeAt time.Time `json:"notice_at"`
	Deadline time.Time `json:"deadline"`
}

func (s *Server) apiDrill(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	inst, err := s.db.Drill(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, drillJSON{NoticeAt: inst.Drill.StartedAt, Deadline: inst.Drill.Deadline})
}

func (s *Server) apiAdminInterrupt(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	inst, err := s.db.AdminInterrupt(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, inst)
}

type clockRequest struct {
	Advance string `json:"advance"`
	Set     string `json:"set"`
}

// apiClock moves the test clock (only with --test-clock; 404 otherwise) and
// runs the scheduler for every minute that passed.
func (s *Server) apiClock(c echo.Context) error {
	if s.cfg.TestClock == nil || s.cfg.Scheduler == nil {
		return echo.ErrNotFound
	}
	var in clockRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	now := s.cfg.TestClock.Now()
	var to time.Time
	switch {
	case in.Advance != "" && in.Set == "":
		d, err := time.ParseDuration(in.Advance)
		if err != nil || d < 0 || d > 366*24*time.Hour {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "advance", "advance must be a duration like \"90m\" or \"24h\", up to a year.")
		}
		to = now.Add(d)
	case in.Set != "" && in.Advance == "":
		t, err := parseTime("set", in.Set, s.cfg.Location)
		if err != nil {
			return err
		}
		to = t
	default:
		return gpuportal.Errorf(gpuportal.EINVALID, "Send either {\"advance\": \"90m\"} or {\"set\": \"2026-12-01T08:00:00Z\"}.")
	}
	if err := s.cfg.Scheduler.Advance(c.Request().Context(), s.cfg.TestClock, to); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]time.Time{"now": s.cfg.TestClock.Now()})
}

func (s *Server) apiInstanceSamples(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	list, err := s.db.InstanceSamples(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	if list == nil {
		list = []gpuportal.GPUUseSample{}
	}
	return c.JSON(http.StatusOK, list)
}
