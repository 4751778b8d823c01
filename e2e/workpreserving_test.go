package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gpuportal"
)

// saver reports a checkpoint to its metadata endpoint twice a second and,
// once it sees its notice, reports ready (its state is saved) and exits
// cleanly on the SIGTERM that follows at once.
const saver = `
trap 'exit 0' TERM
i=0
while [ $i -lt 1200 ]; do
  curl -s -X PUT "$GPUPORTAL_METADATA_URL/gpuportal/checkpoint" > /dev/null
  if curl -sf "$GPUPORTAL_METADATA_URL/latest/meta-data/spot/instance-action" > /dev/null; then
    curl -s -X PUT "$GPUPORTAL_METADATA_URL/gpuportal/ready"
  fi
  i=$((i+1))
  sleep 0.5
done`

// silent never reports anything.
const silent = `i=0; while [ $i -lt 6000 ]; do i=$((i+1)); sleep 0.1; done`

// (issue 26) With a real agent and the test clock: of two spot instances
// in the way of a booking, the older one that reports checkpoints is
// interrupted and the younger silent one keeps running; the older one
// reports ready and is stopped well before its notice runs out, billed to
// that minute, with the work it lost recorded.
func TestTheCheckpointingInstanceGivesWay(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // business time 09:30 Shanghai
	dir := t.TempDir()
	p.startAgent(t, dir+"/node", dir+"/ckpt", "mock:dgxa100", true)
	old := launch(t, p, 4, saver, false)
	eventually(t, 15*time.Second, "the saver to report a checkpoint", func() bool { return p.instance(old.ID).LastCheckpoint != nil })
	advance(t, p, "30m") // 10:00
	young := launch(t, p, 4, silent, false)
	eventually(t, 15*time.Second, "the silent one to run", func() bool { return p.instance(young.ID).Status == gpuportal.InstanceRunning })
	if st := p.api("POST", "/api/v1/reservations", p.user, `{"model":"a100-80g","region":"cd-1","count":4,"start":"2026-12-01T11:00:00+08:00","end":"2026-12-01T15:00:00+08:00"}`, nil); st != 201 {
		t.Fatalf("book = %d", st)
	}
	stampedBy := func(at time.Time) {
		t.Helper()
		eventually(t, 15*time.Second, "a checkpoint stamped at "+at.Format("15:04Z"), func() bool {
			c := p.instance(old.ID).LastCheckpoint
			return c != nil && !c.Before(at)
		})
	}
	advance(t, p, "25m") // 10:25: the saver keeps reporting
	stampedBy(time.Date(2026, 12, 1, 2, 25, 0, 0, time.UTC))
	advance(t, p, "5m") // 10:30: within the rebalance lead of 11:00
	// The book wants GPUs back within the rebalance lead: the saver (the
	// instance that will get the notice) is told first, the silent one not.
	var notes []gpuportal.Notification
	p.api("GET", "/api/v1/notifications", p.user, "", &notes)
	recommended := map[int64]bool{}
	for _, n := range notes {
		if n.Kind == gpuportal.NoteSpotRebalance {
			recommended[n.Params.InstanceID] = true
		}
	}
	if !recommended[old.ID] || recommended[young.ID] {
		t.Errorf("rebalance recommendations went to %v; want the saver (%d) alone", recommended, old.ID)
	}
	advance(t, p, "20m") // 10:50
	stampedBy(time.Date(2026, 12, 1, 2, 50, 0, 0, time.UTC))
	if i := p.instance(old.ID); i.WorkSinceCheckpoint == nil || *i.WorkSinceCheckpoint != 0 {
		t.Errorf("work since the saver's checkpoint = %v; want 0", i.WorkSinceCheckpoint)
	}
	if i := p.instance(young.ID); i.WorkSinceCheckpoint == nil || *i.WorkSinceCheckpoint != 4*50*60 {
		t.Errorf("work since the silent one's start = %v; want 4 GPUs × 50 min", i.WorkSinceCheckpoint)
	}

	advance(t, p, "9m") // 10:59: within notice + grace + a minute of 11:00
	eventually(t, 10*time.Second, "the saver's notice", func() bool { return p.instance(old.ID).Status != gpuportal.InstanceRunning })
	got := p.instance(old.ID)
	if got.Interruption == nil || got.Interruption.Reason != gpuportal.ReasonReservation {
		t.Fatalf("the saver = %+v; want interrupted for the reservation", got)
	}
	if st := p.instance(young.ID).Status; st != gpuportal.InstanceRunning {
		t.Fatalf("the silent young one is %s; it loses more and should keep running", st)
	}
	// Ready → stopped at once: long before its 10 s notice would end (the
	// test clock is still; wall time tells).
	noticed := time.Now()
	eventually(t, 8*time.Second, "the saver to be stopped after ready", func() bool { return p.instance(old.ID).Status == gpuportal.InstanceInterrupted })
	if took := time.Since(noticed); took > 8*time.Second {
		t.Errorf("stopped %s after the notice", took)
	}
	got = p.instance(old.ID)
	if got.ReadyAt == nil || got.Lost == nil || *got.Lost > 4*60 || got.EndedAt == nil || !got.EndedAt.Before(got.Interruption.Deadline) {
		t.Fatalf("after ready: ready %v, lost %v, ended %v (deadline %s)", got.ReadyAt, got.Lost, got.EndedAt, got.Interruption.Deadline)
	}
	// Billed to that minute: 09:30 to 10:59 is 89 minutes.
	if want := gpuportal.RunCost(got.PricePerGPU, 4, 89); got.Cost != want {
		t.Errorf("cost %s; want %s (89 minutes)", got.Cost, want)
	}
	var rates gpuportal.InterruptionRates
	p.api("GET", "/api/v1/interruption-rates?model=a100-80g&region=cd-1", p.user, "", &rates)
	if rates.Trailing.MeasuredInterrupted != 1 || rates.Trailing.ShareLostUnder5Min != 1 {
		t.Errorf("rates: %+v", rates.Trailing)
	}
	var stopped gpuportal.Instance
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", young.ID), p.user, "", &stopped)
}

// (issue 26) The stock AWS SDK for Go v2 IMDS client reads the rebalance
// recommendation a while before the notice: the book wants the instance's
// GPUs within the rebalance lead, and the instance that will get the
// notice is told first.
func TestStockAWSSDKReadsTheRebalanceRecommendation(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // 09:30
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	p.startAgent(t, dir+"/node", ckpt, "mock:dgxa100", true)
	inst := launch(t, p, 8, imdsWorkloadBin, false)
	eventually(t, 15*time.Second, "the SDK to read instance-id", func() bool {
		_, err := os.Stat(filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID), "instance-id"))
		return err == nil
	})
	if st := p.api("POST", "/api/v1/reservations", p.user, `{"model":"a100-80g","region":"cd-1","count":4,"start":"2026-12-01T11:00:00+08:00","end":"2026-12-01T15:00:00+08:00"}`, nil); st != 201 {
		t.Fatalf("book = %d", st)
	}
	advance(t, p, "30m") // 10:00: an hour ahead, nothing yet
	if _, err := os.Stat(filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID), "rebalance")); err == nil {
		t.Fatal("a recommendation an hour ahead")
	}
	advance(t, p, "30m") // 10:30: within 30 min (+ the notice horizon) of 11:00
	file := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID), "rebalance")
	eventually(t, 15*time.Second, "the SDK to read the rebalance recommendation", func() bool { _, err := os.Stat(file); return err == nil })
	raw, _ := os.ReadFile(file)
	var doc map[string]string
	if err := json.Unmarshal(raw, &doc); err != nil || doc["noticeTime"] == "" {
		t.Fatalf("recommendation as the SDK read it: %s", raw)
	}
	if st := p.instance(inst.ID).Status; st != gpuportal.InstanceRunning {
		t.Fatalf("the recommendation is no notice: the instance is %s", st)
	}
	var notes []gpuportal.Notification
	p.api("GET", "/api/v1/notifications", p.user, "", &notes)
	found := false
	for _, n := range notes {
		found = found || n.Kind == gpuportal.NoteSpotRebalance
	}
	if !found {
		t.Error("the owner was not told in the portal")
	}
	var stopped gpuportal.Instance
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), p.user, "", &stopped)
}

// (issue 26) A drill gives the real notice without SIGTERM: a workload
// that reports ready ends it at once and keeps running ("ready after N
// s"); a silent one sees it run out and keeps running too ("not ready").
// One an hour per instance; never in the published rates.
func TestDrillsOnARealAgent(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true)
	dir := t.TempDir()
	p.startAgent(t, dir+"/node", dir+"/ckpt", "mock:dgxa100", true)
	ready := launch(t, p, 2, saver, false)
	quiet := launch(t, p, 2, silent, false)
	for _, i := range []gpuportal.Instance{ready, quiet} {
		eventually(t, 15*time.Second, "the instance to run", func() bool { return p.instance(i.ID).Status == gpuportal.InstanceRunning })
	}
	var drill struct {
		NoticeAt time.Time `json:"notice_at"`
		Deadline time.Time `json:"deadline"`
	}
	for _, i := range []gpuportal.Instance{ready, quiet} {
		if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/drill", i.ID), p.user, "", &drill); st != 201 || !drill.Deadline.After(drill.NoticeAt) {
			t.Fatalf("drill on %d = %d %+v", i.ID, st, drill)
		}
	}
	eventually(t, 10*time.Second, "the ready workload's drill result", func() bool {
		d := p.instance(ready.ID).Drill
		return d != nil && d.Result == gpuportal.DrillReady
	})
	if d := p.instance(ready.ID).Drill; d.ReadyAfterSeconds == nil || *d.ReadyAfterSeconds > 10 {
		t.Errorf("ready after %v s", d.ReadyAfterSeconds)
	}
	eventually(t, 20*time.Second, "the silent workload's drill to run out", func() bool {
		d := p.instance(quiet.ID).Drill
		return d != nil && d.Result == gpuportal.DrillNotReady
	})
	// Give the agent a few seconds past the drill's deadline: no SIGTERM.
	hb := *p.nodes()[0].LastHeartbeatAt
	eventually(t, 15*time.Second, "two more heartbeats", func() bool { return p.nodes()[0].LastHeartbeatAt.After(hb.Add(time.Second)) })
	for _, i := range []gpuportal.Instance{ready, quiet} {
		if got := p.instance(i.ID); got.Status != gpuportal.InstanceRunning {
			t.Fatalf("instance %d after its drill is %s", i.ID, got.Status)
		}
	}
	if st := p.api("POST", fmt.Sprintf("/api/v1/instances/%d/drill", ready.ID), p.user, "", nil); st != 429 {
		t.Errorf("a second drill within the hour = %d", st)
	}
	var rates gpuportal.InterruptionRates
	p.api("GET", "/api/v1/interruption-rates?model=a100-80g&region=cd-1", p.user, "", &rates)
	if rates.Trailing.Interrupted != 0 || rates.Trailing.MeasuredInterrupted != 0 {
		t.Errorf("drills in the rates: %+v", rates.Trailing)
	}
	for _, i := range []gpuportal.Instance{ready, quiet} {
		p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", i.ID), p.user, "", nil)
	}
}
