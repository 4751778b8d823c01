package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// Jobs: the JSON API and the pages (/jobs with the form and the list,
// /jobs/:id with progress, the task grid and a task's attempts) share the
// store's calls.

const jobsPerPage = 20

// createJob submits a job for the signed-in user, at most jobsPerHour an
// hour (each queues up to 10,000 rows the scheduler reads).
func (s *Server) createJob(c echo.Context, req gpuportal.JobRequest) (*gpuportal.Job, error) {
	if wait, blocked := s.limiter.attempt(jobRule(currentUser(c).ID)); blocked {
		return nil, gpuportal.Errorf(gpuportal.ERATELIMITED, "Too many jobs submitted in the last hour. Please try again in %d minutes.", minutesLeft(wait))
	}
	return s.db.CreateJob(c.Request().Context(), currentUser(c), req)
}

func (s *Server) apiCreateJob(c echo.Context) error {
	var req gpuportal.JobRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	j, err := s.createJob(c, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, j)
}

func (s *Server) apiJobs(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	labels, err := labelParam(c)
	if err != nil {
		return err
	}
	list, err := s.db.JobList(c.Request().Context(), currentUser(c), p, labels)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

func (s *Server) apiJob(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	j, err := s.db.Job(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, j)
}

func (s *Server) apiJobTasks(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	limit, offset, err := pageParams(c, maxTasksPage)
	if err != nil {
		return err
	}
	tasks, total, err := s.db.JobTasks(c.Request().Context(), currentUser(c), id, limit, offset)
	if err != nil {
		return err
	}
	c.Response().Header().Set("X-Total-Count", strconv.Itoa(total))
	return c.JSON(http.StatusOK, tasks)
}

func (s *Server) apiCancelJob(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	j, err := s.db.CancelJob(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, j)
}

// pageParams reads ?limit= (1..max, default max) and ?offset= (≥ 0).
// maxTasksPage is the most tasks one GET /jobs/{id}/tasks answers (and
// its default): page on with ?offset=; X-Total-Count says how many.
const maxTasksPage = 1000

func pageParams(c echo.Context, maxLimit int) (limit, offset int, err error) {
	limit, offset = maxLimit, 0
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxLimit {
			return 0, 0, gpuportal.FieldErrorf(gpuportal.EINVALID, "limit", "limit must be a number from 1 to %d.", maxLimit)
		}
	}
	if v := c.QueryParam("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return 0, 0, gpuportal.FieldErrorf(gpuportal.EINVALID, "offset", "offset must be a number, 0 or more.")
		}
	}
	return limit, offset, nil
}

// jobsPage builds /jobs around the form's state.
func (s *Server) jobsPage(c echo.Context, form templates.JobForm) (templates.JobsPage, error) {
	ctx := c.Request().Context()
	p := templates.JobsPage{Form: form}
	var err error
	if p.Models, err = s.db.Models(ctx); err != nil {
		return p, err
	}
	if p.Regions, err = s.db.Regions(ctx); err != nil {
		return p, err
	}
	if p.Images, err = s.launchImages(c); err != nil {
		return p, err
	}
	if p.Form.Model == "" {
		p.Form = templates.JobForm{Model: p.Models[0].ID, Region: p.Regions[0].ID, Kind: gpuportal.JobSpot, GPUsPerTask: 1, Tasks: 10, MaxParallel: 4, MaxAttempts: gpuportal.DefaultJobAttempts,
			TaskHours: 1}
	}
	if p.Form.Volumes, err = s.volumesIn(c, ""); err != nil {
		return p, err
	}
	pol, err := s.db.Policies(ctx)
	if err != nil {
		return p, err
	}
	p.Form.Disks = templates.DiskTermsOf(pol.Global)
	for _, m := range p.Models {
		if m.ID == p.Form.Model {
			p.Form.SpotPrice, p.Form.ListPrice = pol.SpotPriceOf(m), m.ListPrice
		}
	}
	if p.Form.Estimate, err = s.jobEstimate(c, p.Form, nil); err != nil {
		return p, err
	}
	page, _ := strconv.Atoi(c.QueryParam("page"))
	p.Page = max(page, 1)
	if p.Labels, err = labelParam(c); err != nil {
		return p, err
	}
	list, err := s.db.JobList(ctx, currentUser(c), store.Page{Limit: jobsPerPage + 1, Offset: (p.Page - 1) * jobsPerPage}, p.Labels)
	if err != nil {
		return p, err
	}
	if len(list) > jobsPerPage {
		p.More, list = true, list[:jobsPerPage]
	}
	p.Jobs = list
	return p, nil
}

// jobEstimate works out the estimate under the job form from its fields
// (the command and name play no part). A field not right yet is the
// panel's problem to show, not an error; parseErr is the form's own.
func (s *Server) jobEstimate(c echo.Context, form templates.JobForm, parseErr error) (templates.JobEstimateView, error) {
	ctx := c.Request().Context()
	lang := reqOf(c).lang
	v := templates.JobEstimateView{Kind: form.Kind}
	problem := func(err error) (templates.JobEstimateView, error) {
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
			return v, err
		}
		v.Problem = i18n.Error(lang, err)
		return v, nil
	}
	if parseErr != nil {
		return problem(parseErr)
	}
	req := gpuportal.JobRequest{Model: form.Model, Region: form.Region, Kind: form.Kind, Tasks: form.Tasks, GPUsPerTask: form.GPUsPerTask,
		MaxParallel: form.MaxParallel, OnDemandWorkers: form.OnDemandWorkers, MaxAttempts: form.MaxAttempts, Command: "estimate"}
	if err := req.Validate(); err != nil {
		return problem(err)
	}
	m, err := s.db.Model(ctx, req.Model)
	if err != nil {
		return problem(err)
	}
	pol, err := s.db.Policies(ctx)
	if err != nil {
		return v, err
	}
	healthy, err := s.db.HealthyGPUs(ctx, req.Model, req.Region)
	if err != nil {
		return v, err
	}
	v.SpotPrice, v.ListPrice = pol.SpotPriceOf(*m), m.ListPrice
	e, err := gpuportal.EstimateJob(req, form.TaskHours, v.SpotPrice, v.ListPrice, healthy)
	if err != nil {
		return problem(err)
	}
	v.Estimate = &e
	return v, nil
}

// handleJobEstimate answers the job form's fields with its estimate panel
// (htmx, as the customer types).
func (s *Server) handleJobEstimate(c echo.Context) error {
	form, _, err := parseJobValues(c.QueryParams(), reqOf(c).lang)
	v, ierr := s.jobEstimate(c, form, err)
	if ierr != nil {
		return ierr
	}
	return s.render(c, http.StatusOK, templates.JobEstimatePanel(v))
}

func (s *Server) handleJobsPage(c echo.Context) error {
	p, err := s.jobsPage(c, templates.JobForm{})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Jobs(p))
}

func (s *Server) handleJobList(c echo.Context) error {
	p, err := s.jobsPage(c, templates.JobForm{})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.JobList(p))
}

func (s *Server) handleJobForm(c echo.Context) error {
	if err := c.Request().ParseForm(); err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "The form could not be read.")
	}
	form, req, err := parseJobValues(c.Request().Form, reqOf(c).lang)
	var j *gpuportal.Job
	if err == nil {
		j, err = s.createJob(c, req)
	}
	if err != nil {
		status, internal := formError(c, err, &form.Errors, &form.Error)
		if internal != nil {
			return internal
		}
		p, perr := s.jobsPage(c, form)
		if perr != nil {
			return perr
		}
		return s.render(c, status, templates.Jobs(p))
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Job %s submitted: its tasks start as GPUs are free.", j.Title()))
	return redirect(c, "/jobs/"+strconv.FormatInt(j.ID, 10))
}

// jobView loads what the job page shows.
func (s *Server) jobView(c echo.Context) (templates.JobPage, error) {
	id, err := pathID(c)
	if err != nil {
		return templates.JobPage{}, err
	}
	ctx := c.Request().Context()
	j, err := s.db.Job(ctx, currentUser(c), id)
	if err != nil {
		return templates.JobPage{}, err
	}
	tasks, _, err := s.db.JobTasks(ctx, currentUser(c), id, maxTasksPage, 0) // the first thousand; the API pages on
	if err != nil {
		return templates.JobPage{}, err
	}
	return templates.JobPage{Job: *j, Tasks: tasks, Now: s.cfg.Clock.Now()}, nil
}

func (s *Server) handleJobPage(c echo.Context) error {
	p, err := s.jobView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.JobDetail(p))
}

// handleJobLive is the part of the job page that htmx refreshes.
func (s *Server) handleJobLive(c echo.Context) error {
	p, err := s.jobView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.JobLive(p))
}

func (s *Server) handleTaskPage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	index, err := strconv.Atoi(c.Param("index"))
	if err != nil || index < 0 {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "Task %q not found.", c.Param("index"))
	}
	ctx := c.Request().Context()
	j, err := s.db.Job(ctx, currentUser(c), id)
	if err != nil {
		return err
	}
	if index >= j.Tasks.Total {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "Task %q not found.", c.Param("index"))
	}
	attempts, err := s.db.TaskAttempts(ctx, currentUser(c), id, index)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.TaskDetail(templates.TaskPage{Job: *j, Index: index, Attempts: attempts}))
}

func (s *Server) handleCancelJobForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	j, err := s.db.CancelJob(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "Job %s is cancelled: its running tasks are stopping.", j.Title()))
	return redirect(c, "/jobs/"+strconv.FormatInt(id, 10))
}
