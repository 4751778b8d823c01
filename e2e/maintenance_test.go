package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gpuportal"
)

// (issue 49) A maintenance window with real agents: two full-node
// bookings over it on a two-node fleet — the newer is cancelled and
// refunded in full when the window is planned, the older starts on the
// other node; the spot instance on the node gets its notice (reason
// maintenance) before the start; at the start the node drains.
func TestMaintenanceWindowWithRealAgents(t *testing.T) {
	t.Parallel()
	p := startPortal(t, true) // Tuesday 2026-12-01 09:30 in Shanghai
	dir := t.TempDir()
	p.startAgent(t, filepath.Join(dir, "node-a"), filepath.Join(dir, "ckpt"), "mock:dgxa100", true)
	p.startAgent(t, filepath.Join(dir, "node-b"), filepath.Join(dir, "ckpt"), "mock:dgxa100", true)
	eventually(t, 20*time.Second, "two nodes", func() bool { return len(p.nodes()) == 2 })

	var spot gpuportal.Instance
	if st := p.api("POST", "/api/v1/instances", p.user, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1,"command":"sleep 3600"}`, &spot); st != 201 {
		t.Fatalf("launch: %d", st)
	}
	eventually(t, 30*time.Second, "the spot instance running", func() bool { return p.instance(spot.ID).Status == gpuportal.InstanceRunning })
	node := p.instance(spot.ID).Node
	var nodeGPUs []string
	for _, n := range p.nodes() {
		if n.ID == node {
			for _, g := range n.GPUs {
				nodeGPUs = append(nodeGPUs, g.UUID)
			}
		}
	}

	start := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC) // 12:00 in Shanghai
	book := func() gpuportal.Reservation {
		var r gpuportal.Reservation
		body := fmt.Sprintf(`{"model":"a100-80g","region":"cd-1","count":8,"start":%q,"end":%q}`, start.Format(time.RFC3339), start.Add(4*time.Hour).Format(time.RFC3339))
		if st := p.api("POST", "/api/v1/reservations", p.user, body, &r); st != 201 {
			t.Fatalf("book: %d", st)
		}
		return r
	}
	older, newer := book(), book()

	var m gpuportal.Maintenance
	body := fmt.Sprintf(`{"region":"cd-1","node_id":%q,"start":%q,"end":%q,"reason":"power supply replacement"}`, node, start.Format(time.RFC3339), start.Add(2*time.Hour).Format(time.RFC3339))
	if st := p.api("POST", "/api/v1/admin/maintenance", p.admin, body, &m); st != 201 || !slices.Equal(m.Affected, []int64{newer.ID}) || m.GPUs != 8 {
		t.Fatalf("plan: %d %+v", st, m)
	}
	var r gpuportal.Reservation
	p.api("GET", fmt.Sprintf("/api/v1/reservations/%d", newer.ID), p.user, "", &r)
	if r.Status != gpuportal.ReservationCancelled || r.Refund == nil || *r.Refund != newer.Price {
		t.Fatalf("the newer booking: %+v", r)
	}

	// To two minutes before the start: the spot instance has its notice.
	advance(t, p, "2h28m")
	eventually(t, 10*time.Second, "the spot instance's maintenance notice", func() bool {
		i := p.instance(spot.ID)
		return i.Status != gpuportal.InstanceRunning && i.Interruption != nil && i.Interruption.Reason == gpuportal.ReasonMaintenance
	})
	// The start: the node drains; the older booking runs on the other.
	advance(t, p, "3m")
	eventually(t, 20*time.Second, "the node drained and the older booking on the other node", func() bool {
		drained := false
		for _, n := range p.nodes() {
			drained = drained || (n.ID == node && n.State == gpuportal.NodeDraining && strings.Contains(n.DrainNote, "power supply"))
		}
		var o gpuportal.Reservation
		p.api("GET", fmt.Sprintf("/api/v1/reservations/%d", older.ID), p.user, "", &o)
		if !drained || o.Status != gpuportal.ReservationActive || len(o.GPUs) != 8 {
			return false
		}
		for _, g := range o.GPUs {
			if slices.Contains(nodeGPUs, g) {
				t.Fatalf("the older booking holds GPU %s of the node in maintenance", g)
			}
		}
		return true
	})
}
