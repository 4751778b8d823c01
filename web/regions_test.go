package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 45) An admin names the region's package mirror on /admin/regions;
// a bad line is refused next to its form with what was typed kept; a
// customer sees the variables on the launch form.
func TestRegionVariablesFromThePageToTheLaunchForm(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "n", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	admin := e.browser()
	admin.login("admin@example.com", storetest.Password)
	if p := admin.get("/admin/regions"); p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="region-cd-1"`) {
		t.Fatalf("regions page = %d", p.status)
	}
	bad := admin.post("/admin/regions/cd-1/env", url.Values{"env": {"PIP_INDEX_URL=https://mirrors.example.cn/pypi/simple\nLD_PRELOAD=/x.so"}})
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "LD_PRELOAD is the platform") || !strings.Contains(bad.body, "LD_PRELOAD=/x.so") {
		t.Fatalf("a refused line = %d", bad.status)
	}
	ok := admin.post("/admin/regions/cd-1/env", url.Values{"env": {"PIP_INDEX_URL=https://mirrors.example.cn/pypi/simple\n\nHF_ENDPOINT=https://hf-mirror.example.cn"}})
	if ok.status != http.StatusSeeOther {
		t.Fatalf("save = %d %s", ok.status, ok.body)
	}
	alice := e.browser()
	alice.login("alice@example.com", storetest.Password)
	if p := alice.get("/instances"); !strings.Contains(p.body, `data-testid="region-env"`) || !strings.Contains(p.body, "PIP_INDEX_URL=https://mirrors.example.cn/pypi/simple") {
		t.Error("the launch form does not say what the region's instances get")
	}
	if p := alice.get("/admin/regions"); p.status != http.StatusForbidden {
		t.Errorf("a customer's /admin/regions = %d", p.status)
	}
}
