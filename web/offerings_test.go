package web

import (
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

type offeringJSON struct {
	Start        string `json:"start"`
	End          string `json:"end"`
	Count        int    `json:"count"`
	Total        int64  `json:"total_fen"`
	ListTotal    int64  `json:"list_total_fen"`
	OffPeakHours int    `json:"off_peak_hours"`
	Cancellation []struct {
		From       string `json:"from"`
		FeePercent int    `json:"fee_percent"`
	} `json:"cancellation"`
}

// "8 H100 for 48 h in the next two weeks, cheapest": the API answers with
// priced windows; booking the first is an ordinary booking at that price;
// bad searches are 4xx naming the field.
func TestOfferingsAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 2, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	q := url.Values{"model": {"h100-80g"}, "region": {"cd-1"}, "count": {"8"}, "duration_hours": {"48"}, "earliest": {at(0, 0)}, "latest_end": {at(14, 0)}}
	st, body := e.apiCall("GET", "/api/v1/offerings?"+q.Encode(), "", "")
	if st != http.StatusOK {
		t.Fatalf("offerings = %d %s", st, body)
	}
	var list []offeringJSON
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 10 {
		t.Fatalf("offerings: %v, %d: %s", err, len(list), body)
	}
	for k := 1; k < len(list); k++ {
		if list[k].Total < list[k-1].Total {
			t.Fatalf("not cheapest first: %s", body)
		}
	}
	// The cheapest 48 h contain a weekend: off-peak hours and a saving.
	if list[0].OffPeakHours == 0 || list[0].Total >= list[0].ListTotal || len(list[0].Cancellation) == 0 {
		t.Errorf("cheapest = %+v", list[0])
	}
	st, body = e.apiCall("POST", "/api/v1/reservations", alice, bookBody("h100-80g", 8, list[0].Start, list[0].End))
	if r := decodeReservation(t, body); st != http.StatusCreated || r.Price != list[0].Total {
		t.Fatalf("book the cheapest = %d %s; want its total %d", st, body, list[0].Total)
	}
	// By start: the earliest window first.
	q.Set("sort", "start")
	q.Set("limit", "3")
	_, body = e.apiCall("GET", "/api/v1/offerings?"+q.Encode(), "", "")
	var byStart []offeringJSON
	_ = json.Unmarshal([]byte(body), &byStart)
	if len(byStart) != 3 || byStart[0].Start >= byStart[1].Start {
		t.Errorf("by start: %s", body)
	}
	for _, bad := range []struct{ key, value, field string }{
		{"count", "x", "count"}, {"count", "0", "count"}, {"duration_hours", "2", "duration_hours"},
		{"duration_hours", "400", "duration_hours"}, {"sort", "cheap", "sort"}, {"limit", "1000", "limit"},
		{"earliest", "tomorrow", "earliest"}, {"latest_end", at(0, 12), "latest_end"}, {"model", "h200", "model"},
	} {
		b := url.Values{}
		for k, v := range q {
			b[k] = v
		}
		b.Set(bad.key, bad.value)
		st, body := e.apiCall("GET", "/api/v1/offerings?"+b.Encode(), "", "")
		if st < 400 || st >= 500 || !strings.Contains(body, `"field":"`+bad.field+`"`) {
			t.Errorf("%s=%s: %d %s", bad.key, bad.value, st, body)
		}
	}
}

// A full window's 409 carries the nearest windows that fit and the most
// GPUs free.
func TestFullWindowRefusalCarriesOfferings(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	if st, body := e.apiCall("POST", "/api/v1/reservations", alice, bookBody("h100-80g", 6, at(1, 10), at(1, 14))); st != http.StatusCreated {
		t.Fatal(body)
	}
	st, body := e.apiCall("POST", "/api/v1/reservations", bob, bookBody("h100-80g", 4, at(1, 10), at(1, 14)))
	if st != http.StatusConflict || errorCode(t, body) != gpuportal.ECAPACITY {
		t.Fatalf("full window = %d %s", st, body)
	}
	var refusal struct {
		Offerings []offeringJSON `json:"offerings"`
		MostFree  int            `json:"most_free"`
	}
	_ = json.Unmarshal([]byte(body), &refusal)
	if refusal.MostFree != 2 || len(refusal.Offerings) == 0 {
		t.Fatalf("refusal = %s", body)
	}
	if !sameTime(refusal.Offerings[0].Start, at(1, 6)) || !sameTime(refusal.Offerings[1].Start, at(1, 14)) {
		t.Errorf("nearest earlier and later = %s, %s; want %s, %s", refusal.Offerings[0].Start, refusal.Offerings[1].Start, at(1, 6), at(1, 14))
	}
}

// Extension through the API: the options, a refusal past the full hour
// (409, nothing changed), the extension and its price.
func TestExtensionAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	_, body := e.apiCall("POST", "/api/v1/reservations", alice, bookBody("h100-80g", 4, at(1, 10), at(1, 14)))
	r := decodeReservation(t, body)
	e.apiCall("POST", "/api/v1/reservations", bob, bookBody("h100-80g", 8, at(1, 17), at(1, 21)))
	path := fmt.Sprintf("/api/v1/reservations/%d", r.ID)
	st, body := e.apiCall("GET", path+"/extension", alice, "")
	var ext struct {
		MaxHours  int    `json:"max_hours"`
		LimitedBy string `json:"limited_by"`
		Options   []struct {
			Hours int    `json:"hours"`
			End   string `json:"end"`
			Price int64  `json:"price_fen"`
		} `json:"options"`
	}
	if err := json.Unmarshal([]byte(body), &ext); st != http.StatusOK || err != nil || ext.MaxHours != 3 || ext.LimitedBy != "capacity" || !sameTime(ext.Options[2].End, at(1, 17)) {
		t.Fatalf("extension = %d %s", st, body)
	}
	if st, _ := e.apiCall("GET", path+"/extension", bob, ""); st != http.StatusNotFound {
		t.Errorf("bob reads alice's extension: %d", st)
	}
	if st, body := e.apiCall("POST", path+"/extend", alice, `{"hours":4}`); st != http.StatusConflict || errorCode(t, body) != gpuportal.ECAPACITY {
		t.Errorf("into the full hour = %d %s", st, body)
	}
	for _, bad := range []string{`{"hours":0}`, `{"hours":"two"}`, `{}`, `{"hours":2,"x":1}`, `[`} {
		if st, body := e.apiCall("POST", path+"/extend", alice, bad); st != http.StatusBadRequest {
			t.Errorf("extend %s = %d %s", bad, st, body)
		}
	}
	if st, body := e.apiCall("POST", path+"/extend", alice, `{"hours":400}`); st != http.StatusUnprocessableEntity {
		t.Errorf("past the maximum = %d %s", st, body)
	}
	_, body = e.apiCall("GET", path, alice, "")
	if got := decodeReservation(t, body); got.Price != r.Price {
		t.Fatalf("refusals changed the price: %d → %d", r.Price, got.Price)
	}
	st, body = e.apiCall("POST", path+"/extend", alice, `{"hours":2}`)
	got := decodeReservation(t, body)
	if st != http.StatusOK || got.Price != r.Price+ext.Options[1].Price {
		t.Errorf("extend = %d %s", st, body)
	}
	if end := decodeObject(t, body)["end"].(string); end != "2026-12-02T08:00:00Z" {
		t.Errorf("new end %s; want 16:00 Shanghai", end)
	}
}

// A flexible waitlist entry through the API: joined with a range, its
// position and the earliest it could start; a cancellation books it.
func TestFlexibleWaitlistAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	_, body := e.apiCall("POST", "/api/v1/reservations", alice, bookBody("h100-80g", 8, at(1, 0), at(2, 0)))
	full := decodeReservation(t, body)
	join := fmt.Sprintf(`{"model":"h100-80g","region":"cd-1","count":8,"duration_hours":8,"earliest":%q,"latest_end":%q}`, at(1, 0), at(2, 0))
	st, body := e.apiCall("POST", "/api/v1/waitlist", bob, join)
	entry := decodeObject(t, body)
	if st != http.StatusCreated || entry["flexible"] != true || entry["position"] != 1.0 || entry["earliest_possible_start"] != "2026-12-02T16:00:00Z" {
		t.Fatalf("join = %d %s", st, body)
	}
	for _, bad := range []string{
		strings.Replace(join, `"duration_hours":8`, `"duration_hours":2`, 1),
		strings.Replace(join, `"duration_hours":8`, `"duration_hours":30`, 1),
		strings.Replace(join, `"count":8`, `"count":0`, 1),
		strings.Replace(join, `"earliest"`, `"start":"`+at(1, 0)+`","earliest"`, 1),
		strings.Replace(join, at(2, 0), "soon", 1),
	} {
		if st, body := e.apiCall("POST", "/api/v1/waitlist", bob, bad); st < 400 || st >= 500 {
			t.Errorf("bad join %s = %d %s", bad, st, body)
		}
	}
	e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", full.ID), alice, "")
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, body = e.apiCall("GET", "/api/v1/waitlist", bob, "")
	if !strings.Contains(body, `"status":"claimed"`) || !strings.Contains(body, `"flexible":true`) {
		t.Fatalf("after the cancellation: %s", body)
	}
	_, body = e.apiCall("GET", "/api/v1/reservations", bob, "")
	if !strings.Contains(body, `"start":"2026-12-01T16:00:00Z"`) || !strings.Contains(body, `"end":"2026-12-02T00:00:00Z"`) {
		t.Errorf("bob's booking is not the range's first 8 hours: %s", body)
	}
	_, body = e.apiCall("GET", "/api/v1/notifications", bob, "")
	if !strings.Contains(body, `"kind":"waitlist_booked"`) {
		t.Errorf("bob was not told: %s", body)
	}
}

// sameTime compares two RFC 3339 times whatever their offsets.
func sameTime(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339, a)
	tb, errB := time.Parse(time.RFC3339, b)
	return errA == nil && errB == nil && ta.Equal(tb)
}
