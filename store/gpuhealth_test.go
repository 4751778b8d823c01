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

// (issue 49) A GPU fails under a running instance: out of service in the
// heartbeat's transaction (capacity 15 of 16), the auto-restart spot
// instance on it interrupted with reason gpu_failure and started again on
// healthy GPUs, its owner told and credited for the hour in progress,
// nothing counted in the spot rates; an application XID changes nothing;
// the GPU stays out of service whatever later heartbeats say until an
// admin returns it — refused while its node still reports the fault; and
// a node whose GPUs fail three times in a day is drained with a note.
func TestGPUFailureTakesItOutOfServiceAndMakesTheOwnerWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	nodes := storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 4, Command: "train", AutoRestart: true})
	if err != nil {
		t.Fatal(err)
	}
	od, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	agent.runAll()
	running := getInstance(t, db, inst.ID)
	failed := running.GPUs[0]
	node := running.Node

	wall := storetest.Epoch
	heartbeat := func(nodeID string, faults map[string]gpuportal.GPUHealth, xid map[string]uint64) {
		t.Helper()
		wall = wall.Add(10 * time.Second)
		clock.Set(clock.Now().Add(10 * time.Second))
		hb := gpuportal.AgentHeartbeat{HeartbeatSeconds: 10}
		for _, n := range nodes {
			if n.ID != nodeID {
				continue
			}
			for _, g := range n.GPUs {
				s := gpuportal.GPUSample{UUID: g.UUID, Healthy: true, LastXID: xid[g.UUID]}
				if h, ok := faults[g.UUID]; ok {
					s.Healthy, s.Health = false, &h
				}
				hb.GPUs = append(hb.GPUs, s)
			}
		}
		d, err := db.DesiredFor(ctx, nodeID)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range d.Workloads {
			hb.Workloads = append(hb.Workloads, gpuportal.WorkloadStatus{InstanceID: w.InstanceID, Attempt: w.Attempt, State: gpuportal.WorkloadRunning})
		}
		if _, err := db.RecordHeartbeat(ctx, nodeID, hb, wall); err != nil {
			t.Fatal(err)
		}
	}
	healthyGPUs := func() int {
		t.Helper()
		list, _ := db.Nodes(ctx)
		n := 0
		for _, nd := range list {
			for _, g := range nd.GPUs {
				if g.Healthy {
					n++
				}
			}
		}
		return n
	}

	// XID 13 (a program's own fault): nothing changes.
	heartbeat(node, nil, map[string]uint64{failed: 13})
	if i := getInstance(t, db, inst.ID); i.Status != gpuportal.InstanceRunning || healthyGPUs() != 16 {
		t.Fatalf("after XID 13: %s, %d healthy", i.Status, healthyGPUs())
	}

	// 40 minutes in, XID 79 on one of its GPUs.
	clock.Set(running.StartedAt.Add(40 * time.Minute))
	fault := gpuportal.GPUHealth{Reason: gpuportal.XIDText(79), XID: 79}
	balanceBefore, err := db.Balance(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	heartbeat(node, map[string]gpuportal.GPUHealth{failed: fault}, nil)
	i := getInstance(t, db, inst.ID)
	if i.Status != gpuportal.InstancePending || i.Restarts != 1 || !strings.Contains(i.Error, "fell off the bus") {
		t.Fatalf("the spot instance after its GPU failed = %s, restarts %d, %q", i.Status, i.Restarts, i.Error)
	}
	if healthyGPUs() != 15 {
		t.Fatalf("%d GPUs healthy after one failed", healthyGPUs())
	}
	// Credited what the 40 minutes cost; the ledger line says why.
	entries, _, err := db.Ledger(ctx, u.ID, 20)
	if err != nil {
		t.Fatal(err)
	}
	var credit, charge gpuportal.Fen
	for _, e := range entries {
		if e.Kind == gpuportal.LedgerRefund && strings.Contains(e.Description, "GPU failed") {
			credit = -e.Amount
		}
		if e.Kind == gpuportal.LedgerInstance && e.InstanceID != nil && *e.InstanceID == inst.ID {
			charge = e.Amount
		}
	}
	if charge <= 0 || credit != charge {
		t.Fatalf("charged %s, credited %s for a GPU that failed 40 minutes in", charge, credit)
	}
	if after, _ := db.Balance(ctx, u); after.Balance != balanceBefore.Balance {
		t.Fatalf("balance %s → %s: the failed hour cost the customer", balanceBefore.Balance, after.Balance)
	}
	notes, _ := db.InApp(ctx, u.ID, 20)
	told := false
	for _, n := range notes {
		told = told || (n.Kind == gpuportal.NoteGPUFailure && n.Params.InstanceID == inst.ID && n.Params.Refund == credit)
	}
	if !told {
		t.Fatal("the owner was not told of the GPU failure")
	}
	// Started again on healthy GPUs, never the failed one.
	tick(t, db, clock, clock.Now())
	agent.runAll()
	i = getInstance(t, db, inst.ID)
	for _, g := range i.GPUs {
		if g == failed {
			t.Fatal("restarted on the failed GPU")
		}
	}
	if i.Status != gpuportal.InstanceRunning {
		t.Fatalf("the restarted instance = %s", i.Status)
	}
	// Never a spot interruption in the published rates.
	rates, err := db.Rates(ctx, "a100-80g", "cd-1", 1)
	if err != nil || rates.Trailing.Interrupted != 0 {
		t.Fatalf("rates = %+v, %v", rates.Trailing, err)
	}

	// Still reported faulty: out of service, and its return refused.
	heartbeat(node, map[string]gpuportal.GPUHealth{failed: fault}, nil)
	if err := db.ReturnGPU(ctx, admin, failed); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT || !strings.Contains(err.Error(), "fell off the bus") {
		t.Fatalf("returning a GPU still faulty = %v", err)
	}
	// Reset: its node reports it healthy; it stays out until returned.
	heartbeat(node, nil, nil)
	if healthyGPUs() != 15 {
		t.Fatal("a failed GPU came back by itself")
	}
	if err := db.ReturnGPU(ctx, &gpuportal.User{ID: u.ID, Role: gpuportal.RoleCustomer}, failed); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Fatalf("a customer returning a GPU = %v", err)
	}
	if err := db.ReturnGPU(ctx, admin, failed); err != nil {
		t.Fatal(err)
	}
	if healthyGPUs() != 16 {
		t.Fatalf("%d healthy after the return", healthyGPUs())
	}
	if err := db.ReturnGPU(ctx, admin, failed); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("returning a GPU in service = %v", err)
	}
	audit, err := db.Audit(ctx, store.AuditFilter{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	returned := false
	for _, a := range audit {
		returned = returned || (a.Action == "gpu.return" && a.Subject == "gpu/"+failed)
	}
	if !returned {
		t.Fatal("the return is not in the audit log")
	}

	// The on-demand instance's node: three failures in a day drain it.
	odNode := getInstance(t, db, od.ID).Node
	var odGPUs []string
	for _, n := range nodes {
		if n.ID == odNode {
			for _, g := range n.GPUs {
				odGPUs = append(odGPUs, g.UUID)
			}
		}
	}
	faults := map[string]gpuportal.GPUHealth{}
	for k := range 3 {
		faults[odGPUs[5+k]] = gpuportal.GPUHealth{Reason: "an uncorrectable (double-bit) ECC error"}
		heartbeat(odNode, faults, nil)
	}
	list, _ := db.Nodes(ctx)
	for _, n := range list {
		if n.ID == odNode && (n.State != gpuportal.NodeDraining || n.DrainNote == "") {
			t.Fatalf("node %s after 3 GPU failures = %s %q", n.ID, n.State, n.DrainNote)
		}
		for _, g := range n.GPUs {
			if g.UUID == odGPUs[5] && (g.Health.Healthy || !strings.Contains(g.Health.Reason, "ECC") || g.Health.At == nil) {
				t.Fatalf("a failed GPU's health = %+v", g.Health)
			}
		}
	}
	if st := getInstance(t, db, od.ID).Status; st != gpuportal.InstanceRunning {
		t.Fatalf("the on-demand instance on another GPU of the drained node = %s", st)
	}
}
