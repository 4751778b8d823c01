package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// instancesPage builds /instances around a launch form's state.
func (s *Server) instancesPage(c echo.Context, form templates.LaunchForm) (templates.InstancesPage, error) {
	p, err := s.launchPanel(c, form)
	if err != nil {
		return p, err
	}
	tab, err := tabParam(c, store.TabActive, store.TabEnded)
	if err != nil {
		return p, err
	}
	owner, err := s.ownerParam(c)
	if err != nil {
		return p, err
	}
	labels, err := labelParam(c)
	if err != nil {
		return p, err
	}
	page := pageParam(c)
	list, err := s.db.InstanceList(c.Request().Context(), currentUser(c), store.InstanceFilter{Tab: tab, Limit: listPageSize + 1, Offset: (page - 1) * listPageSize,
		UserID: ownerID(owner), Labels: labels})
	if err != nil {
		return p, err
	}
	p.Owner = owner
	p.Labels = labels
	p.Instances = list[:min(len(list), listPageSize)]
	lang := reqOf(c).lang
	p.Pager = pagerFor(c, page, len(list) > listPageSize)
	p.Tabs = []templates.Tab{
		{Label: i18n.T(lang, "Active"), URL: withLabels(withOwner("/instances", owner), labels), Current: tab == store.TabActive},
		{Label: i18n.T(lang, "Ended"), URL: withLabels(withOwner("/instances?tab=ended", owner), labels), Current: tab == store.TabEnded},
	}
	p.ListURL = withLabels(withOwner(fmt.Sprintf("/instances/list?tab=%s&page=%d", tab, page), owner), labels)
	p.EndedURL = endedTabURL(tab, owner, labels)
	p.LaunchOpen = form.Error != "" || len(form.Errors) > 0 || c.QueryParam("model") != "" || c.QueryParam("kind") != "" || (tab == store.TabActive && len(p.Instances) == 0 && page == 1)
	return p, nil
}

// endedTabURL is the Ended tab the Active tab's empty state points to
// ("" on the Ended tab).
func endedTabURL(tab string, owner *gpuportal.User, labels gpuportal.LabelFilter) string {
	if tab != store.TabActive {
		return ""
	}
	return withLabels(withOwner("/instances?tab=ended", owner), labels)
}

// launchPanel fills the launch form with the figures of its model, region
// and count: spot and on-demand prices (from the policies, as charged),
// the interruption bucket and the safe-until forecast.
func (s *Server) launchPanel(c echo.Context, form templates.LaunchForm) (templates.InstancesPage, error) {
	ctx := c.Request().Context()
	if keys, err := s.db.SSHKeys(ctx, person(c)); err == nil {
		form.NoSSHKey = len(keys) == 0
	}
	models, err := s.db.Models(ctx)
	if err != nil {
		return templates.InstancesPage{}, err
	}
	regions, err := s.db.Regions(ctx)
	if err != nil {
		return templates.InstancesPage{}, err
	}
	if form.Model == "" {
		form.Model, form.Region = models[0].ID, regions[0].ID
	}
	if form.Kind == "" {
		form.Kind = gpuportal.KindSpot
	}
	form.Count = max(form.Count, 1)
	if form.Region == "" {
		form.Region = regions[0].ID
	}
	pol, err := s.db.Policies(ctx)
	if err != nil {
		return templates.InstancesPage{}, err
	}
	for _, m := range models {
		if m.ID == form.Model {
			form.ListPrice = m.ListPrice
			form.SpotPrice = pol.SpotPriceOf(m)
			form.OnDemandMinMinutes = pol.For(m.ID).OnDemandMinBillableMinutes
		}
	}
	form.Disks = templates.DiskTermsOf(pol.Global)
	if r, err := s.cachedRates(ctx, form.Model, form.Region, min(max(form.Count, 1), gpuportal.MaxGPUsPerInstance)); err == nil {
		form.Bucket, form.SafeUntil = r.Trailing.Bucket, r.SafeUntil
	}
	images, err := s.launchImages(c)
	if err != nil {
		return templates.InstancesPage{}, err
	}
	if form.Volumes, err = s.volumesIn(c, form.Region); err != nil {
		return templates.InstancesPage{}, err
	}
	if form.Kind == gpuportal.KindReserved {
		active, err := s.db.Reservations(ctx, currentUser(c), store.ReservationFilter{Status: gpuportal.ReservationActive, UserID: currentUser(c).ID})
		if err != nil {
			return templates.InstancesPage{}, err
		}
		for _, r := range active {
			if r.Model == form.Model && r.Region == form.Region {
				form.Reservations = append(form.Reservations, r)
			}
		}
	}
	return templates.InstancesPage{Images: images, Models: models, Regions: regions, Launch: form, Now: s.cfg.Clock.Now(), AllUsers: currentUser(c).IsAdmin()}, nil
}

// handleLaunchFormPanel re-renders the launch form for the model, region
// and count just chosen, keeping what else was typed.
func (s *Server) handleLaunchFormPanel(c echo.Context) error {
	p, err := s.launchPanel(c, launchFormOf(c))
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.LaunchFormPanel(p))
}

// launchFormOf reads a launch form's choices from the query (the form's
// own refresh, and "Launch again" on an ended instance's page).
func launchFormOf(c echo.Context) templates.LaunchForm {
	form := templates.LaunchForm{
		Kind: gpuportal.InstanceKind(c.QueryParam("kind")), Model: c.QueryParam("model"), Region: c.QueryParam("region"), Image: c.QueryParam("image"),
		Command: c.QueryParam("command"), AutoRestart: c.QueryParam("auto_restart") == "true",
		ReservationID: strings.TrimSpace(c.QueryParam("reservation_id")), DiskGiB: c.QueryParam("disk_gib"),
		NoticeSeconds: c.QueryParam("notice_seconds"), IdleStopMinutes: c.QueryParam("idle_stop_minutes"),
	}
	form.Count, _ = strconv.Atoi(c.QueryParam("count"))
	form.Count = min(max(form.Count, 1), gpuportal.MaxGPUsPerInstance)
	form.Mount, _ = volumeIDs(c.QueryParams()["volume"])
	if form.Kind == "" {
		form.Kind = gpuportal.KindSpot
	}
	return form
}

// launchAgainURL is the instances page with the launch form filled as i
// was launched (a reserved one's reservation is over: on demand).
func (s *Server) launchAgainURL(c echo.Context, i *gpuportal.Instance) string {
	kind := i.Kind
	if kind == gpuportal.KindReserved {
		kind = gpuportal.KindOnDemand
	}
	v := url.Values{"kind": {string(kind)}, "model": {i.Model}, "region": {i.Region}, "count": {strconv.Itoa(max(i.Count, 1))}}
	if i.Command != gpuportal.MachineCommand {
		v.Set("command", i.Command)
	}
	if i.AutoRestart {
		v.Set("auto_restart", "true")
	}
	if i.Disk != nil {
		v.Set("disk_gib", strconv.Itoa(i.Disk.SizeGiB))
	}
	if images, err := s.launchImages(c); err == nil {
		for _, im := range images {
			if im.Reference == i.Image {
				v.Set("image", im.ID)
			}
		}
	}
	for _, vol := range i.Volumes {
		v.Add("volume", strconv.FormatInt(vol.ID, 10))
	}
	return "/instances?" + v.Encode() + "#launch-form"
}

func (s *Server) handleInstancesPage(c echo.Context) error {
	form := templates.LaunchForm{}
	if c.QueryParam("model") != "" || c.QueryParam("kind") != "" {
		form = launchFormOf(c) // "Launch again", or a kind asked for
	}
	p, err := s.instancesPage(c, form)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Instances(p))
}

func (s *Server) handleInstanceList(c echo.Context) error {
	tab, err := tabParam(c, store.TabActive, store.TabEnded)
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
	page := pageParam(c)
	list, err := s.db.InstanceList(c.Request().Context(), currentUser(c), store.InstanceFilter{Tab: tab, Limit: listPageSize, Offset: (page - 1) * listPageSize,
		UserID: ownerID(owner), Labels: labels})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.InstanceList(list, s.cfg.Clock.Now(), endedTabURL(tab, owner, labels)))
}

func (s *Server) handleLaunchForm(c echo.Context) error {
	if err := c.Request().ParseForm(); err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "The form could not be read.")
	}
	form, req, err := parseLaunchValues(c.Request().Form)
	var inst *gpuportal.Instance
	if err == nil {
		inst, err = s.db.Launch(c.Request().Context(), currentUser(c), req)
	}
	if err != nil {
		status, internal := formError(c, err, &form.Errors, &form.Error, "count", "command", "reservation_id", "image", "notice_seconds", "idle_stop_minutes")
		if internal != nil {
			return internal
		}
		p, perr := s.instancesPage(c, form)
		if perr != nil {
			return perr
		}
		return s.render(c, status, templates.Instances(p))
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Instance #%d launched: it starts as soon as its GPUs are assigned.", inst.ID))
	return redirect(c, fmt.Sprintf("/instances/%d", inst.ID)) // where it is used
}

func (s *Server) handleStopForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	keep := c.FormValue("keep_disk") == "true"
	lang := reqOf(c).lang
	if _, err := s.db.StopWith(c.Request().Context(), currentUser(c), id, gpuportal.StopOptions{KeepDisk: keep}); err != nil {
		if gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
			return err
		}
		s.addFlash(c, "error", i18n.Error(lang, err))
		return redirect(c, fmt.Sprintf("/instances/%d", id))
	}
	if keep {
		// Its page offers what comes next: start again, or book its resume.
		s.addFlash(c, "info", i18n.T(lang, "Instance #%d is stopping; its disk is kept for its next start.", id))
		return redirect(c, fmt.Sprintf("/instances/%d", id))
	} else {
		s.addFlash(c, "info", i18n.T(lang, "Instance #%d is stopping.", id))
	}
	return redirect(c, "/instances")
}

// handleStartForm starts a stopped instance whose disk was kept; when its
// GPUs are not free the page says so.
func (s *Server) handleStartForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	var count *int
	if v := c.FormValue("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = -1 // refused by the start, with the field named
		}
		count = &n
	}
	if _, err := s.db.StartInstance(c.Request().Context(), currentUser(c), id, count); err != nil {
		switch gpuportal.ErrorCode(err) {
		case gpuportal.ECONFLICT, gpuportal.ECAPACITY, gpuportal.EFUNDS, gpuportal.EPOLICY:
			s.addFlash(c, "error", i18n.Error(lang, err))
			return redirect(c, fmt.Sprintf("/instances/%d", id))
		}
		return err
	}
	if count != nil && *count == 0 {
		s.addFlash(c, "success", i18n.T(lang, "Instance #%d starts again with its disk in no-GPU mode.", id))
	} else {
		s.addFlash(c, "success", i18n.T(lang, "Instance #%d starts again with its disk as soon as its GPUs are assigned.", id))
	}
	return redirect(c, fmt.Sprintf("/instances/%d", id))
}

// handleReleaseDiskForm lets a stopped instance's kept disk go.
func (s *Server) handleReleaseDiskForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	if err := s.db.ReleaseDisk(c.Request().Context(), currentUser(c), id); err != nil {
		if gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
			return err
		}
		s.addFlash(c, "error", i18n.Error(lang, err))
	} else {
		s.addFlash(c, "success", i18n.T(lang, "The disk of instance #%d is released.", id))
	}
	return redirect(c, fmt.Sprintf("/instances/%d", id))
}

// handleDrillForm starts a drill from the instances list.
func (s *Server) handleDrillForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	inst, err := s.db.Drill(c.Request().Context(), currentUser(c), id)
	if code := gpuportal.ErrorCode(err); code == gpuportal.ERATELIMITED || code == gpuportal.ECONFLICT {
		s.addFlash(c, "error", i18n.Error(lang, err))
		return redirect(c, "/instances")
	} else if err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(lang, "Drill on instance #%d: its workload has the real notice now (%d s, no SIGTERM). Reporting ready ends it.", id, inst.Drill.Seconds))
	return redirect(c, "/instances")
}

// handleInstancePage is one instance's page: what it is and costs, its
// work at risk and drill, its output, and its GPUs over its life.
func (s *Server) handleInstancePage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	i, err := s.db.Instance(ctx, currentUser(c), id)
	if err != nil {
		return err
	}
	samples, err := s.db.InstanceSamples(ctx, currentUser(c), id)
	if err != nil {
		return err
	}
	d := templates.InstanceDetail{I: *i, Samples: samples, Now: s.cfg.Clock.Now(), Owner: i.UserID == currentUser(c).ID,
		SSHHost: s.cfg.SSH.Host, SSHPort: s.cfg.SSH.Port, SSHFingerprint: s.cfg.SSH.Fingerprint}
	if m, err := s.db.Model(ctx, i.Model); err == nil {
		d.MemoryTotalMiB = m.MemoryGiB * 1024 * i.Count
	}
	if keys, err := s.db.SSHKeys(ctx, person(c)); err == nil {
		d.HasSSHKey = len(keys) > 0
	}
	if templates.Live(*i) {
		if d.GPUsNow, err = s.db.InstanceGPUsNow(ctx, currentUser(c), id); err != nil {
			return err
		}
	}
	if d.Owner && !templates.Live(*i) && i.JobID == nil {
		d.LaunchAgain = s.launchAgainURL(c, i)
	}
	if d.Owner && gpuportal.CanStart(i) == nil {
		if err := s.startChoices(ctx, &d); err != nil {
			return err
		}
	}
	return s.render(c, http.StatusOK, templates.InstancePage(d))
}

// handleInstanceLive is a live part of an instance's page (?part=status
// or cost), which polls for it while the instance runs.
func (s *Server) handleInstanceLive(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	part := c.QueryParam("part")
	if part != "status" && part != "cost" && part != "gpus" {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "part", "The live part is status, cost or gpus.")
	}
	i, err := s.db.Instance(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	var gpus []gpuportal.GPUNow
	if part == "gpus" && templates.Live(*i) {
		if gpus, err = s.db.InstanceGPUsNow(c.Request().Context(), currentUser(c), id); err != nil {
			return err
		}
	}
	return s.render(c, http.StatusOK, templates.InstanceLivePart(*i, part, gpus))
}

// startChoices fills what starting a stopped instance again may ask: its
// GPU counts (no GPU, or 1 to its region's largest node), and the nearest
// windows to book that resume it on its GPUs.
func (s *Server) startChoices(ctx context.Context, d *templates.InstanceDetail) error {
	pol, err := s.db.Policies(ctx)
	if err != nil {
		return err
	}
	d.NoGPUPrice = gpuportal.Fen(pol.Global.NoGPUPricePerHourFen)
	largest, err := s.db.LargestNode(ctx, d.I.Model, d.I.Region)
	if err != nil {
		return err
	}
	d.StartChoices = []int{0}
	for n := 1; n <= largest; n++ {
		d.StartChoices = append(d.StartChoices, n)
	}
	// Windows of its own size (one GPU for one that ran with none), for
	// the shortest booking, the earliest first.
	d.ResumeOn, err = s.db.Offerings(ctx, gpuportal.OfferingRequest{Model: d.I.Model, Region: d.I.Region, Count: max(d.I.Count, 1),
		DurationHours: max(pol.For(d.I.Model).MinDurationHours, 1), Sort: gpuportal.OfferingsByStart, Limit: 3})
	if refusal := (*gpuportal.Error)(nil); errors.As(err, &refusal) {
		d.ResumeOn, err = nil, nil // no window of that shape can be booked at all
	}
	return err
}
