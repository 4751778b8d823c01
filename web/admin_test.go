package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
)

// A customer gets 403 on every admin route, page or API — the table is the
// router's own list, so a new admin route is covered without editing this.
func TestCustomerForbiddenOnEveryAdminRoute(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, tok := e.apiToken("c@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("c@example.com", storetest.Password)
	n := 0
	for _, r := range e.web.echo.Routes() {
		if !strings.HasPrefix(r.Path, "/admin") && !strings.HasPrefix(r.Path, "/api/v1/admin") {
			continue
		}
		path := strings.NewReplacer(":id", "1").Replace(r.Path)
		n++
		if strings.HasPrefix(path, "/api/") {
			if st, body := e.apiCall(r.Method, path, tok, `{}`); st != http.StatusForbidden {
				t.Errorf("customer token %s %s = %d %s", r.Method, path, st, body)
			}
			continue
		}
		var p page
		if r.Method == http.MethodGet {
			p = b.get(path)
		} else {
			p = b.post(path, url.Values{})
		}
		if p.status != http.StatusForbidden {
			t.Errorf("customer session %s %s = %d", r.Method, path, p.status)
		}
	}
	if n < 15 {
		t.Fatalf("only %d admin routes found", n)
	}
}

func TestPolicyEditorAndAudit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	_, cust := e.apiToken("c@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	p := b.get("/admin/policies")
	if p.status != 200 || !strings.Contains(p.body, `data-testid="global.min_duration_hours"`) || !strings.Contains(p.body, `data-testid="preview-a100-80g"`) {
		t.Fatalf("editor = %d", p.status)
	}
	form := editorForm(gpuportal.DefaultPolicies())
	// Invalid: field-level errors, nothing saved.
	bad := cloneValues(form)
	bad.Set("global.spot_notice_seconds", "3")
	bad.Set("global.off_peak[0].to_hour", "25")
	bad.Set("models.h100-80g.reservable_percent", "abc")
	if p := b.post("/admin/policies", bad); p.status != http.StatusBadRequest || !strings.Contains(p.body, `data-testid="error-global.spot_notice_seconds"`) ||
		!strings.Contains(p.body, `data-testid="error-global.off_peak[0].to_hour"`) || !strings.Contains(p.body, `data-testid="error-models.h100-80g.reservable_percent"`) {
		i := strings.Index(p.body, "problems")
		t.Fatalf("invalid form = %d %s", p.status, p.body[i:min(len(p.body), i+1500)])
	}
	if pol, _ := e.db.Policies(t.Context()); pol.Global.SpotNoticeSeconds != 120 {
		t.Fatal("invalid policies saved")
	}
	// Preview does not save.
	prev := cloneValues(form)
	prev.Set("global.off_peak[1].discount_percent", "50")
	prev.Set("action", "preview")
	if p := b.post("/admin/policies", prev); p.status != 200 {
		t.Fatalf("preview = %d", p.status)
	}
	if pol, _ := e.db.Policies(t.Context()); pol.Global.OffPeak[1].DiscountPercent != 20 {
		t.Fatal("preview saved")
	}
	// Save: min duration 6 for the A100.
	good := cloneValues(form)
	good.Set("models.a100-80g.min_duration_hours", "6")
	good.Set("action", "save")
	if p := b.post("/admin/policies", good); p.status != http.StatusSeeOther {
		t.Fatalf("save = %d %s", p.status, p.body)
	}
	if st, body := e.apiCall("POST", "/api/v1/reservations", cust, bookBody("a100-80g", 1, at(1, 10), at(1, 14))); st != http.StatusUnprocessableEntity || !strings.Contains(body, "6 hours") {
		t.Fatalf("4-hour booking under a 6-hour minimum = %d %s", st, body)
	}
	// The audit log shows old → new.
	p = b.get("/admin/audit?action=policies")
	if !strings.Contains(p.body, `data-testid="audit-policies.update"`) || !strings.Contains(p.body, "admin@example.com") || !strings.Contains(p.body, "min_duration_hours&#34;:6") {
		t.Fatalf("audit page:\n%s", p.body)
	}
	_, admin := e.apiToken("admin2@example.com", gpuportal.RoleAdmin)
	st, body := e.apiCall("GET", "/api/v1/admin/audit?action=policies", admin, "")
	if st != 200 || !strings.Contains(body, `"old":{"global"`) || !strings.Contains(body, `"a100-80g":{"min_duration_hours":6}`) {
		t.Fatalf("audit API = %d %s", st, body)
	}
	// The overview renders with the fleet.
	if p := b.get("/admin"); !strings.Contains(p.body, `data-testid="gpu-states"`) || !strings.Contains(p.body, `data-testid="revenue"`) {
		t.Fatal("overview missing")
	}
}

// editorForm is the editor's form for a policies document.
func editorForm(p gpuportal.Policies) url.Values {
	v := url.Values{}
	for _, name := range policyInts {
		n := *policyIntPtr(&p.Global, name)
		if strings.HasSuffix(name, "_fen") {
			v.Set("global."+name, gpuportal.Fen(n).Decimal()) // entered in yuan
			continue
		}
		v.Set("global."+name, itoa(n))
	}
	for i, w := range p.Global.OffPeak {
		f := "global.off_peak[" + itoa(i) + "]"
		v[f+".days"] = w.Days
		v.Set(f+".from_hour", itoa(w.FromHour))
		v.Set(f+".to_hour", itoa(w.ToHour))
		v.Set(f+".discount_percent", itoa(w.DiscountPercent))
	}
	for i, tr := range p.Global.CancellationTiers {
		f := "global.cancellation_tiers[" + itoa(i) + "]"
		v.Set(f+".min_hours_before", itoa(tr.MinHoursBefore))
		v.Set(f+".fee_percent", itoa(tr.FeePercent))
	}
	return v
}

func itoa(n int) string { return strconv.Itoa(n) }

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// An admin changes the A100's minimum duration and the night discount in
// the editor; a customer then sees the new price on the calendar and is
// refused a booking shorter than the new minimum; the audit log shows both
// changes.
func TestBrowserPolicyChange(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	login := func(email string) {
		t.Helper()
		run(
			chromedp.Navigate(e.srv.URL+"/login"),
			chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), email),
			chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), storetest.Password),
			chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"], [data-testid="admin-overview"]`)),
		)
	}
	setField := func(testid, value string) chromedp.Action[chromedp.Void] {
		return chromedp.SetValue(chromedp.CSS(`[data-testid="`+testid+`"]`), value)
	}
	login("admin@example.com")
	run(
		chromedp.Navigate(e.srv.URL+"/admin/policies"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="policy-form"]`)),
		chromedp.Click(chromedp.CSS(`details.override summary`)),
		setField("models.a100-80g.min_duration_hours", "6"),
		chromedp.Click(chromedp.CSS(`[data-testid="save-policies"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		// Remove this page's flash, so the wait below sees the next page's.
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('[data-testid="flash"]').forEach(e => e.remove())`),
		setField("global.off_peak[0].discount_percent", "50"),
		chromedp.Click(chromedp.CSS(`[data-testid="save-policies"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="account-menu-open"]`)), // logging out is in the account's menu
		chromedp.Click(chromedp.CSS(`[data-testid="logout"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-login"]`)),
	)
	login("alice@example.com")
	run(
		chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1&week=2026-12-01"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="calendar-grid"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="slot-2026-12-01T02:00"] .price`); got != "¥4.00" {
		t.Fatalf("night price after the change = %q; want ¥4.00 (−50%%)", got)
	}
	run(chromedp.Click(chromedp.CSS(`[data-testid="slot-2026-12-01T10:00"]`)))
	waitJS(t, ctx, `(document.querySelector('[data-testid="quote-hint"]') || {textContent: ""}).textContent.includes("last hour")`)
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="slot-2026-12-01T13:00"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="quote-error"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="quote-error"]`); !strings.Contains(got, "minimum booking is 6 hours") {
		t.Fatalf("4-hour quote = %q", got)
	}
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="account-menu-open"]`)), // logging out is in the account's menu
		chromedp.Click(chromedp.CSS(`[data-testid="logout"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-login"]`)),
	)
	login("admin@example.com")
	run(
		chromedp.Navigate(e.srv.URL+"/admin/audit?action=policies"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit"]`)),
	)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="audit-policies.update"]').length`))
	if err != nil || n != 2 {
		t.Fatalf("audit entries for the two changes: %d, %v", n, err)
	}
	// (issue 28) Each says what changed, field by field, and in words.
	diffs, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('[data-testid="audit-policies.update"] [data-testid="audit-diff"]')].map(d => d.innerText).join(" | ")`))
	if err != nil || !strings.Contains(diffs, "models.a100-80g.min_duration_hours — → 6") || !strings.Contains(diffs, "discount_percent 30 → 50") || strings.Count(diffs, "→") > 6 {
		t.Fatalf("audit diffs %q (%v); want the fields changed, old → new", diffs, err)
	}
	if got := textOf(t, ctx, `[data-testid="audit-policies.update"] td:nth-child(3)`); !strings.Contains(got, "Policies changed") {
		t.Fatalf("audit action %q; want it in words", got)
	}
}

// The fleet page opens with the fleet at a glance and asks before a
// drain; the outbox says which channels are not configured and how to
// configure them; the browser's own favicon request is answered.
func TestFleetSummaryOutboxChannelsFavicon(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 2, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	if err := e.db.SetDrain(t.Context(), &gpuportal.User{ID: 1, Role: gpuportal.RoleAdmin}, "a-2", true); err != nil {
		t.Fatal(err)
	}
	p := b.get("/admin/nodes")
	if !strings.Contains(p.body, "2 nodes: 1 online, 1 draining, 0 offline") || !strings.Contains(p.body, "16 GPUs, 16 healthy, 0 out of service") {
		t.Fatalf("fleet summary missing:\n%s", p.body)
	}
	if p := b.get("/admin/nodes/a-1"); !strings.Contains(p.body, `data-confirm="Drain node a-1.example?`) {
		t.Fatal("draining a node does not ask first")
	}
	e.db.Channels = map[string]bool{gpuportal.ChannelEmail: true}
	p = b.get("/admin/notifications")
	if strings.Contains(p.body, `data-testid="email-off"`) || !strings.Contains(p.body, `data-testid="sms-off"`) || !strings.Contains(p.body, "PORTAL_SMS_SECRET") {
		t.Fatalf("outbox with email on and SMS off:\n%s", p.body)
	}
	resp, err := http.Get(e.srv.URL + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("favicon: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
