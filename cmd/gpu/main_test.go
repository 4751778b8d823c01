package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
	"gpuportal/web"
)

// portalFor is a real portal (web server on a real SQLite file) with a
// fleet and a customer whose password is storetest.Password.
func portalFor(t *testing.T) string {
	t.Helper()
	url, _ := portalAndStore(t)
	return url
}

// portalAndStore is portalFor with its store, for tests that make more
// of it.
func portalAndStore(t *testing.T) (string, *store.DB) {
	t.Helper()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	storetest.MustCreateUser(t, db, "alice@example.com", gpuportal.RoleCustomer)
	s, err := web.New(context.Background(), web.Config{DB: db, Clock: clock, Location: storetest.Shanghai,
		SSH: web.SSHEndpoint{Host: "127.0.0.1", Port: 2222, Fingerprint: "SHA256:test"}, TestPayments: true,
		WebhookAllowPrivate: true}) // the tests' receivers listen on loopback
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL, db
}

type result struct {
	code           int
	stdout, stderr string
}

func gpu(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// (issue 27, part) `gpu` over the public API: log in (the token kept
// 0600), models, launch, instances as a table and as JSON, stop, balance,
// ssh with the gateway's port and the instance as the user; refusals exit
// 1 with the portal's message, bad usage 2, an unreachable portal 3;
// messages in Chinese under LANG=zh_CN.
func TestCLIOverThePublicAPI(t *testing.T) {
	url := portalFor(t)
	dir := t.TempDir()
	env := map[string]string{"GPU_CONFIG": filepath.Join(dir, "cli.json"), "LANG": "en_US.UTF-8"}

	if r := gpu(t, env, "", "instances"); r.code != exitUsage || !strings.Contains(r.stderr, "not logged in") {
		t.Fatalf("before login: %+v", r)
	}
	if r := gpu(t, env, "wrong-password\n", "login", "--url", url, "--email", "alice@example.com"); r.code != exitRefused {
		t.Fatalf("a wrong password: %+v", r)
	}
	if r := gpu(t, env, storetest.Password+"\n", "login", "--url", url, "--email", "alice@example.com"); r.code != exitOK || !strings.Contains(r.stdout, "alice@example.com") {
		t.Fatalf("login: %+v", r)
	}
	if st, err := os.Stat(env["GPU_CONFIG"]); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the kept token: %v %v", st, err)
	}

	if r := gpu(t, env, "", "models"); r.code != exitOK || !strings.Contains(r.stdout, "a100-80g") || !strings.Contains(r.stdout, "SPOT/GPU-H") {
		t.Fatalf("models: %+v", r)
	}
	if r := gpu(t, env, "", "launch", "--kind", "on_demand"); r.code != exitUsage {
		t.Fatalf("a launch without a model: %+v", r)
	}
	if r := gpu(t, env, "", "launch", "--kind", "on_demand", "--model", "a100-80g", "--count", "99", "--", "train"); r.code != exitRefused || !strings.Contains(r.stderr, "422") && !strings.Contains(r.stderr, "409") && !strings.Contains(r.stderr, "400") {
		t.Fatalf("99 GPUs: %+v", r)
	}
	r := gpu(t, env, "", "--json", "launch", "--kind", "on_demand", "--model", "a100-80g", "--", "python", "train.py", "--json")
	var inst gpuportal.Instance
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &inst) != nil || inst.ID == 0 || inst.Command != "python train.py --json" {
		t.Fatalf("launch --json: %+v", r)
	}
	if r := gpu(t, env, "", "instances"); r.code != exitOK || !strings.Contains(r.stdout, "python train.py") || !strings.Contains(r.stdout, "pending") {
		t.Fatalf("instances: %+v", r)
	}
	var list []gpuportal.Instance
	if r := gpu(t, env, "", "instances", "--json"); r.code != exitOK || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 1 {
		t.Fatalf("instances --json: %+v", r)
	}
	// Its log: it has not run anywhere yet.
	if r := gpu(t, env, "", "logs", "1"); r.code != exitRefused || !strings.Contains(r.stderr, "no log") {
		t.Fatalf("logs of a pending instance: %+v", r)
	}
	// ssh: the system ssh (a stand-in here) with the gateway's port.
	fake := filepath.Join(dir, "ssh")
	_ = os.WriteFile(fake, []byte("#!/bin/sh\necho ssh \"$@\"\nexit 5\n"), 0o755)
	env["GPU_SSH"] = fake
	if r := gpu(t, env, "", "ssh", "1", "nvidia-smi"); r.code != 5 || strings.TrimSpace(r.stdout) != "ssh -p 2222 1@127.0.0.1 nvidia-smi" {
		t.Fatalf("ssh: %+v", r)
	}
	if r := gpu(t, env, "", "stop", "x"); r.code != exitUsage {
		t.Fatalf("stop x: %+v", r)
	}
	if r := gpu(t, env, "", "stop", "1"); r.code != exitOK {
		t.Fatalf("stop: %+v", r)
	}
	if r := gpu(t, env, "", "balance"); r.code != exitOK || !strings.Contains(r.stdout, "AVAILABLE") || !strings.Contains(r.stdout, "¥") {
		t.Fatalf("balance: %+v", r)
	}
	if r := gpu(t, env, "", "teleport"); r.code != exitUsage {
		t.Fatalf("an unknown command: %+v", r)
	}
	zh := map[string]string{"GPU_CONFIG": env["GPU_CONFIG"], "LANG": "zh_CN.UTF-8"}
	if r := gpu(t, zh, "", "stop"); r.code != exitUsage || !strings.Contains(r.stderr, "哪个实例") {
		t.Fatalf("zh-CN: %+v", r)
	}
	// A revoked or wrong token is the portal's 401; a portal that is not
	// there is exit 3.
	if r := gpu(t, map[string]string{"GPU_PORTAL_URL": url, "GPU_TOKEN": "gpp_bogus"}, "", "instances"); r.code != exitRefused || !strings.Contains(r.stderr, "401") {
		t.Fatalf("a bad token: %+v", r)
	}
	if r := gpu(t, map[string]string{"GPU_PORTAL_URL": "http://127.0.0.1:1", "GPU_TOKEN": "gpp_x"}, "", "instances"); r.code != exitNoPortal {
		t.Fatalf("no portal: %+v", r)
	}
}

// (issue 27) The rest of `gpu` against a real portal: availability and
// offerings, book (a zone-less time read in the local zone and sent with
// its offset), reservations, cancel, jobs submit/list/show/cancel, volumes
// create/list/delete, completion; refusals exit 1 with the portal's
// message, bad usage 2; --json parses.
func TestCLIBookJobsAndVolumes(t *testing.T) {
	url := portalFor(t)
	env := map[string]string{"GPU_CONFIG": filepath.Join(t.TempDir(), "cli.json"), "LANG": "en_US.UTF-8"}
	if r := gpu(t, env, storetest.Password+"\n", "login", "--url", url, "--email", "alice@example.com"); r.code != exitOK {
		t.Fatalf("login: %+v", r)
	}
	start := storetest.Epoch.Add(48 * time.Hour).In(storetest.Shanghai).Truncate(time.Hour)
	if r := gpu(t, env, "", "availability", "--model", "a100-80g", "--from", start.Format(time.RFC3339), "--hours", "3"); r.code != exitOK || strings.Count(r.stdout, "8/8") != 3 {
		t.Fatalf("availability: %+v", r)
	}
	if r := gpu(t, env, "", "availability"); r.code != exitUsage {
		t.Fatalf("availability without a model: %+v", r)
	}
	var offers []gpuportal.Offering
	if r := gpu(t, env, "", "--json", "offerings", "--model", "a100-80g", "--count", "8", "--hours", "4", "--limit", "3"); r.code != exitOK || json.Unmarshal([]byte(r.stdout), &offers) != nil || len(offers) != 3 {
		t.Fatalf("offerings: %+v", r)
	}
	if r := gpu(t, env, "", "book", "--model", "a100-80g", "--count", "8", "--start", "tomorrow"); r.code != exitUsage {
		t.Fatalf("book with a bad time: %+v", r)
	}
	var res gpuportal.Reservation
	r := gpu(t, env, "", "--json", "book", "--model", "a100-80g", "--count", "8", "--start", start.Format(time.RFC3339), "--hours", "4")
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &res) != nil || res.ID == 0 || !res.Start.Equal(start) || res.End.Sub(res.Start) != 4*time.Hour {
		t.Fatalf("book: %+v", r)
	}
	if r := gpu(t, env, "", "book", "--model", "a100-80g", "--count", "1", "--start", start.Format(time.RFC3339), "--hours", "4"); r.code != exitRefused || !strings.Contains(r.stderr, "409") {
		t.Fatalf("booking a full window: %+v", r)
	}
	if r := gpu(t, env, "", "reservations"); r.code != exitOK || !strings.Contains(r.stdout, "confirmed") || !strings.Contains(r.stdout, "8 × a100-80g") {
		t.Fatalf("reservations: %+v", r)
	}
	if r := gpu(t, env, "", "cancel", fmt.Sprint(res.ID)); r.code != exitOK || !strings.Contains(r.stdout, "cancelled") {
		t.Fatalf("cancel: %+v", r)
	}
	if r := gpu(t, env, "", "cancel", fmt.Sprint(res.ID+100)); r.code != exitRefused || !strings.Contains(r.stderr, "404") {
		t.Fatalf("cancel another: %+v", r)
	}

	var job gpuportal.Job
	r = gpu(t, env, "", "--json", "jobs", "submit", "--model", "a100-80g", "--tasks", "3", "--name", "render", "--", "echo", "$GPUPORTAL_TASK_INDEX")
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &job) != nil || job.Tasks.Total != 3 {
		t.Fatalf("jobs submit: %+v", r)
	}
	if r := gpu(t, env, "", "jobs"); r.code != exitOK || !strings.Contains(r.stdout, "render") {
		t.Fatalf("jobs: %+v", r)
	}
	if r := gpu(t, env, "", "jobs", "show", fmt.Sprint(job.ID)); r.code != exitOK || !strings.Contains(r.stdout, "QUEUED") {
		t.Fatalf("jobs show: %+v", r)
	}
	if r := gpu(t, env, "", "jobs", "cancel", fmt.Sprint(job.ID)); r.code != exitOK {
		t.Fatalf("jobs cancel: %+v", r)
	}
	if r := gpu(t, env, "", "jobs", "dance"); r.code != exitUsage {
		t.Fatalf("jobs dance: %+v", r)
	}

	var v gpuportal.Volume
	if r := gpu(t, env, "", "volumes", "create", "Bad Name", "--size", "10"); r.code != exitRefused || !strings.Contains(r.stderr, "400") {
		t.Fatalf("a bad volume: %+v", r)
	}
	r = gpu(t, env, "", "--json", "volumes", "create", "data", "--size", "10")
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &v) != nil || v.ID == 0 || v.SizeGiB != 10 {
		t.Fatalf("volumes create: %+v", r)
	}
	if r := gpu(t, env, "", "volumes"); r.code != exitOK || !strings.Contains(r.stdout, "data") || !strings.Contains(r.stdout, "10 GiB") {
		t.Fatalf("volumes: %+v", r)
	}
	if r := gpu(t, env, "", "cp", "a", "b"); r.code != exitUsage {
		t.Fatalf("cp without a volume: %+v", r)
	}
	// (issue 45) Own images from a volume's archive.
	if r := gpu(t, env, "", "images", "import", "env"); r.code != exitUsage {
		t.Fatalf("images import without a volume: %+v", r)
	}
	if r := gpu(t, env, "", "images", "import", "env", "--volume", fmt.Sprint(v.ID), "--path", "../x.tar"); r.code != exitRefused || !strings.Contains(r.stderr, "400") {
		t.Fatalf("images import from outside the volume: %+v", r)
	}
	r = gpu(t, env, "", "images", "import", "env", "--volume", fmt.Sprint(v.ID), "--path", "images/env.tar")
	if r.code != exitOK || !strings.Contains(r.stdout, "img-1") {
		t.Fatalf("images import: %+v", r)
	}
	if r := gpu(t, env, "", "images"); r.code != exitOK || !strings.Contains(r.stdout, "img-1") || !strings.Contains(r.stdout, "saving") || !strings.Contains(r.stdout, "catalog") {
		t.Fatalf("images: %+v", r)
	}
	if r := gpu(t, env, "", "images", "delete", "img-1"); r.code != exitOK {
		t.Fatalf("images delete: %+v", r)
	}
	if r := gpu(t, env, "", "images", "show", "img-1"); r.code != exitRefused || !strings.Contains(r.stderr, "404") {
		t.Fatalf("images show of a deleted one: %+v", r)
	}
	if r := gpu(t, env, "", "volumes", "delete", fmt.Sprint(v.ID)); r.code != exitOK {
		t.Fatalf("volumes delete: %+v", r)
	}
	if r := gpu(t, env, "", "completion"); r.code != exitOK || !strings.Contains(r.stdout, "complete -F _gpu gpu") || !strings.Contains(r.stdout, "offerings") {
		t.Fatalf("completion: %+v", r)
	}
}

// (issue 44, item 13) The kept token is the owner's alone even when the
// config file existed with a wider mode (it is written anew and renamed
// over it); a login over plain http:// to another machine warns.
func TestCLIConfigStaysPrivate(t *testing.T) {
	url := portalFor(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "cli.json")
	if err := os.WriteFile(path, []byte(`{"url":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GPU_CONFIG": path, "LANG": "en_US.UTF-8"}
	r := gpu(t, env, storetest.Password+"\n", "login", "--url", url, "--email", "alice@example.com")
	if r.code != exitOK {
		t.Fatalf("login: %+v", r)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the kept token over a 0644 file: %v %v", st, err)
	}
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("a loopback login warned: %q", r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left beside the config: %v", entries)
	}
	for raw, want := range map[string]bool{
		"http://portal.example.com": true, "http://203.0.113.7:8080": true, "https://portal.example.com": false,
		"http://127.0.0.1:8080": false, "http://localhost:8080": false, "http://[::1]:8080": false, "http://x.localhost": false,
	} {
		if got := plainHTTPToAnotherHost(raw); got != want {
			t.Errorf("plainHTTPToAnotherHost(%q) = %v", raw, got)
		}
	}
}

// (issue 47) A lab from the command line: the owner makes a team, an
// admin's credit funds it, a student accepts the invitation with her own
// login, gets a monthly limit, and launches for the team with --team
// (paid by the team, not her); gpu team use keeps the choice.
func TestCLITeams(t *testing.T) {
	url, db := portalAndStore(t)
	ctx := context.Background()
	storetest.MustCreatePoorUser(t, db, "ann@example.com", gpuportal.RoleCustomer)
	dir := t.TempDir()
	prof := map[string]string{"GPU_CONFIG": filepath.Join(dir, "prof.json"), "LANG": "en_US.UTF-8"}
	ann := map[string]string{"GPU_CONFIG": filepath.Join(dir, "ann.json"), "LANG": "en_US.UTF-8"}
	if r := gpu(t, prof, storetest.Password+"\n", "login", "--url", url, "--email", "alice@example.com"); r.code != exitOK {
		t.Fatalf("login: %+v", r)
	}
	if r := gpu(t, ann, storetest.Password+"\n", "login", "--url", url, "--email", "ann@example.com"); r.code != exitOK {
		t.Fatalf("login: %+v", r)
	}
	r := gpu(t, prof, "", "--json", "team", "create", "Vision Lab")
	var team gpuportal.Team
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &team) != nil || team.Role != gpuportal.TeamOwner {
		t.Fatalf("team create: %+v", r)
	}
	account, err := db.TeamAccount(ctx, team.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Credit(ctx, nil, account, gpuportal.CreditRequest{Amount: 1000_00, Note: "grant"}); err != nil {
		t.Fatal(err)
	}
	r = gpu(t, prof, "", "team", "invite", fmt.Sprint(team.ID), "ann@example.com", "member")
	if r.code != exitOK || !strings.Contains(r.stdout, "/invitations/") {
		t.Fatalf("team invite: %+v", r)
	}
	link := strings.TrimSpace(r.stdout[strings.LastIndex(r.stdout, " "):])
	if r := gpu(t, ann, "", "team", "accept", link); r.code != exitOK || !strings.Contains(r.stdout, "as member") {
		t.Fatalf("team accept: %+v", r)
	}
	r = gpu(t, prof, "", "--json", "team", "members", fmt.Sprint(team.ID))
	var members []gpuportal.TeamMemberInfo
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &members) != nil || len(members) != 2 {
		t.Fatalf("team members: %+v", r)
	}
	annID := members[1].UserID
	if r := gpu(t, prof, "", "team", "limit", fmt.Sprint(team.ID), fmt.Sprint(annID), "--monthly", "500", "--gpus", "1"); r.code != exitOK {
		t.Fatalf("team limit: %+v", r)
	}
	if r := gpu(t, prof, "", "team", "limit", fmt.Sprint(team.ID), fmt.Sprint(annID), "--share", "1"); r.code != exitOK {
		t.Fatalf("team limit --share: %+v", r)
	}
	if r := gpu(t, prof, "", "team", "limit", fmt.Sprint(team.ID), fmt.Sprint(annID), "--share", "many"); r.code == exitOK || !strings.Contains(r.stderr, "--share") {
		t.Errorf("team limit --share many: %+v", r)
	}
	if r := gpu(t, prof, "", "--json", "team", "members", fmt.Sprint(team.ID)); r.code != exitOK || !strings.Contains(r.stdout, `"reserved_running_gpus": 1`) {
		t.Errorf("the share on the members list: %+v", r)
	}
	// Ann has no money: on her own a launch is refused, for the team not.
	if r := gpu(t, ann, "", "launch", "--kind", "on_demand", "--model", "a100-80g", "--", "train"); r.code != exitRefused || !strings.Contains(r.stderr, "402") {
		t.Errorf("a launch on her own: %+v", r)
	}
	r = gpu(t, ann, "", "--team", fmt.Sprint(team.ID), "--json", "launch", "--kind", "on_demand", "--model", "a100-80g", "--", "train")
	var inst gpuportal.Instance
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &inst) != nil || inst.TeamID == nil || *inst.TeamID != team.ID {
		t.Fatalf("a launch for the team: %+v", r)
	}
	if r := gpu(t, ann, "", "--team", fmt.Sprint(team.ID), "launch", "--kind", "on_demand", "--model", "a100-80g", "--", "train"); r.code != exitRefused || !strings.Contains(r.stderr, "max_running_gpus") && !strings.Contains(r.stderr, "422") {
		t.Errorf("past her GPU limit: %+v", r)
	}
	if r := gpu(t, ann, "", "team", "use", fmt.Sprint(team.ID)); r.code != exitOK {
		t.Fatalf("team use: %+v", r)
	}
	if r := gpu(t, ann, "", "instances"); r.code != exitOK || !strings.Contains(r.stdout, "train") {
		t.Errorf("the team's instances after team use: %+v", r)
	}
	if r := gpu(t, ann, "", "team", "use", "me"); r.code != exitOK {
		t.Fatalf("team use me: %+v", r)
	}
	if r := gpu(t, ann, "", "instances"); r.code != exitOK || strings.Contains(r.stdout, "train") {
		t.Errorf("her own instances show the team's: %+v", r)
	}
	if r := gpu(t, ann, "", "--team", "x", "instances"); r.code != exitUsage {
		t.Errorf("--team x: %+v", r)
	}
}
