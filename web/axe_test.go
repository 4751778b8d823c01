package web

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core (npm axe-core, see testdata/VERSIONS.md), run
// inside the pages under test.
//
//go:embed testdata/axe.min.js
var axeSource string

// axePages are the pages the accessibility audit covers.
var axePages = []string{"home", "calendar", "reservations", "instances", "jobs", "ledger", "rates", "settings", "admin-policies"}

// axeViolations lists axe-core's critical and serious findings on the
// page the tab shows (TestBrowserMainPages audits the main pages and the
// landing page, in both languages).
func axeViolations(t *testing.T, ctx context.Context) []string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](axeSource)); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
		.filter(v => v.impact === "critical" || v.impact === "serious")
		.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))})))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var violations []struct {
		ID, Impact, Help string
		Nodes            []string
	}
	if err := json.Unmarshal(raw, &violations); err != nil {
		t.Fatalf("axe result %s: %v", raw, err)
	}
	var out []string
	for _, v := range violations {
		out = append(out, fmt.Sprintf("%s %s — %s: %s", v.Impact, v.ID, v.Help, strings.Join(v.Nodes, ", ")))
	}
	return out
}
