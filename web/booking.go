package web

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"gpuportal"
)

// bookingJSON is the booking request as the JSON API receives it. Times are
// strings so a bad one is reported against its field.
type bookingJSON struct {
	Model  string `json:"model"`
	Region string `json:"region"`
	Count  int    `json:"count"`
	Start  string `json:"start"`
	End    string `json:"end"`
	// Launch: what to run by itself at the start (bookings only).
	Launch *gpuportal.LaunchSpec `json:"launch,omitempty"`
	Labels gpuportal.Labels      `json:"labels,omitempty"`
}

// parseBookingJSON decodes and checks the shape of a booking request body.
// The rules (duration, lead time, capacity) are the store's to check. A
// time without an offset is read in the site time zone, as on every other
// route (the waitlist, the quote, the forms) — it was read as UTC here
// alone.
func parseBookingJSON(body []byte, loc *time.Location) (gpuportal.BookingRequest, error) {
	var in bookingJSON
	if err := decodeStrict(bytes.NewReader(body), &in); err != nil {
		return gpuportal.BookingRequest{}, err
	}
	req, err := bookingFields(in.Model, in.Region, in.Count, in.Start, in.End, loc)
	req.Launch, req.Labels = in.Launch, in.Labels
	return req, err
}

// launchSpecValues reads a booking form's "start by itself" choice: "" (run
// nothing), "machine" (a machine to log into) or "command" with
// launch_command, in the image launch_image.
func launchSpecValues(get func(string) string) *gpuportal.LaunchSpec {
	var spec *gpuportal.LaunchSpec
	switch get("launch") {
	case "machine":
		spec = &gpuportal.LaunchSpec{Image: get("launch_image"), Command: gpuportal.MachineCommand}
	case "command":
		spec = &gpuportal.LaunchSpec{Image: get("launch_image"), Command: get("launch_command")}
	case "resume":
		// Not a number: an id no instance has, refused with the field.
		id, _ := strconv.ParseInt(strings.TrimSpace(get("launch_resume")), 10, 64)
		return &gpuportal.LaunchSpec{ResumeInstanceID: &id}
	default:
		return nil
	}
	if s := strings.TrimSpace(get("launch_disk_gib")); s != "" {
		// Not a number: a size no policy allows, refused by the booking
		// with the field named.
		n, err := strconv.Atoi(s)
		if err != nil {
			n = 0
		}
		spec.DiskGiB = &n
	}
	return spec
}

// bookingForm is a booking form's (or the calendar's quote's) values,
// read once: what the page shows back, and what the request is parsed
// from.
type bookingForm struct {
	Model, Region string
	Count         string // as typed ("" when not given)
	// Start and End are "2006-01-02T15:04" in the site's zone or RFC 3339
	// (composed from the date and hour fields where the form has them).
	Start, End string
	// Typed are the date and hour fields as typed, to show back.
	Typed map[string]string
}

// readBookingForm reads a booking form; model and region are the page's
// (the calendar's own choice) where the form does not carry them.
func readBookingForm(get func(string) string, model, region string) bookingForm {
	f := bookingForm{Model: model, Region: region, Count: strings.TrimSpace(get("count")), Start: hourValue(get, "start"), End: hourValue(get, "end"), Typed: map[string]string{}}
	for _, name := range []string{"start_date", "start_hour", "end_date", "end_hour"} {
		if v := get(name); v != "" {
			f.Typed[name] = v
		}
	}
	return f
}

// request is the booking the form asks for.
func (f bookingForm) request(loc *time.Location) (gpuportal.BookingRequest, error) {
	count, err := strconv.Atoi(f.Count)
	if err != nil {
		return gpuportal.BookingRequest{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "count", "The GPU count must be a whole number.")
	}
	return bookingFields(f.Model, f.Region, count, f.Start, f.End, loc)
}

// parseBookingValues reads a booking request from form or query values.
// Times may be RFC 3339 or, from a datetime-local input, "2006-01-02T15:04"
// in the site time zone.
func parseBookingValues(get func(string) string, loc *time.Location) (gpuportal.BookingRequest, error) {
	return readBookingForm(get, get("model"), get("region")).request(loc)
}

// modelAndRegion are a request's model and region, trimmed; both are
// required.
func modelAndRegion(model, region string) (string, string, error) {
	model, region = strings.TrimSpace(model), strings.TrimSpace(region)
	if model == "" {
		return model, region, gpuportal.FieldErrorf(gpuportal.EINVALID, "model", "The GPU model is required (e.g. a100-80g).")
	}
	if region == "" {
		return model, region, gpuportal.FieldErrorf(gpuportal.EINVALID, "region", "The region is required (e.g. cd-1).")
	}
	return model, region, nil
}

func bookingFields(model, region string, count int, start, end string, loc *time.Location) (gpuportal.BookingRequest, error) {
	model, region, err := modelAndRegion(model, region)
	req := gpuportal.BookingRequest{Model: model, Region: region, Count: count}
	if err != nil {
		return req, err
	}
	if req.Start, err = parseTime("start", start, loc); err != nil {
		return req, err
	}
	if req.End, err = parseTime("end", end, loc); err != nil {
		return req, err
	}
	return req, nil
}

// parseTime parses an RFC 3339 time or a site-local "2006-01-02T15:04".
func parseTime(field, s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "The %s time is required (RFC 3339, e.g. 2026-12-01T10:00:00+08:00).", field)
	}
	// A "+08:00" offset in an unescaped query string arrives as " 08:00".
	if i := strings.LastIndexByte(s, ' '); i > 0 && strings.Count(s, " ") == 1 {
		s = s[:i] + "+" + s[i+1:]
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if t.Year() < 2000 || t.Year() > 2200 {
			return time.Time{}, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "The %s time %q is out of range.", field, s)
		}
		return t.UTC(), nil
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04", s, loc); err == nil && t.Year() >= 2000 && t.Year() <= 2200 {
		return t.UTC(), nil
	}
	return time.Time{}, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "The %s time %q is not an RFC 3339 time like 2026-12-01T10:00:00+08:00.", field, s)
}
