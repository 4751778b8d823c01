package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store/storetest"
)

// (issue 50, item 4) The instances page as people look at it, in English
// and in Chinese: one's instances first and the launch form behind its
// button; on a phone a card per instance with its status, cost and Stop in
// sight and nothing to scroll sideways; the form shows only the chosen
// kind's fields, and Reserved offers one's active reservations; Drill is a
// link beside Stop; an empty Active tab points to the ended ones.
func TestBrowserInstancesPageAsPeopleLookAtIt(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	nodes := storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	runningInstance(t, e, alice, nodes[0].ID, gpuportal.KindSpot)
	// An active reservation to launch on.
	e.clock.Set(day0.Add(9 * time.Hour))
	r, err := e.db.Book(t.Context(), alice, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: day0.Add(10 * time.Hour), End: day0.Add(14 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Set(day0.Add(10*time.Hour + time.Minute))
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ lang, drill, noInstances string }{
		{gpuportal.LangEnglish, "Drill an interruption", "Nothing is running now."},
		{gpuportal.LangChinese, "演练一次中断", "当前没有运行中的实例。"},
	} {
		ctx := chromium(t)
		steps := append(logInAs(e.srv.URL, "alice@example.com"), chromedp.EmulateViewport(390, 800))
		if c.lang == gpuportal.LangChinese {
			steps = append(steps, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="dashboard"]`)))
		}
		steps = append(steps, chromedp.Navigate(e.srv.URL+"/instances"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="instances"]`)))
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
		// A card: status, cost and Stop inside the screen, no sideways page.
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](`(() => {
			const inside = sel => { const r = document.querySelector(sel).getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth; };
			return [document.documentElement.scrollWidth <= window.innerWidth, inside('[data-testid="instances"] [data-testid="status"]'),
				inside('[data-testid="instances"] [data-testid="cost"]'), inside('[data-testid="instances"] [data-testid="stop"]'),
				document.querySelector('[data-testid="launch-panel"]').open]; })()`))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 || !got[0] || !got[1] || !got[2] || !got[3] {
			t.Errorf("%s at 390 px: page fits, status, cost, Stop in sight = %v", c.lang, got)
		}
		if len(got) == 5 && got[4] {
			t.Errorf("%s: the launch form is open above a list that has an instance", c.lang)
		}
		if drill := textOf(t, ctx, `[data-testid="drill"]`); drill != c.drill {
			t.Errorf("%s: the drill action says %q", c.lang, drill)
		}
		// The Launch button opens the form; each kind shows its own fields.
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Click(chromedp.CSS(`[data-testid="open-launch"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-notice"]`))); err != nil {
			t.Fatal(err)
		}
		pick := func(kind, wait string) {
			t.Helper()
			// The form may still be swapping in (opened, or the last
			// pick's): a select taken from the old one is gone by the time
			// its value is set.
			if err := chromedp.Do(ctx, settled(`[data-testid="launch-form"]`), chromedp.SetValue(chromedp.CSS(`[data-testid="launch-kind"]`), kind),
				chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('[data-testid="launch-kind"]'); htmx.process(s.form); s.dispatchEvent(new Event('change', {bubbles: true})); })()`),
				chromedp.WaitVisible(chromedp.CSS(wait)), settled(`[data-testid="launch-form"]`)); err != nil {
				t.Fatal(err)
			}
		}
		pick("on_demand", `[data-testid="on-demand-minimum"]`)
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[[]bool](`[!!document.querySelector('[data-testid="launch-notice"]'), !!document.querySelector('[name="auto_restart"]'),
			document.querySelector('[data-testid="safe-until"]').textContent.includes('spot'), !!document.querySelector('[name="reservation_id"]')]`))
		if len(shown) != 4 || shown[0] || shown[1] || shown[2] || shown[3] {
			t.Errorf("%s: on-demand shows spot or reserved fields: %v", c.lang, shown)
		}
		pick("reserved", `[data-testid="launch-reservation"]`)
		options, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="launch-reservation"] option')].map(o => o.value)`))
		if len(options) != 1 || options[0] != itoa(int(r.ID)) {
			t.Errorf("%s: Reserved offers %v, want reservation %d", c.lang, options, r.ID)
		}
		// The Ended tab is empty; the Active one of someone with nothing
		// running points to it.
		if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/instances?tab=ended"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-instances"]`))); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(textOf(t, ctx, `[data-testid="no-instances"]`), c.noInstances) {
			t.Errorf("%s: the Ended tab says nothing runs", c.lang)
		}
	}
	// Bob, with nothing yet: the form is open, the list points to the rest.
	storetest.MustCreateUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	ctx := chromium(t)
	if err := chromedp.Do(ctx, append(logInAs(e.srv.URL, "bob@example.com"), chromedp.Navigate(e.srv.URL+"/instances"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="see-ended"]`)))...); err != nil {
		t.Fatal(err)
	}
	if open, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="launch-panel"]').open`)); !open {
		t.Error("with nothing yet the launch form is closed")
	}
}

// (issue 50, item 2) A machine to log into in one click, in English and in
// Chinese: Launch with no command lands on the new instance's page, which
// says there is no SSH key yet, links to where keys are added and offers
// the terminal meanwhile.
func TestBrowserLaunchWithoutACommand(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.with(func(c *Config) { c.SSH = SSHEndpoint{Host: "127.0.0.1", Port: 2222, Fingerprint: "SHA256:test"} })
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	nodes, err := e.db.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ lang, email, machine, noKey string }{
		{gpuportal.LangEnglish, "dan@example.com", "a machine to log into", "You have no SSH key yet"},
		{gpuportal.LangChinese, "wang@example.com", "一台可登录的机器", i18n.T(gpuportal.LangChinese, "You have no SSH key yet: ssh needs one.")},
	} {
		owner := storetest.MustCreateUser(t, e.db, c.email, gpuportal.RoleCustomer)
		ctx := chromium(t)
		steps := logInAs(e.srv.URL, c.email)
		if c.lang == gpuportal.LangChinese {
			steps = append(steps, pickLang("zh-CN"), chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="dashboard"]`)))
		}
		steps = append(steps, chromedp.Navigate(e.srv.URL+"/instances"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-no-key"]`)),
			chromedp.Click(chromedp.CSS(`[data-testid="launch"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="live-status"]`)))
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
		path, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname`))
		if !strings.HasPrefix(path, "/instances/") {
			t.Fatalf("%s: Launch led to %s, not the instance's page: %s", c.lang, path, textOf(t, ctx, `main`))
		}
		if got := textOf(t, ctx, `main`); !strings.Contains(got, c.machine) {
			t.Errorf("%s: the page does not say it is a machine to log into", c.lang)
		}
		// It runs: Connect says there is no key, and where to add one.
		var id int64
		fmt.Sscanf(path, "/instances/%d", &id)
		if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		i, err := e.db.Instance(t.Context(), owner, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.db.ApplyWorkloadReports(t.Context(), nodes[0].ID, []gpuportal.WorkloadStatus{{InstanceID: id, Attempt: i.Attempt, State: gpuportal.WorkloadRunning}}); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid="no-ssh-key"]`))); err != nil {
			t.Fatal(err)
		}
		if got := textOf(t, ctx, `[data-testid="no-ssh-key"]`); !strings.Contains(got, c.noKey) {
			t.Errorf("%s: the no-key warning says %q", c.lang, got)
		}
		if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="add-ssh-key"], [data-testid="open-terminal"]').length`)); n != 2 {
			t.Errorf("%s: no link to add a key, or no terminal", c.lang)
		}
	}
}
