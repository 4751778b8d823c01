package web

import (
	"net/url"
	"strconv"
	"strings"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// The launch and job forms read into the very request types the JSON API
// decodes (gpuportal.LaunchRequest, gpuportal.JobRequest): one request per
// action, checked once, by the store, whichever door it came in by. The
// form's own share is what HTML cannot say in types — text that must be
// a number, checkboxes — and its errors name the JSON fields.

// parseLaunchValues reads the launch form: what to show again (the form)
// and what to launch. The first error found is returned with both.
func parseLaunchValues(v url.Values) (templates.LaunchForm, gpuportal.LaunchRequest, error) {
	form := templates.LaunchForm{
		Kind: gpuportal.InstanceKind(v.Get("kind")), Model: v.Get("model"), Region: v.Get("region"), Image: v.Get("image"),
		Command: v.Get("command"), AutoRestart: v.Get("auto_restart") == "true",
		ReservationID: strings.TrimSpace(v.Get("reservation_id")), NoticeSeconds: strings.TrimSpace(v.Get("notice_seconds")),
		IdleStopMinutes: strings.TrimSpace(v.Get("idle_stop_minutes")), DiskGiB: strings.TrimSpace(v.Get("disk_gib")),
	}
	req := gpuportal.LaunchRequest{Kind: form.Kind, Model: form.Model, Region: form.Region, Command: form.Command, AutoRestart: form.AutoRestart, Image: form.Image}
	var err error
	if form.Count, err = strconv.Atoi(strings.TrimSpace(v.Get("count"))); err != nil {
		err = gpuportal.FieldErrorf(gpuportal.EINVALID, "count", "The GPU count must be a whole number.")
	}
	req.Count = form.Count
	if form.Mount, req.Volumes = volumeIDs(v["volume"]); err == nil && len(req.Volumes) != len(v["volume"]) {
		err = gpuportal.FieldErrorf(gpuportal.EINVALID, "volumes", "Choose volumes from the list.")
	}
	if err == nil && form.NoticeSeconds != "" {
		var n int
		if n, err = strconv.Atoi(form.NoticeSeconds); err != nil {
			err = gpuportal.FieldErrorf(gpuportal.EINVALID, "notice_seconds", "The notice must be a whole number of seconds.")
		}
		req.NoticeSeconds = &n
	}
	if err == nil && form.IdleStopMinutes != "" {
		var n int
		if n, err = strconv.Atoi(form.IdleStopMinutes); err != nil {
			err = gpuportal.FieldErrorf(gpuportal.EINVALID, "idle_stop_minutes", "Idle stop is a whole number of minutes.")
		}
		req.IdleStopMinutes = &n
	}
	if err == nil {
		req.DiskGiB, err = diskGiBValue(form.DiskGiB, "disk_gib")
	}
	if err == nil && form.ReservationID != "" {
		var id int64
		if id, err = strconv.ParseInt(form.ReservationID, 10, 64); err != nil {
			err = gpuportal.FieldErrorf(gpuportal.EINVALID, "reservation_id", "The reservation number must be a number.")
		}
		req.ReservationID = &id
	}
	return form, req, err
}

// parseJobValues reads the job form; labels in errors are in lang.
func parseJobValues(v url.Values, lang string) (templates.JobForm, gpuportal.JobRequest, error) {
	form := templates.JobForm{
		Name: v.Get("name"), Model: v.Get("model"), Region: v.Get("region"), Image: v.Get("image"),
		Command: v.Get("command"), Kind: gpuportal.JobKind(v.Get("kind")), DiskGiB: strings.TrimSpace(v.Get("disk_gib")),
	}
	var err error
	number := func(field string, into *int, label string) {
		s := strings.TrimSpace(v.Get(field))
		if s == "" && field == "on_demand_workers" {
			return // optional: none
		}
		n, perr := strconv.Atoi(s)
		*into = n
		if perr != nil && err == nil {
			err = gpuportal.FieldErrorf(gpuportal.EINVALID, field, "%s must be a whole number.", label)
		}
	}
	number("gpus_per_task", &form.GPUsPerTask, i18n.T(lang, "GPUs per task"))
	number("tasks", &form.Tasks, i18n.T(lang, "Tasks"))
	number("max_parallel", &form.MaxParallel, i18n.T(lang, "Tasks at once"))
	number("max_attempts", &form.MaxAttempts, i18n.T(lang, "Attempts per task"))
	number("on_demand_workers", &form.OnDemandWorkers, i18n.T(lang, "On-demand workers"))
	// The guess of a task's hours is the estimate's, not the job's: a
	// bad one never stops a submit.
	form.TaskHours = 1
	if h, perr := strconv.ParseFloat(strings.TrimSpace(v.Get("task_hours")), 64); perr == nil {
		form.TaskHours = h
	}
	var mounts []gpuportal.VolumeMount
	if form.Mount, mounts = volumeIDs(v["volume"]); err == nil && len(mounts) != len(v["volume"]) {
		err = gpuportal.FieldErrorf(gpuportal.EINVALID, "volumes", "Choose volumes from the list.")
	}
	req := gpuportal.JobRequest{
		Name: form.Name, Model: form.Model, Region: form.Region, GPUsPerTask: form.GPUsPerTask, Tasks: form.Tasks, Command: form.Command,
		Image: form.Image, MaxParallel: form.MaxParallel, Kind: form.Kind, OnDemandWorkers: form.OnDemandWorkers, MaxAttempts: form.MaxAttempts,
		Volumes: mounts,
	}
	if err == nil {
		req.DiskGiB, err = diskGiBValue(form.DiskGiB, "disk_gib")
	}
	return form, req, err
}

// diskGiBValue reads a form's disk size: empty is the policy's.
func diskGiBValue(s, field string) (*int, error) {
	if s == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "The disk size is a whole number of GiB.")
	}
	return &n, nil
}
