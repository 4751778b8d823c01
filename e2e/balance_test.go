package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// watcher polls its metadata endpoint and keeps the latest instance-action
// (or "none"); on SIGTERM it notes it and exits.
const watcher = `
dir="$GPUPORTAL_CHECKPOINT_DIR"
trap 'echo term > "$dir/term"; exit 0' TERM
i=0
while [ $i -lt 1200 ]; do
  if curl -sf "$GPUPORTAL_METADATA_URL/latest/meta-data/spot/instance-action" > "$dir/action.tmp"; then mv "$dir/action.tmp" "$dir/action"; else echo none > "$dir/action"; fi
  i=$((i+1))
  sleep 0.1
done`

// (issue 16) Through a real agent: a spot instance whose owner's balance
// runs out gets the stop notice (reason balance, metadata action "stop")
// and ends at its deadline; another owner who tops up within the notice
// keeps theirs running.
func TestRunningOutStopsThroughTheAgent(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // business time 09:30
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	p.startAgent(t, dir+"/node", ckpt, "mock:dgxa100", true)
	credit := func(u *gpuportal.User, fen int) {
		t.Helper()
		if st := p.api("POST", fmt.Sprintf("/api/v1/admin/users/%d/credit", u.ID), p.admin, fmt.Sprintf(`{"amount_fen":%d,"note":"test"}`, fen), nil); st != 200 {
			t.Fatalf("credit = %d", st)
		}
	}
	var insts [2]gpuportal.Instance
	var users [2]*gpuportal.User
	for k := range users {
		users[k] = storetest.MustCreatePoorUser(t, p.db, fmt.Sprintf("poor%d@example.com", k), gpuportal.RoleCustomer)
		credit(users[k], 300) // ¥3: 75 minutes of one spot A100 at ¥2.40
		tok := p.token(users[k])
		if st := p.api("POST", "/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1,"command":`+jsonString(watcher)+`}`, &insts[k]); st != 201 {
			t.Fatalf("launch = %d", st)
		}
	}
	// The admin reads every instance.
	instance := func(id int64) gpuportal.Instance {
		var i gpuportal.Instance
		p.api("GET", fmt.Sprintf("/api/v1/instances/%d", id), p.admin, "", &i)
		return i
	}
	actionOf := func(i gpuportal.Instance) string {
		return readTrim(filepath.Join(ckpt, fmt.Sprintf("instance-%d", i.ID), "action"))
	}
	eventually(t, 15*time.Second, "both to run and watch", func() bool {
		return instance(insts[0].ID).Status == gpuportal.InstanceRunning && instance(insts[1].ID).Status == gpuportal.InstanceRunning &&
			actionOf(insts[0]) == "none" && actionOf(insts[1]) == "none"
	})
	advance(t, p, "76m")
	for _, i := range insts {
		got := instance(i.ID)
		if got.Status != gpuportal.InstanceInterrupting || got.Interruption == nil || got.Interruption.Reason != gpuportal.ReasonBalance {
			t.Fatalf("at zero: %+v", got)
		}
	}
	eventually(t, 5*time.Second, "the workloads to see the stop notice", func() bool {
		var a, b map[string]string
		return json.Unmarshal([]byte(actionOf(insts[0])), &a) == nil && a["action"] == "stop" &&
			json.Unmarshal([]byte(actionOf(insts[1])), &b) == nil && b["action"] == "stop"
	})
	// The second owner tops up in time: the stop is called off.
	credit(users[1], 10000)
	eventually(t, 5*time.Second, "the notice to be withdrawn", func() bool {
		return instance(insts[1].ID).Status == gpuportal.InstanceRunning && actionOf(insts[1]) == "none"
	})
	eventually(t, 30*time.Second, "the first to stop at its deadline", func() bool { return instance(insts[0].ID).Status == gpuportal.InstanceInterrupted })
	if term := readTrim(filepath.Join(ckpt, fmt.Sprintf("instance-%d", insts[0].ID), "term")); term != "term" {
		t.Fatalf("the first got no SIGTERM: %q", term)
	}
	time.Sleep(2 * time.Second) // past the first one's deadline and grace
	if got := instance(insts[1].ID); got.Status != gpuportal.InstanceRunning {
		t.Fatalf("the topped-up one: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(ckpt, fmt.Sprintf("instance-%d", insts[1].ID), "term")); err == nil {
		t.Fatal("the topped-up one got SIGTERM")
	}
	// The one that stopped was billed up to its end; nothing of it is lost.
	notes, _ := p.db.InApp(t.Context(), users[0].ID, 20)
	var kinds []string
	for _, n := range notes {
		kinds = append(kinds, n.Kind)
	}
	if got := strings.Join(kinds, ","); !strings.Contains(got, gpuportal.NoteBalanceLow) || !strings.Contains(got, gpuportal.NoteBalanceStop) {
		t.Fatalf("notifications: %s", got)
	}
}

func jsonString(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}
