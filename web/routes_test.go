package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"gpuportal/store/storetest"
)

// docs/api.md describes every API route the router has: a new route
// without its line fails here.
func TestEveryAPIRouteIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t)
	n := 0
	for _, r := range e.web.echo.Routes() {
		path, ok := strings.CutPrefix(r.Path, "/api/v1")
		if !ok || path == "" || strings.HasSuffix(path, "/*") || r.Method == "echo_route_not_found" {
			continue
		}
		n++
		parts := strings.Split(path, "/")
		for k, p := range parts {
			if name, isParam := strings.CutPrefix(p, ":"); isParam {
				parts[k] = "{" + name + "}"
			}
		}
		if line := r.Method + " " + strings.Join(parts, "/"); !strings.Contains(string(doc), line) {
			t.Errorf("docs/api.md does not describe %s", line)
		}
	}
	if n < 50 {
		t.Fatalf("only %d API routes seen", n)
	}
}

// (issue 28, speed and weight) Pages and assets are gzipped for clients
// that ask; assets are addressed by their content's version and kept for
// a year under it; the main pages are small compressed.
func TestCompressionAndVersionedAssets(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	get := func(path string, gzip bool) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		// A bare transport: it does not decompress for us.
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, path := range []string{"/", "/calendar?model=a100-80g&region=cd-1", "/rates"} {
		resp, body := get(path, true)
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s is not gzipped: %v", path, resp.Header)
		}
		if len(body) > 60<<10 {
			t.Errorf("%s is %d bytes compressed, over 60 KB", path, len(body))
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(zr)
		if !strings.Contains(string(page), "</html>") {
			t.Fatalf("%s decompressed is not a page", path)
		}
	}
	if resp, _ := get("/", false); resp.Header.Get("Content-Encoding") != "" {
		t.Fatal("gzipped for a client that did not ask")
	}
	_, page := get("/", false)
	m := regexp.MustCompile(`/static/app\.css\?v=([0-9a-f]{12})`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("the page does not name a versioned stylesheet:\n%s", page)
	}
	if resp, _ := get("/static/app.css?v="+string(m[1]), true); resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Fatalf("versioned asset: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := get("/static/app.css?v=0000", false); strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Fatal("an asset named with a stale version is kept for ever")
	}
}
