package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 49) A maintenance window on one of two 8-GPU nodes, with two
// bookings of 8 GPUs over it: the dry run lists the newer one and changes
// nothing; planned, the newer is cancelled with a full refund and its
// owner told, the older keeps its GPUs (on the other node at its start);
// the calendar shows the hours with the reason and no more room; a spot
// instance on the node gets its notice before the start; at the start
// the node is drained, at the end undrained. Bad windows are refused.
func TestMaintenanceWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	nodes := storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	ann := storetest.MustCreateUser(t, db, "ann@example.com", gpuportal.RoleCustomer)
	bob := storetest.MustCreateUser(t, db, "bob@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	t0 := storetest.Epoch
	start := t0.Add(4 * time.Hour)
	end := start.Add(4 * time.Hour)
	older, err := db.Book(ctx, ann, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start.Add(-2 * time.Hour), End: end})
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(time.Minute))
	newer, err := db.Book(ctx, bob, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start, End: end})
	if err != nil {
		t.Fatal(err)
	}
	spot, err := db.Launch(ctx, ann, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "train"})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	agent.runAll()
	node := getInstance(t, db, spot.ID).Node

	// Refused: not an admin, end ≤ start, in the past, an unknown node.
	req := gpuportal.MaintenanceRequest{NodeID: node, Start: start, End: end, Reason: "power supply replacement"}
	if _, err := db.CreateMaintenance(ctx, ann, req); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Fatalf("a customer's window = %v", err)
	}
	for _, bad := range []struct {
		r    gpuportal.MaintenanceRequest
		code string
	}{
		{gpuportal.MaintenanceRequest{NodeID: node, Start: end, End: start, Reason: "x"}, gpuportal.EPOLICY},
		{gpuportal.MaintenanceRequest{NodeID: node, Start: t0.Add(-3 * time.Hour), End: t0.Add(-time.Hour), Reason: "x"}, gpuportal.EPOLICY},
		{gpuportal.MaintenanceRequest{NodeID: "no-such-node", Start: start, End: end, Reason: "x"}, gpuportal.ENOTFOUND},
		{gpuportal.MaintenanceRequest{NodeID: node, Start: start, End: end}, gpuportal.EINVALID},
		{gpuportal.MaintenanceRequest{NodeID: node, Region: "bj-1", Start: start, End: end, Reason: "x"}, gpuportal.EPOLICY},
		{gpuportal.MaintenanceRequest{Start: start, End: end, Reason: "x"}, gpuportal.EINVALID},
	} {
		if _, err := db.CreateMaintenance(ctx, admin, bad.r); gpuportal.ErrorCode(err) != bad.code {
			t.Errorf("window %+v = %v, want %s", bad.r, err, bad.code)
		}
	}

	// The dry run: the newer booking would go; nothing changes.
	dry := req
	dry.DryRun = true
	check, err := db.CreateMaintenance(ctx, admin, dry)
	if err != nil || len(check.Affected) != 1 || check.Affected[0] != newer.ID || check.GPUs != 8 {
		t.Fatalf("dry run = %+v, %v", check, err)
	}
	if r, _ := db.Reservation(ctx, admin, newer.ID); r.Status != gpuportal.ReservationConfirmed {
		t.Fatalf("the dry run cancelled reservation %d", newer.ID)
	}
	if list, _ := db.Maintenances(ctx); len(list) != 0 {
		t.Fatalf("the dry run planned %d windows", len(list))
	}

	bobBefore, _ := db.Balance(ctx, bob)
	m, err := db.CreateMaintenance(ctx, admin, req)
	if err != nil || m.ID == 0 || len(m.Affected) != 1 || m.Affected[0] != newer.ID {
		t.Fatalf("window = %+v, %v", m, err)
	}
	if r, _ := db.Reservation(ctx, admin, newer.ID); r.Status != gpuportal.ReservationCancelled || r.Refund == nil || *r.Refund != newer.Price {
		t.Fatalf("the newer booking = %+v", r)
	}
	if after, _ := db.Balance(ctx, bob); after.Balance != bobBefore.Balance+newer.Price {
		t.Fatalf("bob's balance %s → %s: not refunded in full (%s)", bobBefore.Balance, after.Balance, newer.Price)
	}
	notes, _ := db.InApp(ctx, bob.ID, 10)
	told := false
	for _, n := range notes {
		told = told || (n.Kind == gpuportal.NoteMaintenance && n.Params.ReservationID == newer.ID && n.Params.Subject == "power supply replacement")
	}
	if !told {
		t.Fatal("bob was not told why")
	}
	if r, _ := db.Reservation(ctx, admin, older.ID); r.Status != gpuportal.ReservationConfirmed {
		t.Fatalf("the older booking = %s", r.Status)
	}
	// The calendar: the window's hours show the maintenance, none free.
	slots, err := db.Availability(ctx, "a100-80g", "cd-1", start, end)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slots {
		if s.MaintenanceGPUs != 8 || s.MaintenanceReason != "power supply replacement" || s.Free != 0 || s.Reserved != 8 {
			t.Fatalf("an hour of the window = %+v", s)
		}
	}
	if _, err := db.Book(ctx, bob, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)}); gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		t.Fatalf("booking into the window = %v", err)
	}

	// The spot instance on the node: its notice before the start.
	var noticed time.Time
	for at := clock.Now().Truncate(time.Minute).Add(time.Minute); at.Before(start); at = at.Add(time.Minute) {
		tick(t, db, clock, at)
		if i := getInstance(t, db, spot.ID); i.Status == gpuportal.InstanceInterrupting && noticed.IsZero() {
			noticed = at
			if i.Interruption.Reason != gpuportal.ReasonMaintenance || i.Interruption.Deadline.After(start) {
				t.Fatalf("the notice = %+v", i.Interruption)
			}
			agent.exit(i)
		}
	}
	if noticed.IsZero() || start.Sub(noticed) > 10*time.Minute {
		t.Fatalf("the spot instance's notice came at %s for a %s start", noticed, start)
	}
	// At the start: the node drained; the older booking on the other node.
	tick(t, db, clock, start)
	tick(t, db, clock, start.Add(time.Minute))
	state := func() (string, string) {
		list, _ := db.Nodes(ctx)
		for _, n := range list {
			if n.ID == node {
				return n.State, n.DrainNote
			}
		}
		return "", ""
	}
	if st, note := state(); st != gpuportal.NodeDraining || !strings.Contains(note, "power supply") {
		t.Fatalf("the node at the start = %s %q", st, note)
	}
	gpus, _ := db.ReservationGPUs(ctx, older.ID)
	if len(gpus) != 8 {
		t.Fatalf("the older booking holds %d GPUs", len(gpus))
	}
	for _, n := range nodes {
		if n.ID != node {
			continue
		}
		for _, g := range n.GPUs {
			for _, held := range gpus {
				if held == g.UUID {
					t.Fatalf("the older booking holds GPU %s of the node in maintenance", g.UUID)
				}
			}
		}
	}
	// At the end: undrained, over.
	tick(t, db, clock, end)
	if st, note := state(); st == gpuportal.NodeDraining || note != "" {
		t.Fatalf("the node after the window = %s %q", st, note)
	}
	list, _ := db.Maintenances(ctx)
	if len(list) != 1 || list[0].EndedAt == nil {
		t.Fatalf("windows after the end = %+v", list)
	}
	if err := db.EndMaintenance(ctx, admin, m.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("ending a window that is over = %v", err)
	}
	audit, _ := db.Audit(ctx, store.AuditFilter{Action: "maintenance", Limit: 10})
	if len(audit) == 0 {
		t.Fatal("the window is not in the audit log")
	}
}

// (issue 49) A window ended early gives its hours back.
func TestMaintenanceEndedEarly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Add(5 * time.Hour)
	m, err := db.CreateMaintenance(ctx, admin, gpuportal.MaintenanceRequest{Region: "cd-1", Start: start, End: start.Add(6 * time.Hour), Reason: "firmware"})
	if err != nil || m.GPUs != 8 {
		t.Fatalf("window = %+v, %v", m, err)
	}
	if _, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start, End: start.Add(4 * time.Hour)}); gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		t.Fatalf("a booking in the window = %v", err)
	}
	if err := db.EndMaintenance(ctx, admin, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start, End: start.Add(4 * time.Hour)}); err != nil {
		t.Fatalf("a booking once it ended early = %v", err)
	}
}
