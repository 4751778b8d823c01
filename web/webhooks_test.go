package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 48) Webhooks through the API: an address that is not public is
// 400 naming url (a name resolving to loopback too), the secret shows
// once, another customer's webhook is 404, a team's webhooks are the
// team's (owners make them, members only read them), and a malformed
// label filter is 400 naming label.
func TestWebhooksThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "n", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, otherTok := e.apiToken("bob@example.com", gpuportal.RoleCustomer)

	for _, bad := range []struct{ body, field string }{
		{`{"url":"http://localhost:9000/hook","events":["*"]}`, "url"},
		{`{"url":"http://127.0.0.1/hook","events":["*"]}`, "url"},
		{`{"url":"http://[::ffff:10.0.0.1]/hook","events":["*"]}`, "url"},
		{`{"url":"http://metadata.internal/","events":["*"]}`, "url"},
		{`{"url":"https://gone.invalid/hook","events":["*"]}`, "url"},
		{`{"url":"https://ci.example.com/hook","events":["instance.exploded"]}`, "events"},
		{`{"url":"https://ci.example.com/hook","events":[]}`, "events"},
	} {
		st, body := e.apiCall("POST", "/api/v1/webhooks", tok, bad.body)
		if !refusedNaming(st, body, bad.field) {
			t.Errorf("POST /webhooks %s = %d %s, want 400 naming %s", bad.body, st, body, bad.field)
		}
	}
	st, body := e.apiCall("POST", "/api/v1/webhooks", tok, `{"url":"https://ci.example.com/hook","events":["instance.interruption_notice","instance.interrupted"]}`)
	if st != http.StatusCreated {
		t.Fatalf("POST /webhooks = %d %s", st, body)
	}
	var hook gpuportal.Webhook
	json.Unmarshal([]byte(body), &hook)
	if !strings.HasPrefix(hook.Secret, "whsec_") || len(hook.Events) != 2 {
		t.Fatalf("made %+v", hook)
	}
	st, body = e.apiCall("GET", "/api/v1/webhooks", tok, "")
	if st != http.StatusOK || strings.Contains(body, hook.Secret) || !strings.Contains(body, "ci.example.com") {
		t.Fatalf("GET /webhooks = %d %s", st, body)
	}
	path := fmt.Sprintf("/api/v1/webhooks/%d", hook.ID)
	for _, call := range [][2]string{{"GET", path}, {"DELETE", path}, {"POST", path + "/test"}, {"POST", path + "/secret"}, {"GET", path + "/deliveries"}} {
		if st, body := e.apiCall(call[0], call[1], otherTok, ""); st != http.StatusNotFound {
			t.Errorf("%s %s by another customer = %d %s", call[0], call[1], st, body)
		}
	}
	st, body = e.apiCall("POST", path+"/test", tok, "")
	if st != http.StatusAccepted || !strings.Contains(body, `"webhook.test"`) {
		t.Fatalf("test = %d %s", st, body)
	}
	st, body = e.apiCall("POST", path+"/secret", tok, "")
	var rolled gpuportal.Webhook
	json.Unmarshal([]byte(body), &rolled)
	if st != http.StatusOK || rolled.Secret == "" || rolled.Secret == hook.Secret {
		t.Fatalf("roll = %d %s", st, body)
	}

	// Labels on a launch; the list filters by them; a malformed filter is
	// 400 naming label.
	st, body = e.apiCall("POST", "/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1,"labels":{"exp":"a"}}`)
	if st != http.StatusCreated {
		t.Fatalf("launch = %d %s", st, body)
	}
	if st, body := e.apiCall("POST", "/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1,"labels":{"Exp":"a"}}`); !refusedNaming(st, body, "labels") {
		t.Fatalf("a bad label key = %d %s", st, body)
	}
	st, body = e.apiCall("GET", "/api/v1/instances?label=exp=a", tok, "")
	if st != http.StatusOK || !strings.Contains(body, `"labels":{"exp":"a"}`) {
		t.Fatalf("by label = %d %s", st, body)
	}
	if st, body := e.apiCall("GET", "/api/v1/instances?label=exp=b", tok, ""); body != "[]\n" {
		t.Fatalf("exp=b = %d %s", st, body)
	}
	for _, q := range []string{"label=noequals", "label=UPPER=x", "label=" + url.QueryEscape("a b=c")} {
		for _, list := range []string{"instances", "reservations", "jobs"} {
			if st, body := e.apiCall("GET", "/api/v1/"+list+"?"+q, tok, ""); !refusedNaming(st, body, "label") {
				t.Errorf("GET /%s?%s = %d %s", list, q, st, body)
			}
		}
	}
	if st, body := e.apiCall("GET", "/api/v1/instances?label=exp=a", otherTok, ""); body != "[]\n" {
		t.Fatalf("another customer's label filter = %d %s", st, body)
	}

	// The catalog, signed in or not (the launch waits for a tick: all 8
	// are free).
	st, body = e.apiCall("GET", "/api/v1/catalog", "", "")
	var cat []gpuportal.CatalogEntry
	json.Unmarshal([]byte(body), &cat)
	if st != http.StatusOK || len(cat) != 1 || cat[0].GPUsPerNode != 8 || cat[0].SpotFreeNow != 8 || cat[0].FreeNow != 8 || cat[0].NextFreeStart == nil || cat[0].GPUName == "" || cat[0].SpotPrice <= 0 {
		t.Fatalf("catalog = %d %s", st, body)
	}

	if st, body := e.apiCall("DELETE", path, tok, ""); st != http.StatusNoContent {
		t.Fatalf("delete = %d %s", st, body)
	}
	if st, _ := e.apiCall("GET", path, tok, ""); st != http.StatusNotFound {
		t.Fatalf("a deleted webhook = %d", st)
	}
}

// (issue 48) A team's webhooks: owners and admins make them; a member
// reads them and is refused a change.
func TestTeamWebhooks(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	prof, profTok := e.apiToken("prof@example.com", gpuportal.RoleCustomer)
	ann, annTok := e.apiToken("ann@example.com", gpuportal.RoleCustomer)
	team, err := e.db.CreateTeam(t.Context(), prof, "Lab")
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := e.db.Invite(t.Context(), prof, team.ID, ann.Email, gpuportal.TeamMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.AcceptInvitation(t.Context(), ann, token); err != nil {
		t.Fatal(err)
	}
	st, body := e.teamCall("POST", "/api/v1/webhooks", profTok, team.ID, `{"url":"https://lab.example.com/hook","events":["*"]}`)
	if st != http.StatusCreated || !strings.Contains(body, fmt.Sprintf(`"team_id":%d`, team.ID)) {
		t.Fatalf("the owner's team webhook = %d %s", st, body)
	}
	if st, body := e.teamCall("POST", "/api/v1/webhooks", annTok, team.ID, `{"url":"https://lab.example.com/2","events":["*"]}`); st != http.StatusForbidden {
		t.Fatalf("a member's team webhook = %d %s", st, body)
	}
	if st, body := e.teamCall("GET", "/api/v1/webhooks", annTok, team.ID, ""); st != http.StatusOK || !strings.Contains(body, "lab.example.com/hook") {
		t.Fatalf("a member reads the team's webhooks = %d %s", st, body)
	}
	if st, body := e.apiCall("GET", "/api/v1/webhooks", profTok, ""); body != "[]\n" {
		t.Fatalf("the owner's own webhooks = %d %s", st, body)
	}
}

// (issue 48) The page: add a webhook (the secret shown once, on the
// answer, never through a cookie), a refused address shown on the form,
// the test button's delivery listed, delete.
func TestWebhooksPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	p := b.get("/webhooks")
	if p.status != http.StatusOK || !strings.Contains(p.body, `data-testid="no-webhooks"`) {
		t.Fatalf("/webhooks = %d", p.status)
	}
	p = b.post("/webhooks", url.Values{"url": {"http://localhost:8080/hook"}, "events": {"*"}})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, `data-testid="error-url"`) || !strings.Contains(p.body, "localhost:8080/hook") {
		t.Fatalf("a loopback webhook = %d", p.status)
	}
	p = b.post("/webhooks", url.Values{"url": {"https://ci.example.com/hook"}, "events": {"instance.interrupted", "job.finished"}})
	if p.status != http.StatusCreated || !strings.Contains(p.body, `data-testid="webhook-secret">whsec_`) {
		t.Fatalf("add = %d", p.status)
	}
	p = b.get("/webhooks")
	if strings.Contains(p.body, "whsec_") || !strings.Contains(p.body, "ci.example.com/hook") || !strings.Contains(p.body, "job.finished") {
		t.Fatal("the list shows the secret again, or not the webhook")
	}
	alice, err := e.db.UserByEmail(t.Context(), "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := e.db.Webhooks(t.Context(), alice)
	if err != nil || len(hooks) != 1 {
		t.Fatalf("webhooks = %v, %v", hooks, err)
	}
	id := hooks[0].ID
	p = b.post(fmt.Sprintf("/webhooks/%d/test", id), nil)
	if p.status != http.StatusSeeOther {
		t.Fatalf("test = %d", p.status)
	}
	p = b.get("/webhooks")
	if !strings.Contains(p.body, `data-testid="delivery"`) || !strings.Contains(p.body, "webhook.test") {
		t.Fatal("the test delivery is not listed")
	}
	p = b.post(fmt.Sprintf("/webhooks/%d/delete", id), nil)
	if p.status != http.StatusSeeOther {
		t.Fatalf("delete = %d", p.status)
	}
	if p = b.get("/webhooks"); !strings.Contains(p.body, `data-testid="no-webhooks"`) {
		t.Fatal("deleted, still listed")
	}
}
