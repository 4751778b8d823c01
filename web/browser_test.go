package web

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/internal/browsertest"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// chromium returns a headless Chromium context for a test, or skips the test
// (with the reason) when there is no Chromium — except under CI=true, where
// browser tests must run.
func chromium(t *testing.T) context.Context {
	t.Helper()
	// What a person clicks does not depend on the engine: the browser
	// tests run once, on SQLite; the HTTP suite runs on both.
	sqliteOnly(t, "browser tests run in the SQLite pass")
	return browsertest.Chromium(t)
}

// textOf returns the text content of the element matching sel.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// A person signs up, logs out, logs in, switches to Chinese and sees the
// dashboard in Chinese.
func TestBrowserSignUpLogInSwitchLanguage(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	run(
		chromedp.Navigate(e.srv.URL+"/"),
		chromedp.Click(chromedp.CSS(`[data-testid="nav-signup"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="signup-form"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="name"]`), "Wang Fang"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "wang@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), "a-good-password"),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="whoami"]`); got != "Wang Fang" {
		t.Fatalf("whoami = %q", got)
	}
	run(
		chromedp.Click(chromedp.CSS(`[data-testid="account-menu-open"]`)), // logging out is in the account's menu
		chromedp.Click(chromedp.CSS(`[data-testid="logout"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="nav-login"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="nav-login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="login-form"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "wang@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), "a-good-password"),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="dashboard"] h1`); got != "Dashboard" {
		t.Fatalf("dashboard heading = %q", got)
	}
	run(
		pickLang("zh-CN"),
		chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="dashboard"]`)),
	)
	if got := textOf(t, ctx, `[data-testid="dashboard"] h1`); got != "控制台" {
		t.Fatalf("dashboard heading in Chinese = %q", got)
	}
	if got := textOf(t, ctx, `[data-testid="model-a100-80g"] [data-testid="list-price"]`); got != "¥8.00" {
		t.Fatalf("A100 price = %q", got)
	}
	u, err := e.db.UserByEmail(context.Background(), "wang@example.com")
	if err != nil || u.Lang != "zh-CN" {
		t.Fatalf("language not remembered: %+v %v", u, err)
	}
}

// waitJS waits until a JavaScript expression is true in the page.
// pickLang presses a language button, which a phone keeps behind Menu (a
// script's click reaches it there too).
func pickLang(lang string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="lang-` + lang + `"]').click()`)
}

func waitJS(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr)); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// settled waits until exactly one element matches sel and htmx has no
// request, swap or settle under way: on a busy machine, typing into a form
// htmx was still replacing hit nodes that had just gone ("Could not find
// node with given id").
func settled(sel string) chromedp.Action[chromedp.Void] {
	expr := fmt.Sprintf(`document.querySelectorAll(%q).length === 1 && !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')`, sel)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](expr)(ctx, t)
		return chromedp.Void{}, err
	}
}

// (issue 12, item 2) On the launch form, picking H100 and 4 GPUs shows
// H100's spot price and the hourly figure for 4 GPUs, and keeps the command
// typed; the instance launched is charged that price.
func TestBrowserLaunchFormFollowsTheModel(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "h100-80g", 1, 8)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	models, _ := e.db.Models(context.Background())
	pol, _ := e.db.Policies(context.Background())
	var h100 gpuportal.Fen
	for _, m := range models {
		if m.ID == "h100-80g" {
			h100 = pol.SpotPriceOf(m)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/login"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "alice@example.com"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), storetest.Password),
		chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
		chromedp.Navigate(e.srv.URL+"/instances"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-form"]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="launch-command"]`), "python train.py"),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('[data-testid="launch-model"]'); s.value = 'h100-80g'; s.dispatchEvent(new Event('change', {bubbles: true})); })()`),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector('[data-testid="launch-kind"]').textContent.includes('`+h100.String()+`')`)
	if err := chromedp.Do(ctx,
		// A person takes longer than htmx needs to wire the swapped-in form;
		// the test makes sure it is wired before it types.
		chromedp.Evaluate[chromedp.Void](`(() => { const c = document.querySelector('[data-testid="launch-count"]'); htmx.process(c.form); c.value = '4'; c.dispatchEvent(new Event('change', {bubbles: true})); })()`),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector('[data-testid="launch-hourly"]').textContent.includes('`+(h100*4).String()+`')`)
	cmd, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="launch-command"]').value`))
	if err != nil || cmd != "python train.py" {
		t.Fatalf("the command typed = %q, %v", cmd, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="launch"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	); err != nil {
		t.Fatal(err)
	}
	list, _ := e.db.Instances(context.Background(), mustUser(t, e.db, "alice@example.com"), 0)
	if len(list) != 1 || list[0].Model != "h100-80g" || list[0].Count != 4 || list[0].PricePerGPU != h100 {
		t.Fatalf("launched %+v; want 4 × h100 at %d", list, h100)
	}
}

// logInAs is the login form filled in and sent, up to the dashboard (the
// test user's password is storetest.Password).
func logInAs(baseURL, email string) []chromedp.Action[chromedp.Void] {
	return browsertest.LogIn(baseURL, email, storetest.Password)
}

// (issue 47) Invite → accept → switch → launch for the team, as a student
// clicks it, in English and in Chinese: the invitation's page accepts
// (which switches her browser to the team), the header's switcher names
// the team, the launch form launches for the team (the team pays; she
// made it), and the switcher takes her back to her own account, whose
// list does not show the team's instance.
func TestBrowserTeamInviteAcceptSwitchLaunch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ lang, accept, switcher string }{
		{"en", "Accept and join", "Team: Vision Lab"},
		{"zh-CN", "接受并加入", "团队：Vision Lab"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			t.Parallel()
			ctx := chromium(t)
			e := newTestEnv(t)
			storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
			_, profTok := e.apiToken("prof@example.com", gpuportal.RoleCustomer)
			ann := storetest.MustCreatePoorUser(t, e.db, "ann@example.com", gpuportal.RoleCustomer)
			st, body := e.apiCall("POST", "/api/v1/teams", profTok, `{"name":"Vision Lab"}`)
			if st != 201 {
				t.Fatalf("make a team = %d %s", st, body)
			}
			team := int64(decodeObject(t, body)["id"].(float64))
			account, _ := e.db.TeamAccount(context.Background(), team)
			if _, err := e.db.Credit(context.Background(), nil, account, gpuportal.CreditRequest{Amount: 1000_00, Note: "grant"}); err != nil {
				t.Fatal(err)
			}
			st, body = e.apiCall("POST", fmt.Sprintf("/api/v1/teams/%d/invitations", team), profTok, `{"email":"ann@example.com","role":"member"}`)
			if st != 201 {
				t.Fatalf("invite = %d %s", st, body)
			}
			link := decodeObject(t, body)["url"].(string)
			path := link[strings.Index(link, "/invitations/"):]
			steps := []chromedp.Action[chromedp.Void]{
				chromedp.Navigate(e.srv.URL + "/login"),
				chromedp.SendKeys(chromedp.CSS(`[data-testid="email"]`), "ann@example.com"),
				chromedp.SendKeys(chromedp.CSS(`[data-testid="password"]`), storetest.Password),
				chromedp.Click(chromedp.CSS(`[data-testid="submit"]`)),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard"]`)),
			}
			if c.lang != "en" {
				steps = append(steps, pickLang(c.lang),
					chromedp.WaitVisible(chromedp.CSS(`html[lang="`+c.lang+`"] [data-testid="dashboard"]`)))
			}
			steps = append(steps,
				chromedp.Navigate(e.srv.URL+path),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="accept-invitation"]`)),
			)
			if err := chromedp.Do(ctx, steps...); err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, ctx, `[data-testid="accept-invitation"]`); got != c.accept {
				t.Errorf("the accept button says %q", got)
			}
			if err := chromedp.Do(ctx,
				chromedp.Click(chromedp.CSS(`[data-testid="accept-invitation"]`)),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="team-name"]`)),
				chromedp.Navigate(e.srv.URL+"/instances"),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-form"]`)),
			); err != nil {
				t.Fatal(err)
			}
			selected, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const s = document.querySelector('[data-testid="team-select"]'); return s.options[s.selectedIndex].textContent.trim(); })()`))
			if err != nil || selected != c.switcher {
				t.Fatalf("the switcher shows %q (%v), want %q", selected, err, c.switcher)
			}
			// Choosing the kind swaps the form for that kind's fields.
			if err := chromedp.Do(ctx, settled(`[data-testid="launch-form"]`),
				chromedp.SetValue(chromedp.CSS(`[data-testid="launch-kind"]`), "on_demand"),
				chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('[data-testid="launch-kind"]'); htmx.process(s.form); s.dispatchEvent(new Event('change', {bubbles: true})); })()`),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="on-demand-minimum"]`)),
				settled(`[data-testid="launch-form"]`),
				chromedp.SendKeys(chromedp.CSS(`[data-testid="launch-command"]`), "python lab_train.py"),
				chromedp.Click(chromedp.CSS(`[data-testid="launch"]`)),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="status"]`)),
			); err != nil {
				t.Fatal(err)
			}
			mine, err := e.db.InstanceList(context.Background(), ann, store.InstanceFilter{})
			if err != nil || len(mine) != 0 {
				t.Errorf("the launch is in her own account: %d %v", len(mine), err)
			}
			asAnn, _ := e.db.ActAs(context.Background(), ann, team)
			theirs, err := e.db.InstanceList(context.Background(), asAnn, store.InstanceFilter{})
			if err != nil || len(theirs) != 1 || theirs[0].CreatedBy == nil || *theirs[0].CreatedBy != ann.ID {
				t.Fatalf("the team's instances: %+v %v", theirs, err)
			}
			// Back to herself: her own list is empty.
			if err := chromedp.Do(ctx,
				chromedp.Navigate(e.srv.URL+"/instances"),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="team-select"]`)),
				chromedp.SetValue(chromedp.CSS(`[data-testid="team-select"]`), "0"),
				chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="team-select"]').form.submit()`),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="launch-form"]`)),
			); err != nil {
				t.Fatal(err)
			}
			waitJS(t, ctx, `(() => { const s = document.querySelector('[data-testid="team-select"]'); return s && s.value === '0'; })()`)
			html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS(`main`)))
			if err != nil || strings.Contains(html, "python lab_train.py") {
				t.Errorf("her own instances show the team's launch (%v)", err)
			}
		})
	}
}
