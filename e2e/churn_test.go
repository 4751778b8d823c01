package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"gpuportal"
)

// A confirmed reservation always gets all its GPUs (DESIGN §2, Capacity),
// through a seeded random churn of bookings, cancellations, spot,
// on-demand and reserved launches and stops on 16 A100 with two real agent
// processes, on the manual clock: after every step each active reservation
// holds all its GPUs and no GPU is held twice.
func TestChurnKeepsEveryReservationWhole(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // business time 09:30 Shanghai
	dir := t.TempDir()
	p.startAgent(t, dir+"/n1", dir+"/ckpt", "mock:dgxa100", true)
	p.startAgent(t, dir+"/n2", dir+"/ckpt", "mock:dgxa100", true)
	eventually(t, 15*time.Second, "both nodes online", func() bool { return len(p.nodes()) == 2 })

	rng := rand.New(rand.NewPCG(15, 2026))
	now := time.Date(2026, 12, 1, 1, 30, 0, 0, time.UTC)
	const sleeper = "i=0; while [ $i -lt 36000 ]; do i=$((i+1)); sleep 0.1; done"
	var booked, activeChecks, launched int
	for step := range 60 {
		var what string
		switch rng.IntN(6) {
		case 0, 1:
			start := now.Truncate(time.Hour).Add(time.Duration(1+rng.IntN(5)) * time.Hour)
			body := fmt.Sprintf(`{"model":"a100-80g","region":"cd-1","count":%d,"start":%q,"end":%q}`, 1+rng.IntN(8),
				start.Format(time.RFC3339), start.Add(time.Duration(4+rng.IntN(4))*time.Hour).Format(time.RFC3339))
			if p.api("POST", "/api/v1/reservations", p.user, body, nil) == 201 {
				booked++
			}
			what = "book"
		case 2:
			kind := []string{"spot", "spot", "on_demand"}[rng.IntN(3)]
			body, _ := json.Marshal(map[string]any{"kind": kind, "model": "a100-80g", "region": "cd-1", "count": 1 + rng.IntN(4), "command": sleeper, "auto_restart": true})
			if p.api("POST", "/api/v1/instances", p.user, string(body), nil) == 201 {
				launched++
			}
			what = "launch " + kind
		case 3:
			// Use an active reservation: a reserved instance on its GPUs,
			// or cancel a booking not started yet.
			var list []gpuportal.Reservation
			p.api("GET", "/api/v1/reservations", p.user, "", &list)
			for _, r := range list {
				if r.Status == gpuportal.ReservationActive && rng.IntN(2) == 0 {
					body, _ := json.Marshal(map[string]any{"kind": "reserved", "reservation_id": r.ID, "count": min(r.Count, 8), "command": sleeper})
					p.api("POST", "/api/v1/instances", p.user, string(body), nil)
					what = "reserved launch"
					break
				}
				if r.Status == gpuportal.ReservationConfirmed && rng.IntN(3) == 0 {
					p.api("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", r.ID), p.user, "", nil)
					what = "cancel"
					break
				}
			}
		case 4:
			var list []gpuportal.Instance
			p.api("GET", "/api/v1/instances", p.user, "", &list)
			for _, i := range list {
				if i.Status == gpuportal.InstanceRunning && i.Kind != gpuportal.KindReserved && rng.IntN(3) == 0 {
					p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", i.ID), p.user, "", nil)
					what = "stop"
					break
				}
			}
		case 5:
			d := time.Duration(5+rng.IntN(50)) * time.Minute
			advance(t, p, d.String())
			now = now.Add(d)
			what = "advance " + d.String()
		}
		settle(t, p)
		activeChecks += checkWhole(t, p, step, what)
	}
	if booked < 5 || launched < 3 || activeChecks == 0 {
		t.Fatalf("the churn did too little: %d bookings, %d launches, %d checks of active reservations", booked, launched, activeChecks)
	}
}

// settle waits until the agents have done what they were told: nothing
// placed but not running, nothing with a notice still on its GPUs, no
// reserved instance of a reservation that ended (the business clock jumps
// ahead; stops and notices take real seconds on the nodes).
func settle(t *testing.T, p *portal) {
	t.Helper()
	eventually(t, 30*time.Second, "the agents to settle", func() bool {
		var reservations []gpuportal.Reservation
		p.api("GET", "/api/v1/reservations", p.admin, "", &reservations)
		active := map[int64]bool{}
		for _, r := range reservations {
			active[r.ID] = r.Status == gpuportal.ReservationActive
		}
		var list []gpuportal.Instance
		p.api("GET", "/api/v1/instances", p.admin, "", &list)
		for _, i := range list {
			switch {
			case i.Status == gpuportal.InstanceInterrupting, i.Status == gpuportal.InstancePending && i.Node != "":
				return false
			case i.ReservationID != nil && i.Status == gpuportal.InstanceRunning && !active[*i.ReservationID]:
				return false
			}
		}
		return true
	})
}

// checkWhole fails the test unless every active reservation holds all its
// GPUs and no GPU is held twice (by two instances, or by an instance other
// than its reservation's own). It returns how many active reservations it
// checked.
func checkWhole(t *testing.T, p *portal, step int, what string) int {
	t.Helper()
	var reservations []gpuportal.Reservation
	p.api("GET", "/api/v1/reservations", p.admin, "", &reservations)
	var instances []gpuportal.Instance
	p.api("GET", "/api/v1/instances", p.admin, "", &instances)
	reservedBy := map[string]int64{}
	active := 0
	for _, r := range reservations {
		if r.Status != gpuportal.ReservationActive {
			continue
		}
		active++
		if len(r.GPUs) != r.Count {
			t.Fatalf("step %d (%s): reservation %d holds %d of its %d GPUs", step, what, r.ID, len(r.GPUs), r.Count)
		}
		for _, g := range r.GPUs {
			if other, dup := reservedBy[g]; dup {
				t.Fatalf("step %d (%s): GPU %s is in reservations %d and %d", step, what, g, other, r.ID)
			}
			reservedBy[g] = r.ID
		}
	}
	heldBy := map[string]int64{}
	for _, i := range instances {
		if i.Status != gpuportal.InstanceRunning && i.Status != gpuportal.InstancePending {
			continue
		}
		for _, g := range i.GPUs {
			if other, dup := heldBy[g]; dup {
				t.Fatalf("step %d (%s): GPU %s is held by instances %d and %d", step, what, g, other, i.ID)
			}
			heldBy[g] = i.ID
			if res, ok := reservedBy[g]; ok && (i.ReservationID == nil || *i.ReservationID != res) {
				t.Fatalf("step %d (%s): GPU %s of reservation %d is held by instance %d (%s)", step, what, g, res, i.ID, i.Kind)
			}
		}
	}
	return active
}
