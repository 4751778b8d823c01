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

// (issue 24) Volumes through the API and the pages: bad input is a 400
// naming the field and makes nothing; the pages create, grow and refuse
// to shrink; a launch form mounts a volume; another customer sees none of
// it; paths leaving the volume are 400 before any node is asked.
func TestVolumePagesAndAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.web.hub.ConnectTimeout = 200 * time.Millisecond // the fleet here has no agents to connect
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	for _, tt := range []struct{ body, field string }{
		{`{"name":"Data","region":"cd-1","size_gib":10}`, "name"},
		{`{"name":"data","region":"","size_gib":10}`, "region"},
		{`{"name":"data","region":"cd-1","size_gib":0}`, "size_gib"},
		{`{"name":"data","region":"nowhere","size_gib":10}`, "region"},
		{`{"name":"data","region":"cd-1","size_gib":"10"}`, "size_gib"},
	} {
		if st, body := e.apiCall("POST", "/api/v1/volumes", alice, tt.body); st != http.StatusBadRequest || !strings.Contains(body, `"field":"`+tt.field+`"`) {
			t.Errorf("create %s = %d %s", tt.body, st, body)
		}
	}
	if _, body := e.apiCall("GET", "/api/v1/volumes", alice, ""); body != "[]\n" {
		t.Errorf("bad input made volumes: %s", body)
	}
	st, body := e.apiCall("POST", "/api/v1/volumes", alice, `{"name":"data","region":"cd-1","size_gib":100}`)
	if st != http.StatusCreated || !strings.Contains(body, `"status":"available"`) || !strings.Contains(body, `"cost_fen_per_hour":5`) || !strings.Contains(body, `"mounted_by":[]`) {
		t.Fatalf("create = %d %s", st, body)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	if st, _ := e.apiCall("POST", "/api/v1/volumes", alice, `{"name":"big","region":"cd-1","size_gib":2000}`); st != http.StatusUnprocessableEntity {
		t.Errorf("past the quota = %d, want 422", st)
	}
	if st, body := e.apiCall("PUT", fmt.Sprintf("/api/v1/volumes/%d", id), alice, `{"size_gib":50}`); st != http.StatusBadRequest || !strings.Contains(body, "never shrinks") {
		t.Errorf("shrink = %d %s", st, body)
	}
	if st, body := e.apiCall("PUT", fmt.Sprintf("/api/v1/volumes/%d", id), alice, `{"size_gib":200}`); st != http.StatusOK || !strings.Contains(body, `"size_gib":200`) {
		t.Errorf("grow = %d %s", st, body)
	}
	for _, bad := range []string{"..", "../x", "%2Fetc%2Fpasswd", "a%2F..%2F..%2Fb"} {
		for _, route := range []string{"files", "files/content"} {
			if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/volumes/%d/%s?path=%s", id, route, bad), alice, ""); st != http.StatusBadRequest || !strings.Contains(body, `"field":"path"`) {
				t.Errorf("GET %s?path=%s = %d %s", route, bad, st, body)
			}
		}
		if st, _ := e.apiCall("PUT", fmt.Sprintf("/api/v1/volumes/%d/files/content?path=%s", id, bad), alice, "x"); st != http.StatusBadRequest {
			t.Errorf("PUT content?path=%s = %d", bad, st)
		}
	}
	for _, req := range [][2]string{{"GET", ""}, {"PUT", ""}, {"DELETE", ""}, {"GET", "/files"}, {"GET", "/files/content?path=a"}, {"PUT", "/files/content?path=a"}} {
		if st, _ := e.apiCall(req[0], fmt.Sprintf("/api/v1/volumes/%d%s", id, req[1]), bob, `{"size_gib":300}`); st != http.StatusNotFound {
			t.Errorf("bob %s %s = %d, want 404", req[0], req[1], st)
		}
	}
	// No agent runs in this test: the files cannot be reached, said as a 503.
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/volumes/%d/files", id), alice, ""); st != http.StatusServiceUnavailable || !strings.Contains(body, "try again") {
		t.Errorf("files with no node = %d %s", st, body)
	}

	// The pages.
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	p := b.get("/volumes")
	if p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="volume-data"`) || !strings.Contains(p.body, "200 GiB") {
		t.Fatalf("/volumes = %d", p.status)
	}
	p = b.post("/volumes", url.Values{"name": {"BAD"}, "region": {"cd-1"}, "size_gib": {"0"}})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "lower-case letters") || !strings.Contains(p.body, "at least 1 GiB") {
		t.Errorf("bad create form = %d, want every field error on the form", p.status)
	}
	p = b.post("/volumes", url.Values{"name": {"results"}, "region": {"cd-1"}, "size_gib": {"10"}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/volumes/") {
		t.Fatalf("create form = %d %s", p.status, p.location)
	}
	p = b.get(p.location)
	if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, `data-testid="files-error"`) || !strings.Contains(p.body, "Volume results") {
		t.Errorf("volume page with no node = %d", p.status)
	}
	if p = b.post(fmt.Sprintf("/volumes/%d/resize", id), url.Values{"size_gib": {"10"}}); p.status != http.StatusSeeOther {
		t.Errorf("shrink form = %d", p.status)
	}
	if p = b.get(p.location); !strings.Contains(p.body, "never shrinks") {
		t.Error("the shrink was not refused on the page")
	}
	// The launch form offers the volume and mounts it.
	if p = b.get("/instances"); !strings.Contains(p.body, `data-testid="mount-data"`) {
		t.Error("the launch form does not offer the volume")
	}
	p = b.post("/instances", url.Values{"kind": {"on_demand"}, "model": {"a100-80g"}, "region": {"cd-1"}, "count": {"1"}, "command": {"true"}, "volume": {fmt.Sprint(id)}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("launch with a volume = %d %s", p.status, p.body)
	}
	_, body = e.apiCall("GET", "/api/v1/instances", alice, "")
	if !strings.Contains(body, `"volumes":[{"id":`+fmt.Sprint(id)+`,"name":"data","mount_path":"/data/data","size_gib":200}]`) {
		t.Errorf("the launch did not mount the volume: %s", body)
	}
	if st, body := e.apiCall("DELETE", fmt.Sprintf("/api/v1/volumes/%d", id), alice, ""); st != http.StatusConflict {
		t.Errorf("delete while mounted = %d %s", st, body)
	}
	if p = b.post("/instances", url.Values{"kind": {"on_demand"}, "model": {"a100-80g"}, "region": {"cd-1"}, "count": {"1"}, "command": {"true"}, "volume": {"x"}}); p.status != http.StatusBadRequest {
		t.Errorf("launch with a bad volume value = %d", p.status)
	}
	// The ledger names the volume's charge.
	if p = b.get("/ledger"); !strings.Contains(p.body, "Volume data (#") {
		t.Error("the ledger does not name the volume's charge")
	}
	// Bob's pages show none of it.
	bb := e.browser()
	bb.login("bob@example.com", storetest.Password)
	if p = bb.get(fmt.Sprintf("/volumes/%d", id)); p.status != http.StatusNotFound {
		t.Errorf("bob's view of alice's volume = %d", p.status)
	}
	if p = bb.get("/volumes"); strings.Contains(p.body, "volume-data") {
		t.Error("bob sees alice's volume")
	}
}
