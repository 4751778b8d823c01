package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 25) An active reservation extended with a real agent keeps its
// GPUs and its running reserved instance across the old end: the agent's
// stop notice for the old end is withdrawn, the instance runs on past it
// on the same GPUs while another customer's booking starts beside it, and
// it is stopped at the new end.
func TestExtendedReservationKeepsRunningOnTheAgent(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // business time 09:30 Shanghai
	dir := t.TempDir()
	ag := p.startAgent(t, dir+"/node", dir+"/ckpt", "mock:dgxa100", true)
	bob := p.token(storetest.MustCreateUser(t, p.db, "bob@example.com", gpuportal.RoleCustomer))

	var alices gpuportal.Reservation
	if st := p.api("POST", "/api/v1/reservations", p.user, `{"model":"a100-80g","region":"cd-1","count":4,"start":"2026-12-01T10:00:00+08:00","end":"2026-12-01T14:00:00+08:00"}`, &alices); st != 201 {
		t.Fatalf("alice books = %d", st)
	}
	// Bob takes the other four GPUs from alice's old end on.
	if st := p.api("POST", "/api/v1/reservations", bob, `{"model":"a100-80g","region":"cd-1","count":4,"start":"2026-12-01T14:00:00+08:00","end":"2026-12-01T20:00:00+08:00"}`, nil); st != 201 {
		t.Fatalf("bob books = %d", st)
	}
	advance(t, p, "30m") // 10:00
	body, _ := json.Marshal(map[string]any{"kind": "reserved", "reservation_id": alices.ID, "count": 4,
		"command": "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); sleep 0.1; done"})
	var inst gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, string(body), &inst); st != 201 {
		t.Fatalf("reserved launch = %d", st)
	}
	eventually(t, 15*time.Second, "the reserved instance to run", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceRunning })
	gpus := p.instance(inst.ID).GPUs

	advance(t, p, "3h40m") // 13:40: the stop notice for the 14:00 end reaches the agent
	eventually(t, 15*time.Second, "the stop notice on the node", func() bool { return strings.Contains(ag.output(), "interruption notice") })

	var ext gpuportal.Extension
	if st := p.api("GET", fmt.Sprintf("/api/v1/reservations/%d/extension", alices.ID), p.user, "", &ext); st != 200 || ext.MaxHours < 3 {
		t.Fatalf("extension = %d %+v", st, ext)
	}
	var extended gpuportal.Reservation
	if st := p.api("POST", fmt.Sprintf("/api/v1/reservations/%d/extend", alices.ID), p.user, `{"hours":3}`, &extended); st != 200 || extended.Price != alices.Price+ext.Options[2].Price {
		t.Fatalf("extend = %d %+v", st, extended)
	}
	eventually(t, 15*time.Second, "the notice to be withdrawn on the node", func() bool { return strings.Contains(ag.output(), "interruption notice withdrawn") })

	advance(t, p, "30m") // 14:10: past the old end; bob's reservation starts beside it
	var now gpuportal.Reservation
	p.api("GET", fmt.Sprintf("/api/v1/reservations/%d", alices.ID), p.user, "", &now)
	if now.Status != gpuportal.ReservationActive || !sameGPUs(now.GPUs, gpus) {
		t.Fatalf("alice's reservation at 14:10 = %s on %v; want active on %v", now.Status, now.GPUs, gpus)
	}
	var bobs []gpuportal.Reservation
	p.api("GET", "/api/v1/reservations", bob, "", &bobs)
	if len(bobs) != 1 || bobs[0].Status != gpuportal.ReservationActive || len(bobs[0].GPUs) != 4 {
		t.Fatalf("bob's reservation at 14:10 = %+v", bobs)
	}
	for _, g := range bobs[0].GPUs {
		if slices.Contains(gpus, g) {
			t.Fatalf("bob got alice's GPU %s", g)
		}
	}
	// Give the agent a few heartbeats at 14:10: the instance keeps running.
	hb := *p.nodes()[0].LastHeartbeatAt
	eventually(t, 15*time.Second, "two more heartbeats", func() bool { return p.nodes()[0].LastHeartbeatAt.After(hb.Add(time.Second)) })
	if i := p.instance(inst.ID); i.Status != gpuportal.InstanceRunning || !sameGPUs(i.GPUs, gpus) {
		t.Fatalf("the instance past the old end = %s on %v", i.Status, i.GPUs)
	}

	advance(t, p, "2h50m") // 17:00: the new end
	eventually(t, 20*time.Second, "the instance to stop at the new end", func() bool { return p.instance(inst.ID).Status == gpuportal.InstanceStopped })
	p.api("GET", fmt.Sprintf("/api/v1/reservations/%d", alices.ID), p.user, "", &now)
	if now.Status != gpuportal.ReservationCompleted {
		t.Fatalf("at the new end alice's reservation is %s", now.Status)
	}
}

func sameGPUs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// (issue 23) A booking that carries a launch spec starts by itself: at
// its start the portal launches it on all its GPUs and the agent runs it,
// with nothing launched by hand.
func TestReservationStartsItselfOnTheAgent(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // 09:30
	dir := t.TempDir()
	p.startAgent(t, dir+"/node", dir+"/ckpt", "mock:dgxa100", true)
	var r gpuportal.Reservation
	body := `{"model":"a100-80g","region":"cd-1","count":8,"start":"2026-12-01T10:00:00+08:00","end":"2026-12-01T14:00:00+08:00","launch":{"command":"echo started on $CUDA_VISIBLE_DEVICES; while :; do sleep 1; done"}}`
	if st := p.api("POST", "/api/v1/reservations", p.user, body, &r); st != 201 || r.Launch == nil {
		t.Fatalf("book with a launch spec = %d %+v", st, r)
	}
	advance(t, p, "30m") // 10:00
	var list []gpuportal.Instance
	eventually(t, 20*time.Second, "the reservation's own instance to run", func() bool {
		p.api("GET", "/api/v1/instances", p.user, "", &list)
		return len(list) == 1 && list[0].Status == gpuportal.InstanceRunning
	})
	if i := list[0]; i.Kind != gpuportal.KindReserved || i.Count != 8 || i.ReservationID == nil || *i.ReservationID != r.ID {
		t.Fatalf("instance = %+v", i)
	}
	eventually(t, 10*time.Second, "its output", func() bool { return strings.Contains(p.instance(list[0].ID).LogTail, "started on GPU-") })
	advance(t, p, "4h") // 14:00: it ends with the reservation
	eventually(t, 20*time.Second, "the instance to stop at the end", func() bool { return p.instance(list[0].ID).Status == gpuportal.InstanceStopped })
}
