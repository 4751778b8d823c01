package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/simulate"
	"gpuportal/web/templates"
)

// The policy editor posts one input per rule, named by its path in the
// policies document ("global.min_duration_hours",
// "models.h100-80g.off_peak[1].to_hour"), so validation errors land next to
// their inputs. An empty model input inherits the global value.

// policyInts are the whole-number rules, in the editor's order.
var policyInts = []string{
	"min_duration_hours", "max_duration_hours", "max_advance_days", "reservable_percent", "late_cancel_limit_30d",
	"spot_discount_percent", "spot_notice_seconds", "spot_grace_seconds", "waitlist_claim_minutes", "on_demand_min_billable_minutes",
	"spot_notice_min_seconds", "spot_notice_max_seconds", "rebalance_lead_minutes",
	"volume_price_per_gib_month_fen", "max_volume_gib",
	"container_disk_gib", "max_container_disk_gib", "container_disk_free_gib", "no_gpu_price_per_hour_fen", "gpu_failure_credit_percent",
}

func policyIntPtr(p *gpuportal.Policy, name string) *int {
	switch name {
	case "min_duration_hours":
		return &p.MinDurationHours
	case "max_duration_hours":
		return &p.MaxDurationHours
	case "max_advance_days":
		return &p.MaxAdvanceDays
	case "reservable_percent":
		return &p.ReservablePercent
	case "late_cancel_limit_30d":
		return &p.LateCancelLimit30d
	case "spot_discount_percent":
		return &p.SpotDiscountPercent
	case "spot_notice_seconds":
		return &p.SpotNoticeSeconds
	case "spot_grace_seconds":
		return &p.SpotGraceSeconds
	case "waitlist_claim_minutes":
		return &p.WaitlistClaimMinutes
	case "on_demand_min_billable_minutes":
		return &p.OnDemandMinBillableMinutes
	case "spot_notice_min_seconds":
		return &p.SpotNoticeMinSeconds
	case "spot_notice_max_seconds":
		return &p.SpotNoticeMaxSeconds
	case "rebalance_lead_minutes":
		return &p.RebalanceLeadMinutes
	case "volume_price_per_gib_month_fen":
		return &p.VolumePricePerGiBMonthFen
	case "max_volume_gib":
		return &p.MaxVolumeGiB
	case "container_disk_gib":
		return &p.ContainerDiskGiB
	case "max_container_disk_gib":
		return &p.MaxContainerDiskGiB
	case "container_disk_free_gib":
		return &p.ContainerDiskFreeGiB
	case "no_gpu_price_per_hour_fen":
		return &p.NoGPUPricePerHourFen
	case "gpu_failure_credit_percent":
		return &p.GPUFailureCreditPercent
	}
	return nil
}

func overrideIntPtr(o *gpuportal.PolicyOverride, name string) **int {
	switch name {
	case "min_duration_hours":
		return &o.MinDurationHours
	case "max_duration_hours":
		return &o.MaxDurationHours
	case "max_advance_days":
		return &o.MaxAdvanceDays
	case "reservable_percent":
		return &o.ReservablePercent
	case "late_cancel_limit_30d":
		return &o.LateCancelLimit30d
	case "spot_discount_percent":
		return &o.SpotDiscountPercent
	case "spot_notice_seconds":
		return &o.SpotNoticeSeconds
	case "spot_grace_seconds":
		return &o.SpotGraceSeconds
	case "waitlist_claim_minutes":
		return &o.WaitlistClaimMinutes
	case "on_demand_min_billable_minutes":
		return &o.OnDemandMinBillableMinutes
	case "spot_notice_min_seconds":
		return &o.SpotNoticeMinSeconds
	case "spot_notice_max_seconds":
		return &o.SpotNoticeMaxSeconds
	case "rebalance_lead_minutes":
		return &o.RebalanceLeadMinutes
	}
	return nil
}

// parsePolicyForm reads the editor's form into a policies document; a
// value that is not a number is a field error (nothing is saved).
func parsePolicyForm(form url.Values, models []gpuportal.Model) (gpuportal.Policies, gpuportal.ValidationErrors) {
	var errs gpuportal.ValidationErrors
	num := func(name string) (int, bool) {
		v := strings.TrimSpace(form.Get(name))
		if v == "" {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, gpuportal.FieldErrorf(gpuportal.EINVALID, name, "Must be a whole number."))
			return 0, false
		}
		return n, true
	}
	// Money rules (…_fen) are entered in yuan, as every other price.
	yuan := func(name string) (int, bool) {
		v := strings.TrimSpace(form.Get(name))
		if v == "" {
			return 0, false
		}
		f, err := gpuportal.ParseYuan(v)
		if err != nil {
			errs = append(errs, gpuportal.FieldErrorf(gpuportal.EINVALID, name, "An amount in yuan, like 0.10."))
			return 0, false
		}
		return int(f), true
	}
	p := gpuportal.Policies{Models: map[string]gpuportal.PolicyOverride{}}
	for _, name := range policyInts {
		read := num
		if strings.HasSuffix(name, "_fen") {
			read = yuan
		}
		n, ok := read("global." + name)
		if !ok && !hasErr(errs, "global."+name) {
			errs = append(errs, gpuportal.FieldErrorf(gpuportal.EINVALID, "global."+name, "Required."))
		}
		*policyIntPtr(&p.Global, name) = n
	}
	p.Global.OffPeak = parseWindows(form, "global", num)
	p.Global.CancellationTiers = parseTiers(form, "global", num)
	for _, m := range models {
		scope := "models." + m.ID
		var o gpuportal.PolicyOverride
		set := false
		for _, name := range policyInts {
			if templates.GlobalOnlyRule(name) {
				continue
			}
			if n, ok := num(scope + "." + name); ok {
				v := n
				*overrideIntPtr(&o, name) = &v
				set = true
			}
		}
		if form.Get(scope+".override_off_peak") == "on" {
			w := parseWindows(form, scope, num)
			o.OffPeak, set = &w, true
		}
		if form.Get(scope+".override_tiers") == "on" {
			t := parseTiers(form, scope, num)
			o.CancellationTiers, set = &t, true
		}
		if set {
			p.Models[m.ID] = o
		}
	}
	return p, errs
}

func hasErr(errs gpuportal.ValidationErrors, field string) bool {
	for _, e := range errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// parseWindows reads off-peak rows; a row with no days and no hours is an
// unused blank row.
func parseWindows(form url.Values, scope string, num func(string) (int, bool)) []gpuportal.OffPeakWindow {
	out := []gpuportal.OffPeakWindow{}
	for i := 0; i < 10; i++ {
		f := fmt.Sprintf("%s.off_peak[%d]", scope, i)
		days := form[f+".days"]
		from, okF := num(f + ".from_hour")
		to, okT := num(f + ".to_hour")
		d, okD := num(f + ".discount_percent")
		if len(days) == 0 && !okF && !okT && !okD {
			continue
		}
		out = append(out, gpuportal.OffPeakWindow{Days: days, FromHour: from, ToHour: to, DiscountPercent: d})
	}
	return out
}

func parseTiers(form url.Values, scope string, num func(string) (int, bool)) []gpuportal.CancellationTier {
	out := []gpuportal.CancellationTier{}
	for i := 0; i < 10; i++ {
		f := fmt.Sprintf("%s.cancellation_tiers[%d]", scope, i)
		h, okH := num(f + ".min_hours_before")
		fee, okF := num(f + ".fee_percent")
		if !okH && !okF {
			continue
		}
		out = append(out, gpuportal.CancellationTier{MinHoursBefore: h, FeePercent: fee})
	}
	return out
}

// policyPreview prices a sample booking under a policies document: 8 GPUs
// of each model for 8 hours from next Friday 22:00 (a weekday evening, a
// night and a weekend morning), and what cancelling it 12 hours before
// would cost.
func (s *Server) policyPreview(c echo.Context, p gpuportal.Policies) ([]templates.PolicyPreview, error) {
	models, err := s.db.Models(c.Request().Context())
	if err != nil {
		return nil, err
	}
	now := s.cfg.Clock.Now().In(s.cfg.Location)
	days := (int(time.Friday) - int(now.Weekday()) + 7) % 7
	if days == 0 {
		days = 7
	}
	start := time.Date(now.Year(), now.Month(), now.Day(), 22, 0, 0, 0, s.cfg.Location).AddDate(0, 0, days)
	current, err := s.db.Policies(c.Request().Context())
	if err != nil {
		return nil, err
	}
	var out []templates.PolicyPreview
	for _, m := range models {
		q := gpuportal.QuoteFor(m, 8, start, start.Add(8*time.Hour), p.For(m.ID), s.cfg.Location)
		old := gpuportal.QuoteFor(m, 8, start, start.Add(8*time.Hour), current.For(m.ID), s.cfg.Location)
		fee, _ := gpuportal.CancellationFee(q.Total, p.For(m.ID).CancellationTiers, start, start.Add(-12*time.Hour))
		pol := p.For(m.ID)
		out = append(out, templates.PolicyPreview{Model: m, Start: start, Quote: q, OldTotal: old.Total, Fee12h: fee,
			Spot: pol.SpotPriceOf(m), MinHours: pol.MinDurationHours})
	}
	return out, nil
}

func (s *Server) policyEditor(c echo.Context, p gpuportal.Policies, form url.Values, errs gpuportal.ValidationErrors) (templates.PolicyEditor, error) {
	models, err := s.db.Models(c.Request().Context())
	if err != nil {
		return templates.PolicyEditor{}, err
	}
	ed := templates.PolicyEditor{Models: models, Policies: p, Form: form, Errors: templates.FieldErrors{}, Ints: policyInts,
		SpotPriceElasticity: simulate.DefaultSpotPriceElasticity}
	lang := reqOf(c).lang
	for _, e := range errs {
		ed.Errors[e.Field] = i18n.Error(lang, e)
	}
	if len(errs) == 0 {
		if ed.Preview, err = s.policyPreview(c, p); err != nil {
			return ed, err
		}
	}
	return ed, nil
}

func (s *Server) handlePolicyPage(c echo.Context) error {
	p, err := s.db.Policies(c.Request().Context())
	if err != nil {
		return err
	}
	ed, err := s.policyEditor(c, p, nil, nil)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.PolicyPage(ed))
}

// parsePolicyDraft reads the policy editor's form: the draft, and the
// problems it has (the parser's — a field that is not a number — and then
// the rules').
func (s *Server) parsePolicyDraft(c echo.Context) (gpuportal.Policies, gpuportal.ValidationErrors, error) {
	models, err := s.db.Models(c.Request().Context())
	if err != nil {
		return gpuportal.Policies{}, nil, err
	}
	p, errs := parsePolicyForm(c.Request().PostForm, models)
	err = s.db.CheckPolicies(c.Request().Context(), p)
	// errors.As, not a type assertion: a store that wraps the failing
	// step around the problems must still show them on the form.
	var ve gpuportal.ValidationErrors
	if errors.As(err, &ve) {
		for _, e := range ve {
			if !hasErr(errs, e.Field) { // a field that is not a number already says so
				errs = append(errs, e)
			}
		}
	} else if err != nil {
		return p, nil, err
	}
	return p, errs, nil
}

// handlePolicyForm previews (htmx, or the preview button) or saves.
func (s *Server) handlePolicyForm(c echo.Context) error {
	if err := c.Request().ParseForm(); err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "The form could not be read.")
	}
	p, errs, err := s.parsePolicyDraft(c)
	if err != nil {
		return err
	}
	preview := c.FormValue("action") == "preview"
	if len(errs) == 0 && !preview {
		if err := s.db.SetPolicies(c.Request().Context(), currentUser(c), p); err != nil {
			return err
		}
		s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The policies have been saved; they apply to new bookings."))
		return redirect(c, "/admin/policies")
	}
	ed, err := s.policyEditor(c, p, c.Request().PostForm, errs)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if len(errs) > 0 {
		status = http.StatusBadRequest
	}
	if isHTMX(c) {
		return s.render(c, status, templates.PolicyPreviewView(ed))
	}
	return s.render(c, status, templates.PolicyPage(ed))
}
