package web

import (
	"os"
	"strings"
	"testing"
)

// docs/api.md describes every API route the router has: a new route
// without its line fails here.
func TestEveryAPIRouteIsDocumented(t *testing.T) {
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
