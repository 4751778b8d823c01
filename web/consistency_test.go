package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 12, item 2) The spot price a customer sees — API, home page,
// launch form for the model chosen — is the one a launch is charged.
func TestOneSpotPriceEverywhere(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 8)
	admin := storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	pol := gpuportal.DefaultPolicies()
	pol.Global.SpotDiscountPercent = 80
	sixty := 60
	pol.Models = map[string]gpuportal.PolicyOverride{"h100-80g": {SpotDiscountPercent: &sixty}}
	if err := e.db.SetPolicies(context.Background(), admin, pol); err != nil {
		t.Fatal(err)
	}
	models, _ := e.db.Models(context.Background())
	want := map[string]gpuportal.Fen{}
	for _, m := range models {
		want[m.ID] = pol.SpotPriceOf(m)
	}
	if want["a100-80g"] == gpuportal.SpotPrice(models[0].ListPrice, 70) {
		t.Fatal("the test's policy does not change the price")
	}

	_, body := e.apiCall(http.MethodGet, "/api/v1/models", "", "")
	var api []struct {
		ID   string        `json:"id"`
		Spot gpuportal.Fen `json:"spot_price_per_gpu_hour_fen"`
	}
	if err := json.Unmarshal([]byte(body), &api); err != nil {
		t.Fatal(err)
	}
	for _, m := range api {
		if m.Spot != want[m.ID] {
			t.Errorf("GET /models: %s spot %d; want %d", m.ID, m.Spot, want[m.ID])
		}
	}
	home := e.browser().get("/")
	for id, price := range want {
		row := home.body[strings.Index(home.body, `data-testid="model-`+id+`"`):]
		row = row[:strings.Index(row, "</tr>")]
		if !strings.Contains(row, price.String()) {
			t.Errorf("home page row of %s lacks %s: %s", id, price.String(), row)
		}
	}

	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	for id, price := range want {
		st, body := e.apiCall(http.MethodPost, "/api/v1/instances", tok, fmt.Sprintf(`{"kind":"spot","model":%q,"region":"cd-1","count":1,"command":"x"}`, id))
		if st != http.StatusCreated || !strings.Contains(body, fmt.Sprintf(`"price_per_gpu_hour_fen":%d`, price)) {
			t.Errorf("launch %s = %d %s; want charged %d", id, st, body, price)
		}
	}

	// The launch form follows the model and count chosen.
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if p := b.get("/instances"); !strings.Contains(p.body, want["a100-80g"].String()) {
		t.Errorf("the launch form does not show the A100 spot price %s", want["a100-80g"].String())
	}
	q := url.Values{"kind": {"spot"}, "model": {"h100-80g"}, "region": {"cd-1"}, "count": {"4"}, "command": {"python train.py"}}
	p := b.get("/instances/launch-form?" + q.Encode())
	if p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="launch-form"`) || strings.Contains(p.body, "<html") {
		t.Fatalf("launch form fragment = %d", p.status)
	}
	if !strings.Contains(p.body, want["h100-80g"].String()) || !strings.Contains(p.body, (want["h100-80g"]*4).String()) || !strings.Contains(p.body, "python train.py") {
		t.Errorf("the H100 form lacks its spot price %s, 4 GPUs' %s or the command typed:\n%s", want["h100-80g"].String(), (want["h100-80g"] * 4).String(), p.body)
	}
	if strings.Contains(p.body, "Spot — "+want["a100-80g"].String()) {
		t.Error("the H100 form still shows the A100 price")
	}
}

// (item 3) A cancellation or booking made through the HTML forms kicks
// the scheduler exactly like the JSON API: the kick comes from the store.
func TestFormsKickTheScheduler(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	drain := func() {
		for {
			select {
			case <-e.db.Kicks():
			default:
				return
			}
		}
	}
	kicked := func() bool {
		select {
		case <-e.db.Kicks():
			return true
		case <-time.After(time.Second):
			return false
		}
	}
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	b.get("/calendar")
	drain()
	p := b.post("/reservations", url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "count": {"2"}, "start": {"2026-12-02T10:00"}, "end": {"2026-12-02T14:00"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("book form = %d %s", p.status, p.body)
	}
	if !kicked() {
		t.Fatal("a booking through the form did not kick the scheduler")
	}
	list, _ := e.db.Reservations(context.Background(), mustUser(t, e.db, "alice@example.com"), storeFilter())
	b.get(fmt.Sprintf("/reservations/%d/cancel", list[0].ID))
	drain()
	if p := b.post(fmt.Sprintf("/reservations/%d/cancel", list[0].ID), nil); p.status != http.StatusSeeOther {
		t.Fatalf("cancel form = %d", p.status)
	}
	if !kicked() {
		t.Fatal("a cancellation through the form did not kick the scheduler")
	}
	// Reading kicks nothing.
	drain()
	b.get("/reservations")
	select {
	case <-e.db.Kicks():
		t.Fatal("a page view kicked the scheduler")
	default:
	}
}

// (item 11) Interruption rates are computed at most once a minute per
// model, region and count.
func TestInterruptionRatesAreCached(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	get := func() string {
		st, body := e.apiCall(http.MethodGet, "/api/v1/interruption-rates?model=a100-80g&region=cd-1&count=2", "", "")
		if st != 200 {
			t.Fatalf("rates = %d %s", st, body)
		}
		return body
	}
	first := get()
	// A booking that changes safe-until does not show until the minute is up.
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	if st, body := e.apiCall(http.MethodPost, "/api/v1/reservations", tok, bookBody("a100-80g", 8, at(0, 10), at(0, 14))); st != 201 {
		t.Fatalf("book = %d %s", st, body)
	}
	if get() != first {
		t.Fatal("the rates were computed again within the minute")
	}
	e.wall.Advance(ratesTTL)
	if get() == first {
		t.Fatal("the cached rates outlived their minute")
	}
	if st, _ := e.apiCall(http.MethodGet, "/api/v1/interruption-rates?model=nope&region=cd-1", "", ""); st != http.StatusBadRequest && st != http.StatusNotFound {
		t.Fatalf("unknown model = %d", st)
	}
	if n := len(e.web.ratesCache.entries); n != 1 {
		t.Fatalf("%d cache entries; errors must not be cached", n)
	}
}
