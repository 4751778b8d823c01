package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// getList is a GET of an API list: its status, total header and rows.
func (e *testEnv) getList(t *testing.T, token, path string) (int, string, []map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rows []map[string]any
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return resp.StatusCode, resp.Header.Get("X-Total-Count"), rows
}

// (issue 27) Every list of the API pages the same way: ?limit= (default
// 50, at most 500) from ?offset=, the total in X-Total-Count, no silent
// cap; a limit, offset or tab out of range is 400 naming it.
func TestEveryListPagesTheSameWay(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 10, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	const n = 55
	for k := range n {
		if st, body := e.apiCall("POST", "/api/v1/instances", alice, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"x"}`); st != http.StatusCreated {
			t.Fatalf("launch %d = %d %s", k, st, body)
		}
	}
	for k := range n {
		if st, body := e.apiCall("POST", "/api/v1/jobs", alice, `{"model":"a100-80g","region":"cd-1","gpus_per_task":1,"tasks":1,"command":"x","max_parallel":1}`); st != http.StatusCreated {
			t.Fatalf("job %d = %d %s", k, st, body)
		}
		if st, body := e.apiCall("POST", "/api/v1/reservations", alice, bookBody("a100-80g", 1, at(2+k/8, 10+k%8), at(2+k/8, 14+k%8))); st != http.StatusCreated {
			t.Fatalf("book %d = %d %s", k, st, body)
		}
	}
	for _, list := range []string{"/api/v1/instances", "/api/v1/jobs", "/api/v1/reservations"} {
		st, total, rows := e.getList(t, alice, list)
		if st != http.StatusOK || total != fmt.Sprint(n) || len(rows) != 50 {
			t.Errorf("%s = %d, total %q, %d rows; want the first 50 of %d", list, st, total, len(rows), n)
		}
		_, _, rest := e.getList(t, alice, list+"?offset=50")
		if len(rest) != n-50 || rest[0]["id"] == rows[0]["id"] {
			t.Errorf("%s?offset=50 = %d rows", list, len(rest))
		}
		if _, _, one := e.getList(t, alice, list+"?limit=1&offset=3"); len(one) != 1 || one[0]["id"] != rows[3]["id"] {
			t.Errorf("%s?limit=1&offset=3 = %v, want the 4th row", list, one)
		}
		for _, bad := range []string{"limit=0", "limit=501", "limit=x", "offset=-1", "offset=y"} {
			if st, _ := e.apiCall("GET", list+"?"+bad, alice, ""); st != http.StatusBadRequest {
				t.Errorf("%s?%s = %d, want 400", list, bad, st)
			}
		}
	}
	for _, list := range []string{"/api/v1/waitlist", "/api/v1/topups"} {
		if st, total, rows := e.getList(t, alice, list); st != http.StatusOK || total != "0" || len(rows) != 0 {
			t.Errorf("%s = %d %q %d", list, st, total, len(rows))
		}
		if st, _ := e.apiCall("GET", list+"?limit=9999", alice, ""); st != http.StatusBadRequest {
			t.Errorf("%s?limit=9999 = %d, want 400", list, st)
		}
	}
	// Tabs are honoured and checked.
	if _, total, _ := e.getList(t, alice, "/api/v1/reservations?tab=upcoming"); total != fmt.Sprint(n) {
		t.Errorf("upcoming total = %q", total)
	}
	if _, total, _ := e.getList(t, alice, "/api/v1/reservations?tab=past"); total != "0" {
		t.Errorf("past total = %q", total)
	}
	if _, total, _ := e.getList(t, alice, "/api/v1/instances?tab=ended"); total != "0" {
		t.Errorf("ended instances total = %q", total)
	}
	for _, bad := range []string{"/api/v1/reservations?tab=soon", "/api/v1/instances?tab=all", "/api/v1/reservations?status=weird"} {
		if st, body := e.apiCall("GET", bad, alice, ""); st != http.StatusBadRequest || !strings.Contains(body, `"field"`) {
			t.Errorf("%s = %d %s, want 400 naming the parameter", bad, st, body)
		}
	}
}

// (issue 27) A body of the wrong shape says what JSON it wanted, never a
// Go type's name.
func TestWrongTypesSpeakJSON(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	for _, c := range []struct{ path, body, want string }{
		{"/api/v1/reservations", `[1, 2]`, "must be a JSON object"},
		{"/api/v1/reservations", `{"model":"a100-80g","count":"two"}`, `"count\" must be a whole number`},
		{"/api/v1/instances", `{"kind":"spot","auto_restart":"yes"}`, "must be true or false"},
		{"/api/v1/volumes", `{"name":5}`, "must be a string"},
		{"/api/v1/instances", `{"volumes":{"id":1}}`, "must be a list"},
	} {
		st, body := e.apiCall("POST", c.path, alice, c.body)
		if st != http.StatusBadRequest || !strings.Contains(body, c.want) || strings.Contains(body, "web.") || strings.Contains(body, "gpuportal.") {
			t.Errorf("POST %s %s = %d %s, want 400 saying %q", c.path, c.body, st, body, c.want)
		}
	}
}

// (issue 27) GET /quote says what the calendar's quote panel says: the
// cancellation terms as dates and, signed in, the top-up the booking
// needs — the whole difference, also when the balance is below zero.
func TestQuoteSaysWhatThePanelSays(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	poor := storetest.MustCreatePoorUser(t, e.db, "poor@example.com", gpuportal.RoleCustomer)
	token := e.tokenFor(poor)
	q := "/api/v1/quote?model=a100-80g&region=cd-1&count=1&start=" + url.QueryEscape(at(3, 10)) + "&end=" + url.QueryEscape(at(3, 14))
	st, body := e.apiCall("GET", q, token, "")
	if st != http.StatusOK {
		t.Fatalf("quote = %d %s", st, body)
	}
	var got struct {
		Total        gpuportal.Fen                `json:"total_fen"`
		Cancellation []gpuportal.CancellationStep `json:"cancellation"`
		Available    *gpuportal.Fen               `json:"available_fen"`
		TopUp        gpuportal.Fen                `json:"top_up_needed_fen"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Cancellation) != 3 || got.Cancellation[0].FeePercent != 0 || got.Available == nil || *got.Available != 0 || got.TopUp != got.Total {
		t.Errorf("quote = %s", body)
	}
	// Anonymous: the terms, no money of anyone's.
	if _, body := e.apiCall("GET", q, "", ""); strings.Contains(body, "available_fen") || !strings.Contains(body, "cancellation") {
		t.Errorf("anonymous quote = %s", body)
	}
}

// (issue 28, part) Admins land on the admin overview; customers on their
// dashboard; a ?next= wins for both.
func TestAdminsLandOnTheOverview(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	for _, c := range []struct{ email, next, want string }{
		{"admin@example.com", "", "/admin"},
		{"alice@example.com", "", "/"},
		{"admin@example.com", "/admin/users", "/admin/users"},
	} {
		b := e.browser()
		b.get("/login")
		p := b.post("/login", url.Values{"email": {c.email}, "password": {storetest.Password}, "next": {c.next}})
		if p.status != http.StatusSeeOther || p.location != c.want {
			t.Errorf("%s (next %q) lands on %q, want %q", c.email, c.next, p.location, c.want)
		}
	}
}
