package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// Admins see users with their money, credit an account (audited), set
// credit limits, quotas and disabling; customers cannot.
func TestAdminUsers(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	alice := storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	aliceTok := e.tokenFor(alice)
	for _, path := range []string{"/api/v1/admin/users"} {
		if st, _ := e.apiCall("GET", path, aliceTok, ""); st != http.StatusForbidden {
			t.Errorf("customer GET %s = %d", path, st)
		}
	}
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/admin/users/%d/credit", alice.ID), aliceTok, `{"amount_fen":100,"note":"x"}`); st != http.StatusForbidden {
		t.Errorf("customer credit = %d", st)
	}
	for _, bad := range []string{`{"amount_fen":0,"note":"x"}`, `{"amount_fen":100}`, `{"amount_fen":"1","note":"x"}`} {
		if st, body := e.apiCall("POST", fmt.Sprintf("/api/v1/admin/users/%d/credit", alice.ID), admin, bad); st != 400 {
			t.Errorf("credit %s = %d %s", bad, st, body)
		}
	}
	st, body := e.apiCall("POST", fmt.Sprintf("/api/v1/admin/users/%d/credit", alice.ID), admin, `{"amount_fen":120000,"note":"bank transfer 2026-12-01 #8812"}`)
	if st != 200 || !strings.Contains(body, `"balance_fen":120000`) {
		t.Fatalf("credit = %d %s", st, body)
	}
	st, body = e.apiCall("PUT", fmt.Sprintf("/api/v1/admin/users/%d", alice.ID), admin, `{"credit_limit_fen":50000,"quotas":{"max_running_gpus":8,"max_booked_gpu_hours":100,"max_waitlist_entries":2}}`)
	if st != 200 || !strings.Contains(body, `"available_fen":170000`) || !strings.Contains(body, `"max_running_gpus":8`) {
		t.Fatalf("update = %d %s", st, body)
	}
	if st, body := e.apiCall("GET", "/api/v1/admin/users?q=ALICE", admin, ""); st != 200 || !strings.Contains(body, "alice@example.com") || strings.Contains(body, "admin@example.com") {
		t.Fatalf("search = %d %s", st, body)
	}
	if st, body := e.apiCall("GET", "/api/v1/admin/audit?action=account.", admin, ""); st != 200 || !strings.Contains(body, "bank transfer 2026-12-01 #8812") || !strings.Contains(body, "account.update") {
		t.Fatalf("audit = %d %s", st, body)
	}
	// The page: disabling through the form ends Alice's API access.
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	if p := b.get("/admin/users?q=alice"); !strings.Contains(p.body, "¥1,700.00") {
		t.Fatalf("users page:\n%s", p.body)
	}
	// The audit page says money in ¥ and names people by email, linked
	// (issue 50 item 5), not amount_fen 120000 on user/2.
	if p := b.get("/admin/audit?action=account.credit"); !strings.Contains(p.body, "amount (¥)") || !strings.Contains(p.body, "¥1,200.00") ||
		!strings.Contains(p.body, `href="/admin/users?q=alice%40example.com" data-testid="audit-subject">alice@example.com</a>`) {
		t.Errorf("the audit page's credit row:\n%s", p.body[strings.Index(p.body, "<table"):])
	}
	p := b.post(fmt.Sprintf("/admin/users/%d/account", alice.ID), url.Values{"credit_limit": {"500"}, "max_running_gpus": {"8"}, "max_booked_gpu_hours": {"100"},
		"max_waitlist_entries": {"2"}, "max_queued_tasks": {"500"}, "disabled": {"true"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("disable form = %d %s", p.status, p.body)
	}
	if st, _ := e.apiCall("GET", "/api/v1/balance", aliceTok, ""); st != http.StatusUnauthorized {
		t.Fatalf("a disabled account's token = %d", st)
	}
}

// (issue 28) The users page is a table sorted by any column, each user
// linked to their reservations and instances, which an admin then sees
// alone (and the API answers alike with user_id).
func TestUsersTableSortsAndLinks(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	carol := storetest.MustCreatePoorUser(t, e.db, "carol@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	if _, err := e.db.Credit(t.Context(), nil, carol.ID, gpuportal.CreditRequest{Amount: 500_00, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	carolTok := e.tokenFor(carol)
	_, body := e.apiCall("POST", "/api/v1/reservations", carolTok, bookBody("a100-80g", 2, at(1, 10), at(1, 14)))
	carolRes := decodeReservation(t, body)
	e.apiCall("POST", "/api/v1/reservations", bob, bookBody("a100-80g", 1, at(1, 10), at(1, 14)))

	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	order := func(sort string) []string {
		t.Helper()
		p := b.get("/admin/users?sort=" + sort)
		if p.status != http.StatusOK {
			t.Fatalf("sort=%s: %d", sort, p.status)
		}
		var out []string
		for _, email := range []string{"admin@example.com", "bob@example.com", "carol@example.com"} {
			out = append(out, fmt.Sprintf("%08d %s", strings.Index(p.body, "<td>"+email+"</td>"), email))
		}
		slices.Sort(out)
		for k := range out {
			out[k] = out[k][9:]
		}
		return out
	}
	if got := order("email"); !slices.Equal(got, []string{"admin@example.com", "bob@example.com", "carol@example.com"}) {
		t.Errorf("by email: %v", got)
	}
	// Carol spent most this month (2 GPUs × 4 h); the admin nothing.
	if got := order("spend"); got[0] != "carol@example.com" || got[2] != "admin@example.com" {
		t.Errorf("by spend: %v", got)
	}
	if p := b.get("/admin/users?sort=height"); p.status != http.StatusBadRequest {
		t.Errorf("an unknown order: %d", p.status)
	}
	p := b.get("/admin/users?sort=spend")
	link := fmt.Sprintf(`href="/reservations?user_id=%d"`, carol.ID)
	if !strings.Contains(p.body, link) || !strings.Contains(p.body, fmt.Sprintf(`href="/instances?user_id=%d"`, carol.ID)) || !strings.Contains(p.body, `aria-sort="descending"`) {
		t.Fatalf("the users table lacks its links or order:\n%s", p.body)
	}
	// Carol's reservations alone, with the way back to everyone's.
	p = b.get(fmt.Sprintf("/reservations?user_id=%d", carol.ID))
	if p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="owner-filter"`) || !strings.Contains(p.body, "carol@example.com") ||
		strings.Count(p.body, `<tr data-testid="reservation-`) != 1 || !strings.Contains(p.body, fmt.Sprintf(`href="/reservations?tab=past&amp;user_id=%d"`, carol.ID)) {
		t.Fatalf("carol's reservations:\n%s", p.body)
	}
	if p := b.get(fmt.Sprintf("/instances?user_id=%d", carol.ID)); p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="owner-filter"`) {
		t.Fatalf("carol's instances: %d", p.status)
	}
	for _, bad := range []string{"x", "0"} {
		if p := b.get("/reservations?user_id=" + bad); p.status != http.StatusBadRequest {
			t.Errorf("user_id=%s: %d", bad, p.status)
		}
	}
	if p := b.get("/reservations?user_id=999999"); p.status != http.StatusNotFound {
		t.Errorf("an unknown user: %d", p.status)
	}
	// The API alike; a customer's list stays their own whatever they ask.
	var list []gpuportal.Reservation
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/reservations?user_id=%d", carol.ID), admin, ""); st != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || list[0].ID != carolRes.ID {
		t.Fatalf("admin API, carol's: %d %s", st, body)
	}
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/reservations?user_id=%d", carol.ID), bob, ""); st != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || list[0].UserID == carol.ID {
		t.Fatalf("bob asking for carol's: %d %s", st, body)
	}
}
