package web

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store/storetest"
	"gpuportal/web/templates"
)

// fleetWithWork is two nodes of 8: a spot instance of Carol's on 2 GPUs of
// node a-1, one GPU of a-2 out of service, the rest idle.
func fleetWithWork(t *testing.T) (*testEnv, *gpuportal.Instance, string) {
	t.Helper()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 2, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	carol := storetest.MustCreateUser(t, e.db, "carol@example.com", gpuportal.RoleCustomer)
	inst, err := e.db.Launch(t.Context(), carol, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "train"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if inst, err = e.db.Instance(t.Context(), carol, inst.ID); err != nil || len(inst.GPUs) != 2 {
		t.Fatalf("the instance did not start: %+v %v", inst, err)
	}
	nodes, err := e.db.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var sick string
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if sick == "" && g.UUID != inst.GPUs[0] && g.UUID != inst.GPUs[1] && n.ID != nodeOf(nodes, inst.GPUs[0]) {
				sick = g.UUID
			}
		}
	}
	if err := e.db.SetGPUHealth(t.Context(), sick, false); err != nil {
		t.Fatal(err)
	}
	return e, inst, sick
}

func nodeOf(nodes []gpuportal.Node, uuid string) string {
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if g.UUID == uuid {
				return n.ID
			}
		}
	}
	return ""
}

// (issue 28) The fleet is a heat-grid of GPUs per node, filtered by what
// they do, each GPU in use linked to its instance and its customer.
func TestFleetHeatGrid(t *testing.T) {
	t.Parallel()
	e, inst, sick := fleetWithWork(t)
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	p := b.get("/admin/nodes")
	if p.status != http.StatusOK || strings.Count(p.body, `class="gpu-cell `) != 16 {
		t.Fatalf("the grid has %d cells, want 16:\n%s", strings.Count(p.body, `class="gpu-cell `), p.body)
	}
	for _, want := range []string{
		fmt.Sprintf(`href="/instances/%d"`, inst.ID), "carol@example.com", `data-testid="gpu-` + sick + `" data-state="unhealthy"`,
		"in use (2)", "idle (13)", "unhealthy (1)", "draining (0)", "offline (0)",
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the fleet page lacks %q", want)
		}
	}
	// Only nodes with an unhealthy GPU: the one with the sick GPU.
	p = b.get("/admin/nodes?show=unhealthy")
	if strings.Count(p.body, `<article id="node-`) != 1 || !strings.Contains(p.body, `hx-get="/admin/nodes/table?show=unhealthy"`) {
		t.Errorf("show=unhealthy lists %d nodes", strings.Count(p.body, `<article id="node-`))
	}
	if p := b.get("/admin/nodes/table?show=in_use"); strings.Count(p.body, `<article id="node-`) != 1 || !strings.Contains(p.body, fmt.Sprintf(`href="/instances/%d"`, inst.ID)) {
		t.Errorf("the live part, in use:\n%s", p.body)
	}
	if p := b.get("/admin/nodes?show=broken"); p.status != http.StatusBadRequest {
		t.Errorf("show=broken: %d", p.status)
	}
}

// (issue 28) In a browser: one node's 8 GPUs in one row at 1280 px, the
// filter keeps only matching nodes, and a GPU in use opens its instance —
// in both languages.
func TestBrowserFleetHeatGrid(t *testing.T) {
	t.Parallel()
	e, inst, _ := fleetWithWork(t)
	for _, lang := range []string{gpuportal.LangEnglish, gpuportal.LangChinese} {
		ctx := chromium(t)
		steps := append(logInAs(e.srv.URL, "admin@example.com"), chromedp.EmulateViewport(1280, 900), chromedp.Navigate(e.srv.URL+"/admin/nodes"),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="heat-grid"]`)))
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
		if lang == gpuportal.LangChinese {
			if err := chromedp.Do(ctx, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="heat-grid"]`))); err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, ctx, `[data-testid="show-unhealthy"]`); got != "异常 (1)" {
				t.Errorf("the Chinese filter reads %q", got)
			}
		}
		rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`new Set(Array.from(document.querySelector('[data-testid="heat-grid"]').children).map(c => Math.round(c.getBoundingClientRect().top))).size`))
		if rows != 1 {
			t.Errorf("%s: a node's 8 GPUs take %d rows at 1280 px", lang, rows)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="show-unhealthy"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="show-unhealthy"][aria-current="page"]`))); err != nil {
			t.Fatal(err)
		}
		if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('article[data-testid^="node-"]').length`)); n != 1 {
			t.Errorf("%s: the unhealthy filter shows %d nodes", lang, n)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="show-in_use"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="show-in_use"][aria-current="page"]`)),
			chromedp.Click(chromedp.CSS(`[data-testid="gpu-`+inst.GPUs[0]+`"] a`)), chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
			t.Fatal(err)
		}
		if loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname`)); loc != fmt.Sprintf("/instances/%d", inst.ID) {
			t.Errorf("%s: the GPU in use led to %s", lang, loc)
		}
	}
}

// (issue 50, item 6) The fleet page stays light at fleet size: 25 nodes a
// page with the whole fleet's counts above, a region filter, each node's
// name leading to its own page (GPU health, Drain, the token behind its
// own heading); a page of a region no node is in is refused.
func TestFleetPagesAndNodePage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 30, 8)
	storetest.AddFleet(t, e.db, "s", "cd-1", "h100-80g", 2, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	first := b.get("/admin/nodes")
	if n := strings.Count(first.body, `<article id="node-`); n != templates.FleetPageSize || !strings.Contains(first.body, "32 nodes: 32 online") || !strings.Contains(first.body, `href="/admin/nodes?page=2"`) {
		t.Errorf("the first page: %d nodes, counts or pager missing", n)
	}
	if second := b.get("/admin/nodes?page=2"); strings.Count(second.body, `<article id="node-`) != 7 || !strings.Contains(second.body, `hx-get="/admin/nodes/table?page=2"`) {
		t.Errorf("the second page has %d nodes", strings.Count(second.body, `<article id="node-`))
	}
	if live := b.get("/admin/nodes/table?page=2"); !strings.Contains(live.body, `href="/admin/nodes"`) || strings.Contains(live.body, `href="/admin/nodes/table`) {
		t.Error("the live part's pager leads to the live part, not to the page")
	}
	if region := b.get("/admin/nodes?region=cd-1&page=2"); strings.Count(region.body, `<article id="node-`) != 7 || !strings.Contains(region.body, "32 nodes: 32 online") {
		t.Errorf("one region's second page: %d nodes", strings.Count(region.body, `<article id="node-`))
	}
	if p := b.get("/admin/nodes?region=nowhere"); p.status != http.StatusBadRequest {
		t.Errorf("a region with no node = %d", p.status)
	}
	node := b.get("/admin/nodes/s-1")
	for _, want := range []string{`data-testid="drain"`, `data-testid="node-token"`, `data-testid="rotate-token"`, "<progress", `title="GPU 0`} {
		if !strings.Contains(node.body, want) {
			t.Errorf("the node's page lacks %s", want)
		}
	}
	if strings.Index(node.body, `data-testid="rotate-token"`) < strings.Index(node.body, `data-testid="drain"`) {
		t.Error("the token's actions come before Drain")
	}
}

// (issue 50, item 6) The fleet's live part travels only when it changed:
// a poll with the ETag of what the browser has is answered 304, no body;
// a heartbeat that moves a GPU's figures changes it.
func TestFleetRefreshSendsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	poll := func(etag string) (int, string, int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/admin/nodes/table", nil)
		req.Header.Set("HX-Request", "true")
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := b.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("ETag"), len(body)
	}
	status, etag, size := poll("")
	if status != http.StatusOK || etag == "" || size == 0 {
		t.Fatalf("the first poll = %d, ETag %q, %d bytes", status, etag, size)
	}
	if status, again, size := poll(etag); status != http.StatusNotModified || again != etag || size != 0 {
		t.Errorf("an unchanged poll = %d, ETag %q, %d bytes", status, again, size)
	}
	hb := gpuportal.AgentHeartbeat{HeartbeatSeconds: 10}
	for _, g := range nodes[0].GPUs {
		hb.GPUs = append(hb.GPUs, gpuportal.GPUSample{UUID: g.UUID, Healthy: true, UtilizationPercent: 77})
	}
	if _, err := e.db.RecordHeartbeat(t.Context(), nodes[0].ID, hb, e.wall.Now()); err != nil {
		t.Fatal(err)
	}
	if status, changed, size := poll(etag); status != http.StatusOK || changed == etag || size == 0 {
		t.Errorf("a poll after the GPUs changed = %d, ETag %q, %d bytes", status, changed, size)
	}
}
