package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 48) The CLI covers what scripts drive: labelled launches found
// by label, every row of a list past the API's page (and --limit to
// cut), webhooks from add to their deliveries, the catalog, top-ups,
// the waitlist, booking an offering and extending it, drills, --output
// json, completion for three shells; the server's refusal printed with
// exit 1.
func TestCLICoversAutomation(t *testing.T) {
	url, _ := portalAndStore(t)
	env := map[string]string{"GPU_CONFIG": filepath.Join(t.TempDir(), "cli.json"), "LANG": "en_US.UTF-8"}
	must := func(args ...string) string {
		t.Helper()
		r := gpu(t, env, "", args...)
		if r.code != exitOK {
			t.Fatalf("gpu %s: %+v", strings.Join(args, " "), r)
		}
		return r.stdout
	}
	if r := gpu(t, env, storetest.Password+"\n", "login", "--url", url, "--email", "alice@example.com"); r.code != exitOK {
		t.Fatalf("login: %+v", r)
	}
	for _, label := range []string{"exp=a", "exp=a", "exp=b"} {
		must("launch", "--kind", "spot", "--model", "a100-80g", "--label", label, "--label", "owner=ci", "--", "sleep", "1")
	}
	var list []gpuportal.Instance
	if err := json.Unmarshal([]byte(must("--output", "json", "instances", "--label", "exp=a")), &list); err != nil || len(list) != 2 || list[0].Labels["owner"] != "ci" {
		t.Fatalf("instances --label exp=a = %+v, %v", list, err)
	}
	if r := gpu(t, env, "", "instances", "--label", "Exp"); r.code != exitRefused || !strings.Contains(r.stderr, "label filter") {
		t.Fatalf("a malformed label filter: %+v", r)
	}
	if r := gpu(t, env, "", "launch", "--model", "a100-80g", "--label", "BAD=1"); r.code != exitRefused || !strings.Contains(r.stderr, "Label key") {
		t.Fatalf("a bad label: %+v", r)
	}

	// Webhooks: add, sixty test events, every delivery listed.
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer rcv.Close()
	out := must("webhooks", "add", rcv.URL+"/hook", "--events", "instance.interrupted,job.finished")
	if !strings.Contains(out, "whsec_") {
		t.Fatalf("webhooks add: %s", out)
	}
	var hooks []gpuportal.Webhook
	json.Unmarshal([]byte(must("--json", "webhooks", "list")), &hooks)
	if len(hooks) != 1 || len(hooks[0].Events) != 2 {
		t.Fatalf("webhooks list: %+v", hooks)
	}
	id := hooks[0].ID
	for range 60 {
		must("webhooks", "test", itoa(id))
	}
	var deliveries []gpuportal.WebhookDelivery
	json.Unmarshal([]byte(must("--json", "webhooks", "deliveries", itoa(id))), &deliveries)
	if len(deliveries) != 60 {
		t.Fatalf("deliveries listed: %d of 60", len(deliveries))
	}
	json.Unmarshal([]byte(must("--json", "webhooks", "deliveries", itoa(id), "--limit", "7")), &deliveries)
	if len(deliveries) != 7 {
		t.Fatalf("--limit 7 listed %d", len(deliveries))
	}
	if out := must("webhooks", "redeliver", itoa(id), itoa(deliveries[0].ID)); !strings.Contains(out, "sent again") {
		t.Fatalf("redeliver: %s", out)
	}
	if r := gpu(t, env, "", "webhooks", "add", "ftp://x.example.com/"); r.code != exitRefused || !strings.Contains(r.stderr, "http://") {
		t.Fatalf("a bad webhook address: %+v", r)
	}
	must("webhooks", "roll", itoa(id))
	must("webhooks", "delete", itoa(id))

	if out := must("catalog"); !strings.Contains(out, "a100-80g") || !strings.Contains(out, "NEXT WHOLE NODE") {
		t.Fatalf("catalog: %s", out)
	}
	if out := must("topup", "500", "--provider", "test"); !strings.Contains(out, "pay at http") {
		t.Fatalf("topup: %s", out)
	}

	// Book the first offering of a whole node, then extend it.
	var r gpuportal.Reservation
	if err := json.Unmarshal([]byte(must("--json", "book", "--model", "a100-80g", "--count", "8", "--offering", "1", "--hours", "4", "--sort", "start", "--label", "exp=a")), &r); err != nil || r.Hours() != 4 || r.Labels["exp"] != "a" {
		t.Fatalf("book --offering 1: %+v %v", r, err)
	}
	if out := must("extend", itoa(r.ID)); !strings.Contains(out, "extended by up to") {
		t.Fatalf("extend without --hours: %s", out)
	}
	if out := must("extend", itoa(r.ID), "--hours", "1"); !strings.Contains(out, "now ends") {
		t.Fatalf("extend --hours 1: %s", out)
	}
	// Wait for the hours booked: join, list, leave.
	start := r.Start.Local().Format("2006-01-02T15:04")
	if out := must("waitlist", "join", "--model", "a100-80g", "--count", "8", "--start", start, "--hours", "4"); !strings.Contains(out, "On the waitlist") {
		t.Fatalf("waitlist join: %s", out)
	}
	var entries []gpuportal.WaitlistEntry
	json.Unmarshal([]byte(must("--json", "waitlist")), &entries)
	if len(entries) != 1 {
		t.Fatalf("waitlist: %+v", entries)
	}
	must("waitlist", "leave", itoa(entries[0].ID))
	if r := gpu(t, env, "", "drill", itoa(list[0].ID)); r.code != exitRefused {
		t.Fatalf("a drill of an instance that does not run: %+v", r)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := must("completion", shell); !strings.Contains(out, "webhooks") || !strings.Contains(out, "waitlist") {
			t.Fatalf("completion %s: %s", shell, out)
		}
	}
	if r := gpu(t, env, "", "--output", "yaml", "instances"); r.code != exitUsage {
		t.Fatalf("--output yaml: %+v", r)
	}
	if out := must("help"); !strings.Contains(out+gpu(t, env, "", "help").stderr, "Exit status") {
		t.Fatal("the usage does not document the exit statuses")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
