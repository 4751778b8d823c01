package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 12, item 1) Cancelling a reservation under way stops its reserved
// instance on the node and gives its GPUs back: the next customer books
// the same hours, gets all the GPUs at the start, and nobody is refunded
// for a "node failure" that never happened.
func TestCancellingAnActiveReservationFreesItsGPUs(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // business time 09:30 Shanghai
	dir := t.TempDir()
	ag := p.startAgent(t, dir+"/node", dir+"/ckpt", "mock:dgxa100", true)
	bob := p.token(storetest.MustCreateUser(t, p.db, "bob@example.com", gpuportal.RoleCustomer))

	var alices gpuportal.Reservation
	if st := p.api("POST", "/api/v1/reservations", p.user, `{"model":"a100-80g","region":"cd-1","count":8,"start":"2026-12-01T10:00:00+08:00","end":"2026-12-01T18:00:00+08:00"}`, &alices); st != 201 {
		t.Fatalf("alice books = %d", st)
	}
	advance(t, p, "30m") // 10:00
	p.api("GET", fmt.Sprintf("/api/v1/reservations/%d", alices.ID), p.user, "", &alices)
	if alices.Status != gpuportal.ReservationActive || len(alices.GPUs) != 8 {
		t.Fatalf("alice's reservation at 10:00 = %s with %d GPUs", alices.Status, len(alices.GPUs))
	}
	body, _ := json.Marshal(map[string]any{"kind": "reserved", "reservation_id": alices.ID, "count": 8,
		"command": "i=0; while [ $i -lt 1200 ]; do i=$((i+1)); sleep 0.1; done"})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		t.Fatalf("reserved launch = %d", st)
	}
	eventually(t, 10*time.Second, "the reserved instance to run", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceRunning })

	advance(t, p, "10m") // 10:10: cancel after the start
	var cancelled struct {
		Status gpuportal.ReservationStatus `json:"status"`
		Fee    gpuportal.Fen               `json:"fee_fen"`
		Refund gpuportal.Fen               `json:"refund_fen"`
	}
	if st := p.api("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", alices.ID), p.user, "", &cancelled); st != 200 || cancelled.Status != gpuportal.ReservationCancelled {
		t.Fatalf("cancel = %d %+v", st, cancelled)
	}
	// The agent is told at once and stops the workload; its GPUs come back.
	eventually(t, 15*time.Second, "the reserved instance to stop", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	if got := p.instance(inst.ID); len(got.GPUs) != 0 {
		t.Fatalf("the stopped instance still holds %v", got.GPUs)
	}
	var after gpuportal.Reservation
	p.api("GET", fmt.Sprintf("/api/v1/reservations/%d", alices.ID), p.user, "", &after)
	if after.Status != gpuportal.ReservationCancelled || len(after.GPUs) != 0 {
		t.Fatalf("the cancelled reservation is %s with GPUs %v", after.Status, after.GPUs)
	}
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), nil); st != 409 {
		t.Fatal("a reserved instance was launched on a cancelled reservation")
	}

	// Bob books the same GPUs for 12:00–16:00 and launches a spot instance
	// now: both get GPUs.
	var bobs gpuportal.Reservation
	if st := p.api("POST", "/api/v1/reservations", bob, `{"model":"a100-80g","region":"cd-1","count":8,"start":"2026-12-01T12:00:00+08:00","end":"2026-12-01T16:00:00+08:00"}`, &bobs); st != 201 {
		t.Fatalf("bob books the freed hours = %d", st)
	}
	spot, _ := json.Marshal(map[string]any{"kind": "spot", "model": "a100-80g", "region": "cd-1", "count": 2, "command": "sleep 1"})
	var sp gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", bob, string(spot), &sp); st != 201 {
		t.Fatalf("bob's spot launch = %d", st)
	}
	eventually(t, 15*time.Second, "bob's spot instance to run and end", func() bool {
		var i gpuportal.Instance
		p.api("GET", fmt.Sprintf("/api/v1/instances/%d", sp.ID), bob, "", &i)
		return i.Status == gpuportal.InstanceStopped
	})
	advance(t, p, "110m") // 12:00
	p.api("GET", fmt.Sprintf("/api/v1/reservations/%d", bobs.ID), bob, "", &bobs)
	if bobs.Status != gpuportal.ReservationActive || len(bobs.GPUs) != 8 {
		t.Fatalf("bob's reservation at 12:00 = %s with %d GPUs; want all 8", bobs.Status, len(bobs.GPUs))
	}
	// A day later: Bob's reservation completed in full; no shortfall refund,
	// no node-failure notice.
	advance(t, p, "24h")
	p.api("GET", fmt.Sprintf("/api/v1/reservations/%d", bobs.ID), bob, "", &bobs)
	if bobs.Status != gpuportal.ReservationCompleted {
		t.Fatalf("bob's reservation a day later = %s", bobs.Status)
	}
	var ledger []map[string]any
	p.api("GET", "/api/v1/ledger", bob, "", &ledger)
	for _, l := range ledger {
		if l["kind"] == "refund" {
			t.Errorf("bob was refunded: %v", l)
		}
	}
	var notes []gpuportal.Notification
	p.api("GET", "/api/v1/notifications", bob, "", &notes)
	for _, n := range notes {
		if n.Kind == gpuportal.NoteReservationShorted {
			t.Errorf("bob was told of a shortfall: %+v", n)
		}
	}
	if ag.nodeID == "" {
		t.Fatal("no agent")
	}
}
