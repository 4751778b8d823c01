package web

import (
	_ "embed"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
)

// axeSource is axe-core (npm axe-core, see testdata/VERSIONS.md), run
// inside the pages under test.
//
//go:embed testdata/axe.min.js
var axeSource string

// axePages are the pages the accessibility audit covers.
var axePages = []string{"home", "calendar", "reservations", "instances", "ledger", "rates", "settings", "admin-policies"}

// An accessibility audit with axe-core over the main pages, in both
// languages, finds no critical or serious violation.
func TestBrowserAccessibilityAudit(t *testing.T) {
	t.Parallel()
	e := screensEnv(t)
	for _, lang := range []string{gpuportal.LangEnglish, gpuportal.LangChinese} {
		ctx := browse(t, e, lang, 1280)
		for _, p := range mainPages {
			if !slices.Contains(axePages, p.name) {
				continue
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+p.path), chromedp.WaitReady(chromedp.CSS(`h1`)),
				chromedp.Evaluate[chromedp.Void](axeSource)); err != nil {
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
			for _, v := range violations {
				t.Errorf("%s (%s): %s %s — %s: %s", p.name, lang, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, ", "))
			}
		}
	}
}
