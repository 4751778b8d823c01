package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	ics "github.com/arran4/golang-ical"
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/store/storetest"
)

// day0 is Tuesday 2026-12-01 00:00 in Shanghai; test clocks start a day
// before (storetest.Epoch is Monday 08:00 Shanghai).
var day0 = time.Date(2026, 12, 1, 0, 0, 0, 0, storetest.Shanghai)

func at(days, hour int) string {
	return day0.AddDate(0, 0, days).Add(time.Duration(hour) * time.Hour).Format(time.RFC3339)
}

func bookBody(model string, count int, start, end string) string {
	return fmt.Sprintf(`{"model":%q,"region":"cd-1","count":%d,"start":%q,"end":%q}`, model, count, start, end)
}

type reservationJSON struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
	Price  int64  `json:"price_fen"`
	Count  int    `json:"count"`
	Quote  struct {
		Hours []struct {
			PricePerGPU int64 `json:"price_per_gpu_hour_fen"`
		} `json:"hours"`
	} `json:"quote"`
}

func decodeReservation(t *testing.T, body string) reservationJSON {
	t.Helper()
	var r reservationJSON
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return r
}

func (e *testEnv) totalReserved() int {
	e.t.Helper()
	var n int
	slots, err := e.db.Availability(context.Background(), "a100-80g", "cd-1", day0, day0.AddDate(0, 0, 14))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range slots {
		n += s.Reserved
	}
	return n
}

func TestBookListCancel(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 2, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)

	// 2 GPUs Wed 06:00–10:00 Shanghai: two night hours at −30 %, two at list.
	status, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 2, at(1, 6), at(1, 10)))
	if status != http.StatusCreated {
		t.Fatalf("book = %d %s", status, body)
	}
	r := decodeReservation(t, body)
	if r.Status != "confirmed" || r.Price != 2*(560+560+800+800) || len(r.Quote.Hours) != 4 {
		t.Fatalf("reservation = %+v", r)
	}
	status, body = e.apiCall("GET", "/api/v1/reservations", tok, "")
	if status != 200 || !strings.Contains(body, fmt.Sprintf(`"id":%d`, r.ID)) {
		t.Fatalf("list = %d %s", status, body)
	}
	status, body = e.apiCall("GET", fmt.Sprintf("/api/v1/reservations/%d", r.ID), tok, "")
	if status != 200 || !strings.Contains(body, `"start":"2026-12-01T22:00:00Z"`) {
		t.Fatalf("get = %d %s", status, body)
	}
	// The availability shows the 2 GPUs taken.
	status, body = e.apiCall("GET", "/api/v1/availability?model=a100-80g&region=cd-1&from="+at(1, 5)+"&to="+at(1, 11), "", "")
	var avail struct {
		Slots []gpuportal.Slot `json:"slots"`
	}
	_ = json.Unmarshal([]byte(body), &avail)
	if status != 200 || len(avail.Slots) != 6 || avail.Slots[0].Free != 16 || avail.Slots[1].Free != 14 || avail.Slots[1].Reserved != 2 ||
		!avail.Slots[1].OffPeak || avail.Slots[1].PricePerGPU != 560 || avail.Slots[4].OffPeak || avail.Slots[5].Free != 16 {
		t.Fatalf("availability = %d %+v", status, avail.Slots)
	}

	// More than 24 h ahead: cancelling is free; the ledger nets to zero and
	// the capacity is free at once.
	status, body = e.apiCall("GET", fmt.Sprintf("/api/v1/reservations/%d/cancellation", r.ID), tok, "")
	if status != 200 || !strings.Contains(body, `"fee_fen":0`) || !strings.Contains(body, fmt.Sprintf(`"refund_fen":%d`, r.Price)) {
		t.Fatalf("preview = %d %s", status, body)
	}
	status, body = e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", r.ID), tok, "")
	if status != 200 || !strings.Contains(body, `"status":"cancelled"`) || !strings.Contains(body, `"fee_fen":0`) {
		t.Fatalf("cancel = %d %s", status, body)
	}
	if n := e.totalReserved(); n != 0 {
		t.Fatalf("%d GPU-hours still reserved after cancelling", n)
	}
	if status, body := e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", r.ID), tok, ""); status != http.StatusConflict || errorCode(t, body) != gpuportal.ECONFLICT {
		t.Fatalf("second cancel = %d %s", status, body)
	}
	_, body = e.apiCall("GET", "/api/v1/ledger", tok, "")
	var ledger []struct {
		Kind   string `json:"kind"`
		Amount int64  `json:"amount_fen"`
	}
	_ = json.Unmarshal([]byte(body), &ledger)
	// After the test balance's credit: the charge, then its refund.
	if len(ledger) != 3 || ledger[0].Kind != "refund" || ledger[0].Amount != -r.Price || ledger[1].Kind != "reservation" || ledger[1].Amount != r.Price || ledger[2].Kind != "credit" {
		t.Fatalf("ledger = %s", body)
	}
}

func TestCancellationFeesByTier(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	u, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	// Book Wed 10:00–14:00 (list price, 4 × ¥8 = ¥32 per GPU).
	book := func() reservationJSON {
		status, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 1, at(1, 10), at(1, 14)))
		if status != http.StatusCreated {
			t.Fatalf("book = %d %s", status, body)
		}
		return decodeReservation(t, body)
	}
	start := day0.AddDate(0, 0, 1).Add(10 * time.Hour)
	r := book()
	e.clock.Set(start.Add(-5 * time.Hour)) // 5 h before: 50 %
	status, body := e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", r.ID), tok, "")
	if status != 200 || !strings.Contains(body, `"fee_fen":1600`) || !strings.Contains(body, `"refund_fen":1600`) {
		t.Fatalf("cancel 5 h before = %d %s", status, body)
	}
	entries, total, _ := e.db.Ledger(context.Background(), u.ID, 0)
	if total != storetest.TestBalance-1600 || len(entries) != 4 || entries[0].Kind != "cancellation_fee" {
		t.Fatalf("ledger total %d entries %+v", total, entries)
	}
	e.clock.Set(storetest.Epoch)
	r = book()
	e.clock.Set(start.Add(-time.Hour)) // 1 h before: 100 %
	if status, body := e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", r.ID), tok, ""); status != 200 || !strings.Contains(body, `"fee_fen":3200`) {
		t.Fatalf("cancel 1 h before = %d %s", status, body)
	}
}

func TestLateCancellationsBlockBooking(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	for i := 0; i < 4; i++ {
		e.clock.Set(storetest.Epoch.Add(time.Duration(i) * time.Hour))
		start := e.clock.Now().Truncate(time.Hour).Add(3 * time.Hour)
		status, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 1, start.Format(time.RFC3339), start.Add(4*time.Hour).Format(time.RFC3339)))
		if status != http.StatusCreated {
			t.Fatalf("book %d = %d %s", i, status, body)
		}
		r := decodeReservation(t, body)
		if status, body := e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", r.ID), tok, ""); status != 200 || strings.Contains(body, `"fee_fen":0`) {
			t.Fatalf("late cancel %d = %d %s", i, status, body)
		}
	}
	status, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 1, at(3, 10), at(3, 14)))
	if status != http.StatusUnprocessableEntity || errorCode(t, body) != gpuportal.EPOLICY || !strings.Contains(body, `"field":"credit"`) ||
		!strings.Contains(body, "2026-12-30 08:00 (Asia/Shanghai)") || strings.Contains(body, "00Z") {
		t.Fatalf("booking after 4 late cancels = %d %s", status, body)
	}
	// 30 days after the first, the count drops to 3 and booking works again.
	e.clock.Set(storetest.Epoch.Add(30 * 24 * time.Hour))
	start := e.clock.Now().Add(24 * time.Hour)
	if status, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 1, start.Format(time.RFC3339), start.Add(4*time.Hour).Format(time.RFC3339))); status != http.StatusCreated {
		t.Fatalf("booking after the window = %d %s", status, body)
	}
}

func TestCapacityUnavailableNamesTheHour(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	if status, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 6, at(1, 12), at(1, 16))); status != 201 {
		t.Fatalf("first = %d %s", status, body)
	}
	status, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 3, at(1, 10), at(1, 14)))
	if status != http.StatusConflict || errorCode(t, body) != gpuportal.ECAPACITY || !strings.Contains(body, "2026-12-02 12:00") ||
		!strings.Contains(body, "2 free, 3 asked for") || !strings.Contains(body, "waitlist") {
		t.Fatalf("overlapping = %d %s", status, body)
	}
	// All or nothing: the free hours of the refused request were not taken.
	if n := e.totalReserved(); n != 6*4 {
		t.Fatalf("reserved GPU-hours = %d; want 24", n)
	}
	// The reservable share limits bookings too.
	_, adminTok := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	p := gpuportal.DefaultPolicies()
	p.Global.ReservablePercent = 50
	raw, _ := json.Marshal(p)
	if status, body := e.apiCall("PUT", "/api/v1/admin/policies", adminTok, string(raw)); status != 200 {
		t.Fatalf("policies = %d %s", status, body)
	}
	if status, _ := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 5, at(2, 12), at(2, 16))); status != http.StatusConflict {
		t.Fatalf("5 of 4 reservable GPUs = %d", status)
	}
}

func TestBadBookingInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	for _, tt := range []struct {
		name, body, code, field string
	}{
		{"unknown model", bookBody("v100", 1, at(1, 10), at(1, 14)), gpuportal.EINVALID, "model"},
		{"unknown region", strings.Replace(bookBody("a100-80g", 1, at(1, 10), at(1, 14)), "cd-1", "mars-1", 1), gpuportal.EINVALID, "region"},
		{"count 0", bookBody("a100-80g", 0, at(1, 10), at(1, 14)), gpuportal.EINVALID, "count"},
		{"count -1", bookBody("a100-80g", -1, at(1, 10), at(1, 14)), gpuportal.EINVALID, "count"},
		{"count 10^9", bookBody("a100-80g", 1_000_000_000, at(1, 10), at(1, 14)), gpuportal.EINVALID, "count"},
		{"count more than the fleet", bookBody("a100-80g", 9, at(1, 10), at(1, 14)), gpuportal.ECAPACITY, "start"},
		{"end before start", bookBody("a100-80g", 1, at(1, 14), at(1, 10)), gpuportal.EINVALID, "end"},
		{"start off the hour", bookBody("a100-80g", 1, "2026-12-02T10:30:00+08:00", at(1, 14)), gpuportal.EPOLICY, "start"},
		{"start in the past", bookBody("a100-80g", 1, at(-3, 10), at(-3, 14)), gpuportal.EPOLICY, "start"},
		{"too short", bookBody("a100-80g", 1, at(1, 10), at(1, 12)), gpuportal.EPOLICY, "duration"},
		{"absurd range", bookBody("a100-80g", 1, at(1, 10), "2099-01-01T00:00:00Z"), gpuportal.EPOLICY, "duration"},
		{"malformed JSON", `{"model":"a100-80g",`, gpuportal.EINVALID, ""},
		{"wrong type", `{"model":"a100-80g","region":"cd-1","count":"two","start":"` + at(1, 10) + `","end":"` + at(1, 14) + `"}`, gpuportal.EINVALID, "count"},
		{"bad time", bookBody("a100-80g", 1, "next tuesday", at(1, 14)), gpuportal.EINVALID, "start"},
	} {
		status, body := e.apiCall("POST", "/api/v1/reservations", tok, tt.body)
		if status < 400 || status >= 500 || errorCode(t, body) != tt.code || (tt.field != "" && !strings.Contains(body, `"field":"`+tt.field+`"`)) {
			t.Errorf("%s: %d %s; want %s on %q", tt.name, status, body, tt.code, tt.field)
		}
	}
	if list, _ := e.db.Reservations(context.Background(), &gpuportal.User{Role: gpuportal.RoleAdmin}, storeFilter()); len(list) != 0 {
		t.Fatalf("bad input created %d reservations", len(list))
	}
	if n := e.totalReserved(); n != 0 {
		t.Fatalf("bad input reserved %d GPU-hours", n)
	}
	// Bad availability and quote queries are 400s too.
	for _, q := range []string{
		"/api/v1/availability?model=a100-80g&region=cd-1&from=x&to=" + at(1, 0),
		"/api/v1/availability?model=a100-80g&region=cd-1&from=" + at(1, 0) + "&to=" + at(0, 0),
		"/api/v1/availability?model=a100-80g&region=cd-1&from=" + at(0, 0) + "&to=" + at(60, 0),
		"/api/v1/availability?model=nope&region=cd-1&from=" + at(0, 0) + "&to=" + at(1, 0),
		"/api/v1/quote?model=a100-80g&region=cd-1&count=x&start=" + at(1, 10) + "&end=" + at(1, 14),
		"/api/v1/reservations?status=weird",
		"/api/v1/reservations?limit=-4",
	} {
		if status, body := e.apiCall("GET", q, tok, ""); status != http.StatusBadRequest || errorCode(t, body) != gpuportal.EINVALID {
			t.Errorf("GET %s = %d %s", q, status, body)
		}
	}
}

func TestReservationsArePrivate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	_, body := e.apiCall("POST", "/api/v1/reservations", alice, bookBody("a100-80g", 1, at(1, 10), at(1, 14)))
	r := decodeReservation(t, body)
	for _, path := range []string{"", "/cancellation", "/ics"} {
		if status, body := e.apiCall("GET", fmt.Sprintf("/api/v1/reservations/%d%s", r.ID, path), bob, ""); status != http.StatusNotFound || errorCode(t, body) != gpuportal.ENOTFOUND {
			t.Errorf("bob GET %s = %d %s", path, status, body)
		}
	}
	if status, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", r.ID), bob, ""); status != http.StatusNotFound {
		t.Errorf("bob cancel = %d", status)
	}
	if _, body := e.apiCall("GET", "/api/v1/reservations", bob, ""); body != "[]\n" {
		t.Errorf("bob's list = %q", body)
	}
	if _, body := e.apiCall("GET", "/api/v1/ledger", bob, ""); strings.Contains(body, "reservation") {
		t.Errorf("bob's ledger = %q", body)
	}
	if status, _ := e.apiCall("GET", fmt.Sprintf("/api/v1/reservations/%d", r.ID), admin, ""); status != 200 {
		t.Errorf("admin GET = %d", status)
	}
	if status, _ := e.apiCall("GET", fmt.Sprintf("/api/v1/reservations/%d", r.ID), "", ""); status != http.StatusUnauthorized {
		t.Errorf("anonymous GET = %d", status)
	}
	if got, _ := e.db.Reservation(context.Background(), &gpuportal.User{Role: gpuportal.RoleAdmin}, r.ID); got.Status != "confirmed" {
		t.Errorf("status after bob's attempts = %s", got.Status)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	send := func(key, body string) (int, string, string) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/reservations", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(t, resp), resp.Header.Get("Idempotent-Replayed")
	}
	body := bookBody("a100-80g", 2, at(1, 10), at(1, 14))
	s1, b1, _ := send("k-1", body)
	s2, b2, replayed := send("k-1", body)
	if s1 != 201 || s2 != 201 || b1 != b2 || replayed != "true" {
		t.Fatalf("retry: %d %s / %d %s replayed=%q", s1, b1, s2, b2, replayed)
	}
	if n := e.totalReserved(); n != 2*4 {
		t.Fatalf("reserved GPU-hours = %d; want 8 (booked once)", n)
	}
	if s, b, _ := send("k-1", bookBody("a100-80g", 3, at(1, 10), at(1, 14))); s != http.StatusConflict || !strings.Contains(b, "different request") {
		t.Fatalf("same key, other body = %d %s", s, b)
	}
	// A refusal is an answer too: the retry gets the same 409.
	full := bookBody("a100-80g", 8, at(1, 10), at(1, 14))
	s3, b3, _ := send("k-2", full)
	s4, b4, _ := send("k-2", full)
	if s3 != http.StatusConflict || s4 != s3 || b3 != b4 {
		t.Fatalf("refusal replay: %d / %d", s3, s4)
	}
	// (issue 22, item 24) Concurrent duplicates book once, and every one
	// of them gets the first answer (they wait for it), not "still
	// running".
	var wg sync.WaitGroup
	type answer struct {
		status int
		body   string
	}
	answers := make(chan answer, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, b, _ := send("k-3", bookBody("a100-80g", 1, at(2, 10), at(2, 14)))
			answers <- answer{s, b}
		}()
	}
	wg.Wait()
	close(answers)
	first := ""
	for a := range answers {
		if a.status != 201 {
			t.Errorf("concurrent duplicate got %d %s", a.status, a.body)
		}
		if first == "" {
			first = a.body
		} else if a.body != first {
			t.Errorf("concurrent duplicates got different answers:\n%s\n%s", first, a.body)
		}
	}
	if n := e.totalReserved(); n != 2*4+4 {
		t.Fatalf("reserved GPU-hours = %d; want 12", n)
	}
}

func TestICS(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.with(func(c *Config) { c.PublicURL = "https://portal.example" })
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", 3, at(1, 10), at(1, 14)))
	r := decodeReservation(t, body)
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/reservations/%d/ics", e.srv.URL, r.ID), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/calendar") {
		t.Fatalf("ics: %v %v", resp, err)
	}
	cal, err := ics.ParseCalendar(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	events := cal.Events()
	if len(events) != 1 {
		t.Fatalf("%d events", len(events))
	}
	ev := events[0]
	start, err := ev.GetStartAt()
	if err != nil || !start.Equal(time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("DTSTART = %v %v", start, err)
	}
	if raw := ev.GetProperty(ics.ComponentPropertyDtStart).Value; !strings.HasSuffix(raw, "Z") {
		t.Fatalf("DTSTART %q is not UTC", raw)
	}
	end, _ := ev.GetEndAt()
	summary := ev.GetProperty(ics.ComponentPropertySummary).Value
	if !end.Equal(time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)) || !strings.Contains(summary, "3 × NVIDIA A100 80GB") || !strings.Contains(summary, "cd-1") {
		t.Fatalf("event = %v %q", end, summary)
	}
	// (issue 28) The words are the reader's: times in the portal's zone,
	// named, and the status in words; in Chinese for a Chinese reader.
	if d := ev.GetProperty(ics.ComponentPropertyDescription).Value; !strings.Contains(d, "2026-12-02 10:00 to 2026-12-02 14:00 (Asia/Shanghai)") || !strings.Contains(d, "Status: confirmed") {
		t.Fatalf("DESCRIPTION %q", d)
	}
	zhReq := req.Clone(t.Context())
	zhReq.Header.Set("Accept-Language", "zh-CN,zh;q=0.9")
	zhResp, err := http.DefaultClient.Do(zhReq)
	if err != nil {
		t.Fatal(err)
	}
	zhCal, err := ics.ParseCalendar(zhResp.Body)
	zhResp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	zhEv := zhCal.Events()[0]
	if d := zhEv.GetProperty(ics.ComponentPropertyDescription).Value; !strings.Contains(d, "区域 cd-1") || !strings.Contains(d, "2026-12-02 10:00 至 2026-12-02 14:00（Asia/Shanghai）") ||
		zhEv.Alarms()[0].GetProperty(ics.ComponentPropertyDescription).Value != fmt.Sprintf("预订 #%d 将在 1 小时后开始", r.ID) || zhEv.Id() != ev.Id() {
		t.Fatalf("the Chinese event: %q", d)
	}
	// (issue 22, item 17) An alarm an hour before, a link back, and a
	// revision calendars can follow: cancelled, the same UID comes with
	// STATUS:CANCELLED, a higher SEQUENCE and a later DTSTAMP and
	// LAST-MODIFIED (RFC 5545 §3.8.7.4), so an imported copy takes it.
	if alarms := ev.Alarms(); len(alarms) != 1 || alarms[0].GetProperty(ics.ComponentPropertyTrigger).Value != "-PT1H" {
		t.Fatalf("alarms = %+v", alarms)
	}
	if u := ev.GetProperty(ics.ComponentPropertyUrl); u == nil || !strings.HasSuffix(u.Value, fmt.Sprintf("/reservations/%d", r.ID)) {
		t.Fatalf("URL = %+v", u)
	}
	seq0, stamp0 := ev.GetProperty(ics.ComponentPropertySequence).Value, ev.GetProperty(ics.ComponentPropertyDtstamp).Value
	e.clock.Set(e.clock.Now().Add(time.Hour))
	if st, body := e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", r.ID), tok, ""); st != 200 {
		t.Fatalf("cancel = %d %s", st, body)
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cal, err = ics.ParseCalendar(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	after := cal.Events()[0]
	if after.Id() != ev.Id() || after.GetProperty(ics.ComponentPropertyStatus).Value != "CANCELLED" {
		t.Fatalf("cancelled event: UID %q status %q", after.Id(), after.GetProperty(ics.ComponentPropertyStatus).Value)
	}
	if seq := after.GetProperty(ics.ComponentPropertySequence).Value; seq <= seq0 {
		t.Fatalf("SEQUENCE %s after the cancellation, %s before", seq, seq0)
	}
	if stamp := after.GetProperty(ics.ComponentPropertyDtstamp).Value; stamp <= stamp0 {
		t.Fatalf("DTSTAMP %s after the cancellation, %s before", stamp, stamp0)
	}
	if lm := after.GetProperty(ics.ComponentPropertyLastModified); lm == nil || lm.Value <= stamp0 {
		t.Fatalf("LAST-MODIFIED = %+v", lm)
	}
}

// 64 goroutines book overlapping windows against one pool of 16 GPUs
// through the HTTP API: no hour ever exceeds 16, and every 201 is stored.
func TestConcurrentBookingsNeverOverbook(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 2, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	var mu sync.Mutex
	var booked []int64
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := 8 + i%6 // windows starting 08:00–13:00, 4–7 h long: all overlap around noon
			count := 1 + i%4
			status, body := e.apiCall("POST", "/api/v1/reservations", tok, bookBody("a100-80g", count, at(1, start), at(1, start+4+i%4)))
			switch status {
			case http.StatusCreated:
				r := decodeReservation(t, body)
				mu.Lock()
				booked = append(booked, r.ID)
				mu.Unlock()
			case http.StatusConflict:
			default:
				t.Errorf("booking %d: %d %s", i, status, body)
			}
		}(i)
	}
	wg.Wait()
	admin := &gpuportal.User{Role: gpuportal.RoleAdmin}
	list, err := e.db.Reservations(context.Background(), admin, storeFilter())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(booked) || len(booked) == 0 {
		t.Fatalf("%d reservations stored, %d answered 201", len(list), len(booked))
	}
	stored := map[int64]bool{}
	perHour := map[time.Time]int{}
	for _, r := range list {
		stored[r.ID] = true
		for h := r.Start; h.Before(r.End); h = h.Add(time.Hour) {
			perHour[h] += r.Count
		}
	}
	for _, id := range booked {
		if !stored[id] {
			t.Errorf("reservation %d answered 201 but is not stored", id)
		}
	}
	for h, n := range perHour {
		if n > 16 {
			t.Errorf("hour %s has %d GPUs booked of 16", h, n)
		}
	}
	// The hourly ledger agrees with the reservations.
	slots, _ := e.db.Availability(context.Background(), "a100-80g", "cd-1", day0, day0.AddDate(0, 0, 3))
	for _, s := range slots {
		if s.Reserved != perHour[s.Start] {
			t.Errorf("hour %s: hourly usage %d, reservations %d", s.Start, s.Reserved, perHour[s.Start])
		}
	}
}

func TestPoliciesAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	_, cust := e.apiToken("c@example.com", gpuportal.RoleCustomer)
	status, body := e.apiCall("GET", "/api/v1/admin/policies", admin, "")
	if status != 200 || !strings.Contains(body, `"min_duration_hours":4`) || !strings.Contains(body, `"models":{}`) {
		t.Fatalf("GET policies = %d %s", status, body)
	}
	if status, _ := e.apiCall("GET", "/api/v1/admin/policies", cust, ""); status != http.StatusForbidden {
		t.Fatalf("customer GET = %d", status)
	}
	// A booking made now keeps its price and tiers after the rules change.
	_, body = e.apiCall("POST", "/api/v1/reservations", cust, bookBody("a100-80g", 1, at(1, 10), at(1, 14)))
	old := decodeReservation(t, body)

	bad := strings.NewReplacer(`"spot_notice_seconds":120`, `"spot_notice_seconds":5`, `"reservable_percent":100`, `"reservable_percent":140`).Replace(mustJSON(gpuportal.DefaultPolicies()))
	status, body = e.apiCall("PUT", "/api/v1/admin/policies", admin, bad)
	if status != http.StatusBadRequest || !strings.Contains(body, `"global.spot_notice_seconds"`) || !strings.Contains(body, `"global.reservable_percent"`) {
		t.Fatalf("invalid PUT = %d %s", status, body)
	}
	if p, _ := e.db.Policies(context.Background()); p.Global.SpotNoticeSeconds != 120 {
		t.Fatalf("invalid policies were saved")
	}
	p := gpuportal.DefaultPolicies()
	eight := 8
	tiers := []gpuportal.CancellationTier{{MinHoursBefore: 0, FeePercent: 100}}
	p.Models["a100-80g"] = gpuportal.PolicyOverride{MinDurationHours: &eight, CancellationTiers: &tiers}
	status, body = e.apiCall("PUT", "/api/v1/admin/policies", admin, mustJSON(p))
	if status != 200 || !strings.Contains(body, `"a100-80g":{"min_duration_hours":8`) {
		t.Fatalf("PUT = %d %s", status, body)
	}
	status, body = e.apiCall("POST", "/api/v1/reservations", cust, bookBody("a100-80g", 1, at(2, 10), at(2, 14)))
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, `"field":"duration"`) || !strings.Contains(body, "minimum booking is 8 hours") {
		t.Fatalf("4 h booking under an 8 h minimum = %d %s", status, body)
	}
	// The old booking still cancels for free under the tiers it was booked with.
	if status, body := e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", old.ID), cust, ""); status != 200 || !strings.Contains(body, `"fee_fen":0`) {
		t.Fatalf("cancel old booking = %d %s", status, body)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// (issue 22, item 24) A server error's outcome is unknown (the booking may
// have been committed before the failure): its answer is kept like any
// other, so a retry never runs the request a second time. Only a 503 —
// the store wrote nothing — frees the key for a retry.
func TestIdempotencyKeepsServerErrors(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	u := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	for _, tc := range []struct {
		fail      error
		wantCalls int
	}{
		{errors.New("the answer was lost after the commit"), 1},
		{gpuportal.Errorf(gpuportal.EUNAVAILABLE, "The database is full."), 2},
	} {
		calls := 0
		h := e.web.idempotent(func(c echo.Context) error {
			calls++
			return tc.fail
		})
		for range 2 {
			req := httptest.NewRequest(http.MethodPost, "/api/v1/reservations", strings.NewReader(`{}`))
			req.Header.Set("Idempotency-Key", "k-"+tc.fail.Error())
			rec := httptest.NewRecorder()
			c := e.web.echo.NewContext(req, rec)
			reqOf(c).user = u
			if err := h(c); err != nil {
				t.Fatal(err)
			}
			if rec.Code < 500 {
				t.Fatalf("%v answered %d", tc.fail, rec.Code)
			}
		}
		if calls != tc.wantCalls {
			t.Errorf("%v: the handler ran %d times for two requests with one key, want %d", tc.fail, calls, tc.wantCalls)
		}
	}
}

// (issue 27, first bullet) A time without an offset means the same on
// every route: the site's zone. POST /reservations read it as UTC, the
// waitlist in the site zone — 10:00Z and 02:00Z for the same body.
func TestZonelessTimesAreSiteTimeEverywhere(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	body := `{"model":"a100-80g","region":"cd-1","count":8,"start":"2026-12-02T10:00","end":"2026-12-02T14:00"}`
	st, raw := e.apiCall("POST", "/api/v1/reservations", tok, body)
	if st != 201 {
		t.Fatalf("book = %d %s", st, raw)
	}
	var r gpuportal.Reservation
	decodeInto(t, raw, &r)
	if want := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC); !r.Start.Equal(want) {
		t.Fatalf("booked from %s, want %s (10:00 in Shanghai)", r.Start, want)
	}
	// The same body on the waitlist names the same, now full, hours.
	if st, raw := e.apiCall("POST", "/api/v1/waitlist", tok, `{"model":"a100-80g","region":"cd-1","count":1,"start":"2026-12-02T10:00","end":"2026-12-02T14:00","auto_book":false}`); st != 201 {
		t.Fatalf("waitlist = %d %s", st, raw)
	}
	if st, raw := e.apiCall("POST", "/api/v1/reservations", tok, `{"model":"a100-80g","region":"cd-1","count":1,"start":"2026-12-02T10:00","end":"2026-12-02T14:00"}`); st != http.StatusConflict {
		t.Fatalf("a second booking of the full hours = %d %s", st, raw)
	}
}
