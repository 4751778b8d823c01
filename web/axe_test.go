package web

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
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
var axePages = []string{"home", "calendar", "reservations", "instances", "jobs", "ledger", "rates", "settings", "admin-policies"}

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
			for _, v := range axeViolations(t, ctx, e.srv.URL+p.path) {
				t.Errorf("%s (%s): %s", p.name, lang, v)
			}
		}
		// A visitor's landing page.
		visitor := chromium(t)
		if lang == gpuportal.LangChinese {
			if err := chromedp.Do(visitor, chromedp.Navigate(e.srv.URL+"/"), chromedp.Click(chromedp.CSS(`[data-testid="lang-zh-CN"]`)),
				chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="landing"]`))); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range axeViolations(t, visitor, e.srv.URL+"/") {
			t.Errorf("landing (%s): %s", lang, v)
		}
	}
}

// axeViolations opens url and lists axe-core's critical and serious
// findings there.
func axeViolations(t *testing.T, ctx context.Context, url string) []string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS(`h1`)),
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
	var out []string
	for _, v := range violations {
		out = append(out, fmt.Sprintf("%s %s — %s: %s", v.Impact, v.ID, v.Help, strings.Join(v.Nodes, ", ")))
	}
	return out
}
