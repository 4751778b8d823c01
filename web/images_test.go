package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 13) Admins keep the image catalog; customers list it and launch
// into one of its images (the first by default); the node is told the
// image's reference.
func TestImageCatalog(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, admin := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)

	list := func() []gpuportal.Image {
		_, body := e.apiCall(http.MethodGet, "/api/v1/images", "", "")
		var out []gpuportal.Image
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("images: %s", body)
		}
		return out
	}
	seeded := list()
	if len(seeded) < 1 || seeded[0].ID != "pytorch-2.5" || seeded[0].Reference == "" {
		t.Fatalf("seeded catalog = %+v", seeded)
	}
	for _, tt := range []struct {
		body  string
		code  int
		field string
	}{
		{`{"id":"Bad Id","name":"x","reference":"r.example/x:1"}`, http.StatusBadRequest, "id"},
		{`{"id":"ok","name":"","reference":"r.example/x:1"}`, http.StatusBadRequest, "name"},
		{`{"id":"ok","name":"x","reference":"not a ref"}`, http.StatusBadRequest, "reference"},
		{`{"id":"ok","name":"x","reference":"r.example/x:1","extra":1}`, http.StatusBadRequest, "extra"},
		{`{"id":"pytorch-2.5","name":"x","reference":"r.example/x:1"}`, http.StatusConflict, "id"},
	} {
		st, body := e.apiCall(http.MethodPost, "/api/v1/admin/images", admin, tt.body)
		if st != tt.code || !strings.Contains(body, `"field":"`+tt.field+`"`) {
			t.Errorf("add %s = %d %s", tt.body, st, body)
		}
	}
	if st, _ := e.apiCall(http.MethodPost, "/api/v1/admin/images", alice, `{"id":"mine","name":"x","reference":"r.example/x:1"}`); st != http.StatusForbidden {
		t.Fatalf("a customer adding an image = %d", st)
	}
	if n := len(list()); n != len(seeded) {
		t.Fatalf("bad requests changed the catalog: %d images", n)
	}
	st, body := e.apiCall(http.MethodPost, "/api/v1/admin/images", admin, `{"id":"jax-0.4","name":"JAX 0.4","reference":"registry.example.com/ml/jax:0.4-cuda12","description":"JAX with CUDA 12"}`)
	if st != http.StatusCreated {
		t.Fatalf("add = %d %s", st, body)
	}
	if got := list(); got[len(got)-1].ID != "jax-0.4" {
		t.Fatalf("catalog after add = %+v", got)
	}

	// Launching: the named image, the first by default, an unknown one refused.
	launch := func(image string) (int, string) {
		b := `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"train"`
		if image != "" {
			b += `,"image":"` + image + `"`
		}
		return e.apiCall(http.MethodPost, "/api/v1/instances", alice, b+"}")
	}
	if st, body := launch("nope"); st != http.StatusBadRequest || !strings.Contains(body, `"field":"image"`) {
		t.Fatalf("unknown image = %d %s", st, body)
	}
	if st, body := launch("jax-0.4"); st != http.StatusCreated || !strings.Contains(body, `"image":"registry.example.com/ml/jax:0.4-cuda12"`) {
		t.Fatalf("launch with an image = %d %s", st, body)
	}
	if st, body := launch(""); st != http.StatusCreated || !strings.Contains(body, `"image":"`+seeded[0].Reference+`"`) {
		t.Fatalf("launch with the default image = %d %s", st, body)
	}
	if _, err := e.db.Tick(context.Background(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	desired, err := e.db.DesiredFor(context.Background(), nodes[0].ID)
	if err != nil || len(desired.Workloads) != 2 || desired.Workloads[0].Image != "registry.example.com/ml/jax:0.4-cuda12" || desired.Workloads[1].Image != seeded[0].Reference {
		t.Fatalf("desired = %+v, %v", desired.Workloads, err)
	}

	// Removing keeps running instances as they are.
	if st, _ := e.apiCall(http.MethodDelete, "/api/v1/admin/images/jax-0.4", admin, ""); st != http.StatusNoContent {
		t.Fatalf("delete = %d", st)
	}
	if st, _ := e.apiCall(http.MethodDelete, "/api/v1/admin/images/jax-0.4", admin, ""); st != http.StatusNotFound {
		t.Fatalf("delete twice = %d", st)
	}
	if desired, _ := e.db.DesiredFor(context.Background(), nodes[0].ID); desired.Workloads[0].Image != "registry.example.com/ml/jax:0.4-cuda12" {
		t.Fatal("deleting the image changed a running instance")
	}
	if _, body := e.apiCall(http.MethodGet, "/api/v1/admin/audit", admin, ""); !strings.Contains(body, "image.add") || !strings.Contains(body, "image.delete") {
		t.Fatal("catalog changes are not audited")
	}
}

// The admin page adds and removes images; the launch form offers them.
func TestImagePages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	if p := b.get("/admin/images"); p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="image-pytorch-2.5"`) {
		t.Fatalf("images page = %d", p.status)
	}
	if p := b.post("/admin/images", url.Values{"id": {"BAD"}, "name": {"x"}, "reference": {"r.example/x:1"}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, `data-testid="error-id"`) {
		t.Fatalf("bad image form = %d", p.status)
	}
	if p := b.post("/admin/images", url.Values{"id": {"tf-2.17"}, "name": {"TensorFlow 2.17"}, "reference": {"r.example/tf:2.17"}}); p.status != http.StatusSeeOther {
		t.Fatalf("add image form = %d %s", p.status, p.body)
	}
	b.get("/admin/images")
	if p := b.post("/admin/images/cuda-12.4/delete", nil); p.status != http.StatusSeeOther {
		t.Fatalf("delete form = %d", p.status)
	}
	c := e.browser()
	c.login("alice@example.com", storetest.Password)
	p := c.get("/instances")
	if !strings.Contains(p.body, `data-testid="launch-image"`) || !strings.Contains(p.body, "TensorFlow 2.17") || strings.Contains(p.body, "CUDA 12.4 base") {
		t.Fatal("the launch form does not offer the catalog")
	}
	if p := c.get("/admin/images"); p.status != http.StatusForbidden {
		t.Fatalf("a customer on the images page = %d", p.status)
	}
	c.post("/instances", url.Values{"kind": {"on_demand"}, "model": {"a100-80g"}, "region": {"cd-1"}, "count": {"1"}, "command": {"x"}, "image": {"tf-2.17"}})
	list, _ := e.db.Instances(context.Background(), mustUser(t, e.db, "alice@example.com"), 0)
	if len(list) != 1 || list[0].Image != "r.example/tf:2.17" {
		t.Fatalf("launched from the form: %+v", list)
	}
}
