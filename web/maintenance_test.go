package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 49) An admin plans maintenance from the page: a window that ends
// before it starts is refused on its form with what was typed kept; the
// check lists the booking it would cancel and changes nothing; planned,
// the window is listed with its bar and the booking cancelled; the
// customer's calendar greys its hours with the reason; "End now" ends it.
func TestMaintenanceFromThePage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "n", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	loc := e.web.cfg.Location
	start := storetest.Epoch.Add(26 * time.Hour).In(loc).Truncate(time.Hour)
	st, body := e.apiCall("POST", "/api/v1/reservations", tok, `{"model":"a100-80g","region":"cd-1","count":8,"start":"`+start.Format(time.RFC3339)+`","end":"`+start.Add(4*time.Hour).Format(time.RFC3339)+`"}`)
	if st != http.StatusCreated {
		t.Fatalf("book = %d %s", st, body)
	}
	admin := e.browser()
	admin.login("admin@example.com", storetest.Password)
	if p := admin.get("/admin/maintenance"); p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="no-maintenance"`) {
		t.Fatalf("/admin/maintenance = %d", p.status)
	}
	form := url.Values{"target": {"region:cd-1"}, "start": {start.Add(time.Hour).Format("2006-01-02T15:04")}, "end": {start.Format("2006-01-02T15:04")}, "reason": {"power supply replacement"}}
	if p := admin.post("/admin/maintenance", form); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, `data-testid="error-end"`) || !strings.Contains(p.body, "power supply replacement") {
		t.Fatalf("a window ending before it starts = %d", p.status)
	}
	form.Set("start", start.Add(time.Hour).Format("2006-01-02T15:04"))
	form.Set("end", start.Add(3*time.Hour).Format("2006-01-02T15:04"))
	form.Set("check", "1")
	p := admin.post("/admin/maintenance", form)
	if p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="maintenance-check"`) || !strings.Contains(p.body, "/reservations/1") {
		t.Fatalf("the check = %d", p.status)
	}
	if st, body := e.apiCall("GET", "/api/v1/reservations/1", tok, ""); !strings.Contains(body, `"status":"confirmed"`) {
		t.Fatalf("the check changed the booking: %d %s", st, body)
	}
	form.Del("check")
	if p := admin.post("/admin/maintenance", form); p.status != http.StatusSeeOther {
		t.Fatalf("plan = %d %s", p.status, p.body)
	}
	p = admin.get("/admin/maintenance")
	if !strings.Contains(p.body, `data-testid="maintenance-window"`) || !strings.Contains(p.body, "timeline-bar") || !strings.Contains(p.body, "power supply replacement") {
		t.Fatal("the window is not listed")
	}
	if st, body := e.apiCall("GET", "/api/v1/reservations/1", tok, ""); !strings.Contains(body, `"status":"cancelled"`) {
		t.Fatalf("the booking the window leaves no room for = %d %s", st, body)
	}
	cal := e.browser()
	cal.login("alice@example.com", storetest.Password)
	week := start.Format("2006-01-02")
	if p := cal.get("/calendar?model=a100-80g&region=cd-1&week=" + week); !strings.Contains(p.body, `data-maintenance="power supply replacement"`) {
		t.Fatal("the calendar does not grey the window's hours")
	}
	windows, err := e.db.Maintenances(t.Context())
	if err != nil || len(windows) != 1 {
		t.Fatalf("windows = %+v, %v", windows, err)
	}
	// (Its id: a dry run's rolled-back insert still takes a number on
	// PostgreSQL.)
	if p := admin.post(fmt.Sprintf("/admin/maintenance/%d/end", windows[0].ID), nil); p.status != http.StatusSeeOther {
		t.Fatalf("end now = %d", p.status)
	}
	if p := admin.get("/admin/maintenance"); strings.Contains(p.body, `data-testid="end-maintenance"`) {
		t.Fatal("an ended window still offers End now")
	}
}
