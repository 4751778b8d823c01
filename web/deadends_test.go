package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 28) No dead ends: a form the server refuses is shown again, with
// what was typed and every problem next to its field, never "That did
// not work → Back to the home page".
func TestRefusedFormsStayOnTheForm(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	b := e.browser()
	b.get("/signup")
	p := b.post("/signup", url.Values{"email": {"not-an-address"}, "password": {"short"}, "name": {""}, "phone": {"12"}})
	if p.status != http.StatusBadRequest {
		t.Fatalf("bad sign-up = %d", p.status)
	}
	for _, field := range []string{"email", "password", "name", "phone"} {
		if !strings.Contains(p.body, `data-testid="error-`+field+`"`) {
			t.Errorf("the sign-up page does not say what is wrong with %s", field)
		}
	}
	if !strings.Contains(p.body, `value="not-an-address"`) {
		t.Error("the sign-up page lost the email typed")
	}
	// The JSON API lists them all too.
	status, body := e.apiCall("POST", "/api/v1/auth/signup", "", `{"email":"x","password":"short","name":""}`)
	if status != http.StatusBadRequest || strings.Count(body, `"field":`) < 4 { // the first, then each in fields
		t.Errorf("bad sign-up by the API = %d %s; want every field", status, body)
	}
	if _, err := e.db.UserByEmail(t.Context(), "not-an-address"); err == nil {
		t.Error("a refused sign-up made an account")
	}

	storetest.MustCreatePoorUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	alice := e.browser()
	alice.login("alice@example.com", storetest.Password)
	alice.get("/ledger")
	for _, amount := range []string{"abc", "0.5", "2000000"} {
		p := alice.post("/topups", url.Values{"amount": {amount}, "next": {"/waitlist"}})
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, `data-testid="topup-error"`) ||
			!strings.Contains(p.body, `value="`+amount+`"`) || !strings.Contains(p.body, `name="next" value="/waitlist"`) {
			t.Errorf("top-up of %q = %d; want the ledger's form again with the amount, where to go back and why", amount, p.status)
		}
	}
	if list, _ := e.db.TopUpPage(t.Context(), mustUser(t, e.db, "alice@example.com"), store.Page{Limit: 10}); len(list) != 0 {
		t.Errorf("refused top-ups made %d", len(list))
	}
}

// (issue 28) A calendar link to a week that has passed shows this week
// and says why, instead of an old week nobody can book.
func TestBrowserPastWeekSaysSo(t *testing.T) {
	t.Parallel()
	ctx := chromium(t)
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/calendar?model=a100-80g&region=cd-1&week=2026-11-02"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="week-notice"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="week-notice"]`); !strings.Contains(got, "2026-11-02") || !strings.Contains(got, "current week") {
		t.Errorf("past week notice %q", got)
	}
	// Chinese readers get it in Chinese.
	if err := chromedp.Do(ctx,
		pickLang("zh-CN"),
		chromedp.WaitVisible(chromedp.CSS(`html[lang="zh-CN"] [data-testid="week-notice"]`)),
	); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, `[data-testid="week-notice"]`); !strings.Contains(got, "本周") {
		t.Errorf("past week notice in Chinese %q", got)
	}
}
