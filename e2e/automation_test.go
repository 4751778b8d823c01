package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"gpuportal"
)

// hookReceiver is a script's webhook endpoint: it checks every delivery's
// signature with Stripe's own code and keeps the events by type.
type hookReceiver struct {
	t      *testing.T
	mu     sync.Mutex
	secret string
	events map[string][]gpuportal.Instance // by type
	ids    map[string]bool
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := webhook.ValidatePayloadIgnoringTolerance(body, r.Header.Get("Gpuportal-Signature"), h.secret); err != nil {
		h.t.Errorf("a delivery's signature does not verify: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev struct {
		ID   int64              `json:"id"`
		Type string             `json:"type"`
		Data gpuportal.Instance `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		h.t.Errorf("a delivery: %v", err)
	}
	key := fmt.Sprint(ev.ID)
	if h.ids[key] {
		return // at least once: a repeat is answered and ignored
	}
	h.ids[key] = true
	h.events[ev.Type] = append(h.events[ev.Type], ev.Data)
}

func (h *hookReceiver) count(typ string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events[typ])
}

// (issue 48, done when) A script drives labelled spot instances with the
// `gpu` binary alone against a portal process and an agent process: it
// adds a webhook, launches them with labels, is told by signed webhook
// when each runs and of the notice and the end of the one interrupted,
// finds them again by label and stops them — and is told of each stop.
func TestScriptDrivesLabelledSpotWithGPUAndWebhooks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startPortalProcArgs(t, filepath.Join(dir, "portal.db"), "127.0.0.1:0", "--webhook-allow-private")
	// Short notices, and money for the script's account.
	var pol gpuportal.Policies
	st, body := p.call("GET", "/api/v1/admin/policies", p.admin, "")
	if st != http.StatusOK || json.Unmarshal([]byte(body), &pol) != nil {
		t.Fatalf("policies: %d %s", st, body)
	}
	pol.Global.SpotNoticeSeconds, pol.Global.SpotGraceSeconds = 10, 5
	raw, _ := json.Marshal(pol)
	if st, body := p.call("PUT", "/api/v1/admin/policies", p.admin, string(raw)); st != http.StatusOK {
		t.Fatalf("set policies: %d %s", st, body)
	}
	var me gpuportal.User
	st, body = p.call("GET", "/api/v1/me", p.admin, "")
	if st != http.StatusOK || json.Unmarshal([]byte(body), &me) != nil {
		t.Fatalf("me: %d %s", st, body)
	}
	if st, body := p.call("POST", fmt.Sprintf("/api/v1/admin/users/%d/credit", me.ID), p.admin, `{"amount_fen":10000000,"note":"e2e"}`); st != http.StatusOK {
		t.Fatalf("credit: %d %s", st, body)
	}
	st, body = p.call("POST", "/api/v1/admin/enrollment-tokens", p.admin, `{"region":"cd-1"}`)
	var enroll struct{ Token string }
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &enroll) != nil {
		t.Fatalf("enrollment token: %d %s", st, body)
	}
	startAgentProc(t, p.url, enroll.Token, filepath.Join(dir, "node"), filepath.Join(dir, "ckpt"), "mock:dgxa100", "2s", "")

	gpuBin := build(dir, "gpuportal/cmd/gpu", "CGO_ENABLED=0")
	gpu := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gpuBin, args...)
		cmd.Env = append(os.Environ(), "GPU_CONFIG="+filepath.Join(dir, "cli.json"), "LANG=en_US.UTF-8")
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("gpu %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	gpu("login", "--url", p.url, "--token", p.admin)

	rcv := &hookReceiver{t: t, events: map[string][]gpuportal.Instance{}, ids: map[string]bool{}}
	hooks := httptest.NewServer(rcv)
	defer hooks.Close()
	var hook gpuportal.Webhook
	if err := json.Unmarshal([]byte(gpu("--json", "webhooks", "add", hooks.URL+"/gpu-events",
		"--events", "instance.running,instance.interruption_notice,instance.interrupted,instance.stopped")), &hook); err != nil || hook.Secret == "" {
		t.Fatalf("webhooks add: %+v %v", hook, err)
	}
	rcv.mu.Lock()
	rcv.secret = hook.Secret
	rcv.mu.Unlock()

	for k := range 4 {
		gpu("launch", "--kind", "spot", "--model", "a100-80g", "--label", "sweep=e2e", "--label", fmt.Sprintf("trial=%d", k), "--", "sleep", "3600")
	}
	gpu("launch", "--kind", "spot", "--model", "a100-80g", "--label", "sweep=other", "--", "sleep", "3600")
	eventually(t, 30*time.Second, "a webhook for each instance running", func() bool { return rcv.count(gpuportal.EventInstanceRunning) == 5 })

	var mine []gpuportal.Instance
	if err := json.Unmarshal([]byte(gpu("--json", "instances", "--label", "sweep=e2e")), &mine); err != nil || len(mine) != 4 {
		t.Fatalf("instances --label sweep=e2e: %d %v", len(mine), err)
	}
	// One of them is reclaimed: the script hears the notice, then the end.
	victim := mine[0].ID
	if st, body := p.call("POST", fmt.Sprintf("/api/v1/admin/instances/%d/interrupt", victim), p.admin, ""); st != http.StatusOK {
		t.Fatalf("interrupt: %d %s", st, body)
	}
	eventually(t, 30*time.Second, "the interruption notice by webhook", func() bool { return rcv.count(gpuportal.EventInstanceNotice) == 1 })
	rcv.mu.Lock()
	notice := rcv.events[gpuportal.EventInstanceNotice][0]
	rcv.mu.Unlock()
	if notice.ID != victim || notice.Interruption == nil || notice.Interruption.Deadline.IsZero() || notice.Labels["sweep"] != "e2e" {
		t.Fatalf("the notice's data: %+v", notice)
	}
	eventually(t, 60*time.Second, "the interrupted instance's end by webhook", func() bool { return rcv.count(gpuportal.EventInstanceInterrupted) == 1 })

	// The rest are found by label and stopped, with gpu alone.
	stopped := 0
	for _, i := range mine[1:] {
		gpu("stop", fmt.Sprint(i.ID))
		stopped++
	}
	eventually(t, 60*time.Second, "a webhook for each stop", func() bool { return rcv.count(gpuportal.EventInstanceStopped) == stopped })
	var others []gpuportal.Instance
	json.Unmarshal([]byte(gpu("--json", "instances", "--label", "sweep=other")), &others)
	if len(others) != 1 || others[0].Status != gpuportal.InstanceRunning {
		t.Fatalf("the unlabelled-for-this-sweep instance: %+v", others)
	}
	var deliveries []gpuportal.WebhookDelivery
	json.Unmarshal([]byte(gpu("--json", "webhooks", "deliveries", fmt.Sprint(hook.ID))), &deliveries)
	if len(deliveries) != 5+1+1+stopped {
		t.Fatalf("%d deliveries listed", len(deliveries))
	}
	for _, d := range deliveries {
		if d.Status != gpuportal.DeliveryDelivered || d.StatusCode == nil || *d.StatusCode != http.StatusOK {
			t.Fatalf("a delivery: %+v", d)
		}
	}
}

// (issue 48) gpu logs -f against a real agent reads only what is new:
// every line of a workload that writes for a few seconds arrives once,
// and the log's bytes cross the network once (a proxy in front of the
// portal counts them).
func TestGPULogsFollowReadsOnlyWhatIsNew(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	dir := t.TempDir()
	p.startAgent(t, filepath.Join(dir, "node"), filepath.Join(dir, "ckpt"), "mock:dgxa100", true)
	var mu sync.Mutex
	var logBytes, logReads int
	target, _ := url.Parse(p.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if strings.HasSuffix(r.Request.URL.Path, "/log") && r.StatusCode == http.StatusOK {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			logBytes += len(body)
			logReads++
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	gpuBin := build(dir, "gpuportal/cmd/gpu", "CGO_ENABLED=0")
	env := append(os.Environ(), "GPU_CONFIG="+filepath.Join(dir, "cli.json"), "LANG=en_US.UTF-8")
	login := exec.Command(gpuBin, "login", "--url", front.URL, "--token", p.user)
	login.Env = env
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("login: %v %s", err, out)
	}
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":1,"command":"for i in 1 2 3 4 5 6; do echo line $i; sleep 1; done"}`, &inst); st != 201 {
		t.Fatalf("launch: %d", st)
	}
	follow := exec.Command(gpuBin, "logs", "-f", fmt.Sprint(inst.ID))
	follow.Env = env
	out, err := follow.Output()
	if err != nil {
		t.Fatalf("gpu logs -f: %v %s", err, out)
	}
	want := "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n"
	if string(out) != want {
		t.Fatalf("gpu logs -f printed %q, want %q", out, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if logReads < 2 || logBytes != len(want) {
		t.Fatalf("%d reads of the log carried %d bytes for a %d-byte log", logReads, logBytes, len(want))
	}
}
