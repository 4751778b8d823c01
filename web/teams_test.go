package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// teamCall is an API call acting for a team (X-Team).
func (e *testEnv) teamCall(method, path, token string, team any, body string) (int, string) {
	e.t.Helper()
	return e.apiCallWith(method, path, token, body, http.Header{"X-Team": {fmt.Sprint(team)}})
}

// (issue 47) A lab on gpuportal: the owner makes a team, an admin credits
// it, a student invited by email accepts on the invitation's page (which
// switches her browser to the team), launches for the team with X-Team
// (paid by the team, hers in created_by); a viewer reads but may not
// launch (403 naming the role it takes), a member may not read the
// money, an outsider learns nothing (404), her own account stays apart,
// and the team's audit trail has the launch by her.
func TestTeamFromInvitationToLaunch(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	prof, profTok := e.apiToken("prof@example.com", gpuportal.RoleCustomer)
	_, adminTok := e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	ann := storetest.MustCreatePoorUser(t, e.db, "ann@example.com", gpuportal.RoleCustomer)
	annTok := e.tokenFor(ann)
	eve := storetest.MustCreatePoorUser(t, e.db, "eve@example.com", gpuportal.RoleCustomer)
	eveTok := e.tokenFor(eve)
	_, outsiderTok := e.apiToken("out@example.com", gpuportal.RoleCustomer)
	_ = prof

	st, body := e.apiCall("POST", "/api/v1/teams", profTok, `{"name":"Vision Lab"}`)
	if st != http.StatusCreated {
		t.Fatalf("make a team = %d %s", st, body)
	}
	team := int64(decodeObject(t, body)["id"].(float64))
	if st, body := e.apiCall("POST", fmt.Sprintf("/api/v1/admin/teams/%d/credit", team), adminTok, `{"amount_fen":100000,"note":"lab grant"}`); st != http.StatusOK {
		t.Fatalf("credit the team = %d %s", st, body)
	}
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/teams/%d/invitations", team), annTok, `{"email":"x@example.com","role":"member"}`); st != http.StatusNotFound {
		t.Errorf("an outsider invites = %d", st)
	}
	st, body = e.apiCall("POST", fmt.Sprintf("/api/v1/teams/%d/invitations", team), profTok, `{"email":"ann@example.com","role":"member"}`)
	if st != http.StatusCreated {
		t.Fatalf("invite = %d %s", st, body)
	}
	link := decodeObject(t, body)["url"].(string)
	path := link[strings.Index(link, "/invitations/"):]

	// Ann accepts in her browser.
	b := e.browser()
	b.login("ann@example.com", storetest.Password)
	if p := b.get(path); !strings.Contains(p.body, `data-testid="accept-invitation"`) || !strings.Contains(p.body, "Vision Lab") {
		t.Fatalf("the invitation's page: %d %s", p.status, p.body)
	}
	if p := b.post(path+"/accept", nil); p.status != http.StatusSeeOther {
		t.Fatalf("accept = %d %s", p.status, p.body)
	}
	if p := b.get("/instances"); !strings.Contains(p.body, `data-testid="team-select"`) || !strings.Contains(p.body, "Team: Vision Lab") {
		t.Error("the header has no switcher showing the team")
	}
	if p := b.post(path+"/accept", nil); p.status != http.StatusSeeOther || !strings.Contains(b.get(p.location).body, "used already") {
		t.Errorf("accepting twice = %d", p.status)
	}

	// She launches for the team: the team pays, she made it.
	st, body = e.teamCall("POST", "/api/v1/instances", annTok, team, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1}`)
	if st != http.StatusCreated {
		t.Fatalf("launch for the team = %d %s", st, body)
	}
	inst := decodeObject(t, body)
	if inst["team_id"] != float64(team) || inst["created_by"] != float64(ann.ID) {
		t.Errorf("the launch: team_id %v, created_by %v", inst["team_id"], inst["created_by"])
	}
	if st, _ := e.teamCall("GET", "/api/v1/balance", annTok, team, ""); st != http.StatusForbidden {
		t.Errorf("a member reads the team's balance = %d", st)
	}
	if st, body := e.teamCall("GET", "/api/v1/balance", profTok, team, ""); st != http.StatusOK || !strings.Contains(body, `"balance_fen":100000`) {
		t.Errorf("the owner reads the team's balance = %d %s", st, body)
	}
	st, body = e.apiCall("GET", "/api/v1/instances", annTok, "")
	if st != http.StatusOK || strings.Contains(body, fmt.Sprintf(`"id":%v,`, inst["id"])) {
		t.Errorf("the team's instance in her own list: %s", body)
	}

	// A viewer reads, and may not launch.
	st, body = e.apiCall("POST", fmt.Sprintf("/api/v1/teams/%d/invitations", team), profTok, `{"email":"eve@example.com","role":"viewer"}`)
	if st != http.StatusCreated {
		t.Fatalf("invite a viewer = %d %s", st, body)
	}
	token := decodeObject(t, body)["url"].(string)
	token = token[strings.LastIndex(token, "/")+1:]
	if st, body := e.apiCall("POST", "/api/v1/invitations/"+token+"/accept", annTok, ""); st != http.StatusForbidden {
		t.Errorf("another address accepts = %d %s", st, body)
	}
	if st, body := e.apiCall("POST", "/api/v1/invitations/"+token+"/accept", eveTok, ""); st != http.StatusOK || !strings.Contains(body, `"role":"viewer"`) {
		t.Fatalf("the viewer accepts = %d %s", st, body)
	}
	if st, body := e.teamCall("POST", "/api/v1/instances", eveTok, team, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1}`); st != http.StatusForbidden || !strings.Contains(body, "member") {
		t.Errorf("a viewer launches = %d %s", st, body)
	}
	if st, body := e.teamCall("GET", "/api/v1/instances", eveTok, team, ""); st != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"id":%v`, inst["id"])) {
		t.Errorf("a viewer lists the team's instances = %d %s", st, body)
	}
	if st, _ := e.teamCall("POST", fmt.Sprintf("/api/v1/instances/%v/stop", inst["id"]), eveTok, team, ""); st != http.StatusForbidden {
		t.Errorf("a viewer stops an instance = %d", st)
	}
	// Outsiders learn nothing: the team, its instances, its members.
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/instances"}, {"GET", fmt.Sprintf("/api/v1/instances/%v", inst["id"])}, {"GET", "/api/v1/balance"},
	} {
		if st, _ := e.teamCall(c.method, c.path, outsiderTok, team, ""); st != http.StatusNotFound {
			t.Errorf("an outsider %s %s for the team = %d", c.method, c.path, st)
		}
	}
	for _, p := range []string{fmt.Sprintf("/api/v1/teams/%d", team), fmt.Sprintf("/api/v1/teams/%d/members", team), fmt.Sprintf("/api/v1/instances/%v", inst["id"])} {
		if st, _ := e.apiCall("GET", p, outsiderTok, ""); st != http.StatusNotFound {
			t.Errorf("an outsider GET %s = %d", p, st)
		}
	}
	// Members with what each spent; the audit trail has her launch.
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/teams/%d/members", team), profTok, ""); st != http.StatusOK || !strings.Contains(body, "ann@example.com") {
		t.Errorf("members = %d %s", st, body)
	}
	st, body = e.apiCall("GET", fmt.Sprintf("/api/v1/teams/%d/audit", team), profTok, "")
	if st != http.StatusOK || !strings.Contains(body, "POST /instances") || !strings.Contains(body, "ann@example.com") {
		t.Errorf("the audit trail = %d %s", st, body)
	}
	if st, _ := e.apiCall("GET", fmt.Sprintf("/api/v1/teams/%d/audit", team), annTok, ""); st != http.StatusForbidden {
		t.Errorf("a member reads the audit trail = %d", st)
	}
	// A team token acts for the team alone; a read token changes nothing.
	st, body = e.apiCall("POST", "/api/v1/auth/tokens", "", fmt.Sprintf(`{"email":"ann@example.com","password":%q,"name":"lab script","team_id":%d}`, storetest.Password, team))
	if st != http.StatusCreated {
		t.Fatalf("a team token = %d %s", st, body)
	}
	teamTok := decodeObject(t, body)["token"].(string)
	if st, body := e.apiCall("GET", "/api/v1/instances", teamTok, ""); st != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"id":%v`, inst["id"])) {
		t.Errorf("the team token lists the team's instances = %d %s", st, body)
	}
	if st, _ := e.apiCall("GET", "/api/v1/ssh-keys", teamTok, ""); st != http.StatusForbidden {
		t.Errorf("the team token reads her own keys = %d", st)
	}
	st, body = e.apiCall("POST", "/api/v1/auth/tokens", "", fmt.Sprintf(`{"email":"prof@example.com","password":%q,"name":"dashboard","scope":"read"}`, storetest.Password))
	if st != http.StatusCreated {
		t.Fatalf("a read token = %d %s", st, body)
	}
	readTok := decodeObject(t, body)["token"].(string)
	if st, _ := e.teamCall("GET", "/api/v1/instances", readTok, team, ""); st != http.StatusOK {
		t.Errorf("a read token lists = %d", st)
	}
	if st, _ := e.teamCall("POST", fmt.Sprintf("/api/v1/instances/%v/stop", inst["id"]), readTok, team, ""); st != http.StatusForbidden {
		t.Errorf("a read token stops an instance = %d", st)
	}
	if st, _ := e.apiCall("POST", "/api/v1/teams", readTok, `{"name":"x"}`); st != http.StatusForbidden {
		t.Errorf("a read token makes a team = %d", st)
	}
	// The owner's page lists the members and lets them set limits.
	pb := e.browser()
	pb.login("prof@example.com", storetest.Password)
	page := pb.get(fmt.Sprintf("/teams/%d", team))
	if !strings.Contains(page.body, `data-testid="member-ann@example.com"`) || !strings.Contains(page.body, `data-testid="invite-form"`) {
		t.Fatalf("the team's page: %s", page.body)
	}
	if p := pb.post(fmt.Sprintf("/teams/%d/members/%d", team, ann.ID), map[string][]string{"role": {"member"}, "monthly_spend_limit": {"500"}, "max_running_gpus": {"2"}}); p.status != http.StatusSeeOther {
		t.Fatalf("set limits = %d %s", p.status, p.body)
	}
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/teams/%d/members", team), profTok, ""); !strings.Contains(body, `"monthly_spend_limit_fen":50000`) || !strings.Contains(body, `"max_running_gpus":2`) {
		t.Errorf("limits from the page = %d %s", st, body)
	}
	// The owner sees the members' team tokens and revokes one.
	st, body = e.apiCall("GET", fmt.Sprintf("/api/v1/teams/%d/tokens", team), profTok, "")
	if st != http.StatusOK || !strings.Contains(body, `"made_by":"ann@example.com"`) || !strings.Contains(body, `"name":"lab script"`) {
		t.Fatalf("the team's tokens = %d %s", st, body)
	}
	if st, _ := e.apiCall("GET", fmt.Sprintf("/api/v1/teams/%d/tokens", team), annTok, ""); st != http.StatusForbidden {
		t.Errorf("a member lists the team's tokens = %d", st)
	}
	_, spare, err := e.db.CreateScopedToken(t.Context(), ann.ID, "spare", team, gpuportal.ScopeWrite)
	if err != nil {
		t.Fatal(err)
	}
	var listed []gpuportal.APIToken
	_, body = e.apiCall("GET", fmt.Sprintf("/api/v1/teams/%d/tokens", team), profTok, "")
	if err := json.Unmarshal([]byte(body), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("the team's tokens: %s", body)
	}
	if st, _ := e.apiCall("DELETE", fmt.Sprintf("/api/v1/teams/%d/tokens/%d", team, listed[0].ID), profTok, ""); st != http.StatusNoContent {
		t.Errorf("the owner revokes a team token = %d", st)
	}
	if st, _ := e.apiCall("GET", "/api/v1/instances", spare, ""); st != http.StatusUnauthorized {
		t.Errorf("a revoked team token = %d", st)
	}
	// Removed, her team token is refused at once.
	if st, _ := e.apiCall("DELETE", fmt.Sprintf("/api/v1/teams/%d/members/%d", team, ann.ID), profTok, ""); st != http.StatusNoContent {
		t.Fatalf("remove = %d", st)
	}
	if st, _ := e.apiCall("GET", "/api/v1/instances", teamTok, ""); st != http.StatusNotFound {
		t.Errorf("a removed member's team token = %d", st)
	}
}

// (issue 47) The role rule over every documented route that acts for a
// team, generated from the API document rather than listed by hand: an
// outsider naming the team is 404 on every one, reading or changing; a
// viewer changes none of them, billing touches no resource and a member
// no money (403) — each refused before anything is read or changed.
func TestTeamRoleMatrixOverEveryRoute(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	doc, _ := loadAPIDoc(t)
	_, ownerTok := e.apiToken("owner@example.com", gpuportal.RoleCustomer)
	st, body := e.apiCall("POST", "/api/v1/teams", ownerTok, `{"name":"Matrix"}`)
	if st != http.StatusCreated {
		t.Fatalf("make a team = %d %s", st, body)
	}
	team := int64(decodeObject(t, body)["id"].(float64))
	tokens := map[string]string{}
	for _, role := range []string{gpuportal.TeamViewer, gpuportal.TeamBilling, gpuportal.TeamMember} {
		u, tok := e.apiToken(role+"@example.com", gpuportal.RoleCustomer)
		st, body := e.apiCall("POST", fmt.Sprintf("/api/v1/teams/%d/invitations", team), ownerTok, fmt.Sprintf(`{"email":%q,"role":%q}`, u.Email, role))
		if st != http.StatusCreated {
			t.Fatalf("invite = %d %s", st, body)
		}
		link := decodeObject(t, body)["url"].(string)
		if st, body := e.apiCall("POST", "/api/v1/invitations/"+link[strings.LastIndex(link, "/")+1:]+"/accept", tok, ""); st != http.StatusOK {
			t.Fatalf("accept = %d %s", st, body)
		}
		tokens[role] = tok
	}
	_, outsider := e.apiToken("outsider@example.com", gpuportal.RoleCustomer)
	checked := 0
	for _, path := range doc.Paths.InMatchingOrder() {
		area := teamAreaOf(path)
		if area == "" {
			continue
		}
		concrete := path
		for strings.Contains(concrete, "{") {
			a, b := strings.Index(concrete, "{"), strings.Index(concrete, "}")
			concrete = concrete[:a] + "1" + concrete[b+1:]
		}
		for method := range doc.Paths.Find(path).Operations() {
			change := method != http.MethodGet
			body := ""
			if change {
				body = "{}"
			}
			if st, _ := e.teamCall(method, "/api/v1"+concrete, outsider, team, body); st != http.StatusNotFound {
				t.Errorf("an outsider %s %s for the team = %d, want 404", method, path, st)
			}
			for role, tok := range tokens {
				if gpuportal.TeamMay(role, area, change) {
					continue
				}
				if st, _ := e.teamCall(method, "/api/v1"+concrete, tok, team, body); st != http.StatusForbidden {
					t.Errorf("a %s %s %s = %d, want 403", role, method, path, st)
				}
			}
			checked++
		}
	}
	if checked < 40 {
		t.Errorf("only %d team routes checked", checked)
	}
}

// (issue 47) Platform admins see teams on /admin/users' Teams tab (their
// accounts, creditable there), apart from people.
func TestAdminSeesTeamsOnTheirOwnTab(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	_, ownerTok := e.apiToken("owner@example.com", gpuportal.RoleCustomer)
	storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	if st, body := e.apiCall("POST", "/api/v1/teams", ownerTok, `{"name":"Vision Lab"}`); st != http.StatusCreated {
		t.Fatalf("make a team = %d %s", st, body)
	}
	b := e.browser()
	b.login("admin@example.com", storetest.Password)
	people, teams := b.get("/admin/users").body, b.get("/admin/users?tab=teams").body
	if strings.Contains(people, "Vision Lab") || !strings.Contains(people, "owner@example.com") {
		t.Error("the people tab lists a team, or not its owner")
	}
	if !strings.Contains(teams, "Vision Lab") || !strings.Contains(teams, "Team #") || strings.Contains(teams, "owner@example.com") || !strings.Contains(teams, `data-testid="credit-form"`) {
		t.Errorf("the teams tab: %s", teams)
	}
}

// (issue 47, the moonshot) A team lends its idle GPUs, from the API and
// the pages: shares set on the members list (refused past the team's
// quota), a run past one's share marked borrowed at the spot price on its
// page, the team's page saying who is guaranteed what.
func TestTeamLendingThroughTheAPIAndThePages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, profTok := e.apiToken("prof@example.com", gpuportal.RoleCustomer)
	ann := storetest.MustCreatePoorUser(t, e.db, "ann@example.com", gpuportal.RoleCustomer)
	annTok := e.tokenFor(ann)
	st, body := e.apiCall("POST", "/api/v1/teams", profTok, `{"name":"Vision Lab"}`)
	if st != http.StatusCreated {
		t.Fatalf("make a team = %d %s", st, body)
	}
	team := int64(decodeObject(t, body)["id"].(float64))
	account, err := e.db.TeamAccount(ctx, team)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Credit(ctx, nil, account, gpuportal.CreditRequest{Amount: 1000_00, Note: "lab grant"}); err != nil {
		t.Fatal(err)
	}
	quotas := storetest.TestQuotas
	quotas.MaxRunningGPUs = 4
	admin := storetest.MustCreateUser(t, e.db, "admin@example.com", gpuportal.RoleAdmin)
	if _, err := e.db.UpdateAccount(ctx, admin, account, store.AccountUpdate{Quotas: &quotas}); err != nil {
		t.Fatal(err)
	}
	st, body = e.apiCall("POST", fmt.Sprintf("/api/v1/teams/%d/invitations", team), profTok, `{"email":"ann@example.com","role":"member"}`)
	if st != http.StatusCreated {
		t.Fatalf("invite = %d %s", st, body)
	}
	link := decodeObject(t, body)["url"].(string)
	if st, body := e.apiCall("POST", "/api/v1"+link[strings.Index(link, "/invitations/"):]+"/accept", annTok, ""); st != http.StatusOK {
		t.Fatalf("accept = %d %s", st, body)
	}
	member := fmt.Sprintf("/api/v1/teams/%d/members/%d", team, ann.ID)
	if st, body := e.apiCall("PUT", member, profTok, `{"reserved_running_gpus":5}`); st != http.StatusUnprocessableEntity || !strings.Contains(body, `"field":"reserved_running_gpus"`) {
		t.Errorf("a share past the team's quota = %d %s", st, body)
	}
	if st, body := e.apiCall("PUT", member, profTok, `{"reserved_running_gpus":-1}`); st != http.StatusBadRequest {
		t.Errorf("a negative share = %d %s", st, body)
	}
	if st, body := e.apiCall("PUT", member, annTok, `{"reserved_running_gpus":4}`); st != http.StatusForbidden {
		t.Errorf("a member sets their own share = %d %s", st, body)
	}
	if st, body := e.apiCall("PUT", member, profTok, `{"reserved_running_gpus":2}`); st != http.StatusOK || !strings.Contains(body, `"reserved_running_gpus":2`) {
		t.Fatalf("Ann's share = %d %s", st, body)
	}
	launch := func(count int) map[string]any {
		t.Helper()
		st, body := e.teamCall("POST", "/api/v1/instances", annTok, team, fmt.Sprintf(`{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":%d}`, count))
		if st != http.StatusCreated {
			t.Fatalf("launch %d = %d %s", count, st, body)
		}
		return decodeObject(t, body)
	}
	own, lent := launch(2), launch(2)
	if own["borrowed"] != nil || lent["borrowed"] != true || lent["price_per_gpu_hour_fen"].(float64) >= own["price_per_gpu_hour_fen"].(float64) {
		t.Errorf("within and past the share: %v at %v, %v at %v", own["borrowed"], own["price_per_gpu_hour_fen"], lent["borrowed"], lent["price_per_gpu_hour_fen"])
	}
	if st, body := e.teamCall("POST", "/api/v1/instances", annTok, team, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1}`); st != http.StatusUnprocessableEntity || !strings.Contains(body, `"field":"quota"`) {
		t.Errorf("borrowing past the idle GPUs = %d %s", st, body)
	}

	for _, lang := range []string{"en", "zh-CN"} {
		b := e.browser()
		b.login("prof@example.com", storetest.Password)
		b.post("/lang", url.Values{"lang": {lang}, "next": {"/"}})
		b.post("/teams/switch", url.Values{"team": {fmt.Sprint(team)}, "next": {"/instances"}})
		words := map[string][2]string{"en": {"borrowed from the team", "2 guaranteed"}, "zh-CN": {"借自团队", "保证 2 块"}}[lang]
		if p := b.get(fmt.Sprintf("/instances/%d", int64(lent["id"].(float64)))); !strings.Contains(p.body, `data-testid="borrowed"`) || !strings.Contains(p.body, words[0]) {
			t.Errorf("%s: the borrowed run's page does not say so: %d", lang, p.status)
		}
		if p := b.get(fmt.Sprintf("/instances/%d", int64(own["id"].(float64)))); strings.Contains(p.body, `data-testid="borrowed"`) {
			t.Errorf("%s: a run within the share marked borrowed", lang)
		}
		if p := b.get(fmt.Sprintf("/teams/%d", team)); !strings.Contains(p.body, words[1]) || !strings.Contains(p.body, `name="reserved_running_gpus"`) {
			t.Errorf("%s: the team's page does not show the share", lang)
		}
	}
	// The form's empty share removes it: no member has one, the team lends
	// no more and its quota is one pool again.
	b := e.browser()
	b.login("prof@example.com", storetest.Password)
	if p := b.post(fmt.Sprintf("/teams/%d/members/%d", team, ann.ID), url.Values{"role": {"member"}}); p.status != http.StatusSeeOther {
		t.Fatalf("the member form = %d %s", p.status, p.body)
	}
	if st, body := e.apiCall("GET", fmt.Sprintf("/api/v1/teams/%d/members", team), profTok, ""); st != http.StatusOK || strings.Contains(body, `"reserved_running_gpus":2`) {
		t.Errorf("the share removed = %d %s", st, body)
	}
}
