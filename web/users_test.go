package web

import (
	"fmt"
	"net/http"
	"net/url"
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
	p := b.post(fmt.Sprintf("/admin/users/%d/account", alice.ID), url.Values{"credit_limit": {"500"}, "max_running_gpus": {"8"}, "max_booked_gpu_hours": {"100"},
		"max_waitlist_entries": {"2"}, "max_queued_tasks": {"500"}, "disabled": {"true"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("disable form = %d %s", p.status, p.body)
	}
	if st, _ := e.apiCall("GET", "/api/v1/balance", aliceTok, ""); st != http.StatusUnauthorized {
		t.Fatalf("a disabled account's token = %d", st)
	}
}
