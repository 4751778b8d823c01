package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// simulatedAgents play every node's agent over the store: workloads asked
// to start run, those asked to stop (or past a notice) end — what the real
// agent reports, without processes.
func simulatedAgents(t *testing.T, db *store.DB) {
	t.Helper()
	ctx := context.Background()
	nodes, err := db.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		d, err := db.DesiredFor(ctx, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		var reports []gpuportal.WorkloadStatus
		for _, w := range d.Workloads {
			st := gpuportal.WorkloadStatus{InstanceID: w.InstanceID, Attempt: w.Attempt, State: gpuportal.WorkloadRunning}
			if w.Stop || w.Interrupt != nil {
				code := 143
				st.State, st.ExitCode, st.Signal, st.GPUsFree = gpuportal.WorkloadExited, &code, "SIGTERM", true
			}
			reports = append(reports, st)
		}
		if err := db.ApplyWorkloadReports(ctx, n.ID, reports); err != nil {
			t.Fatal(err)
		}
	}
}

// (issue 22, "Done when"; issue 30) Random top-ups through the test
// provider and Stripe (webhooks delivered twice), refunds of unused
// balance (some refused by the provider),
// bookings, cancellations, launches, stops, jobs and their cancels, an
// account disabled, and ticks with agents that do as they are told: after
// every step, for every account, balance = −Σ ledger; an instance that has
// ended is never billed again; every active reservation holds all its
// GPUs. On SQLite and PostgreSQL alike.
func TestMoneyAndCapacityHoldUnderRandomOperations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	boss := storetest.MustCreateUser(t, db, "boss@example.com", gpuportal.RoleAdmin)
	var users []*gpuportal.User
	for k := range 5 {
		users = append(users, storetest.MustCreatePoorUser(t, db, fmt.Sprintf("u%d@example.com", k), gpuportal.RoleCustomer))
	}
	rng := rand.New(rand.NewPCG(22, 7))
	var reservations []*gpuportal.Reservation
	var instances []*gpuportal.Instance
	var jobs []*gpuportal.Job
	endedCost := map[int64]gpuportal.Fen{} // instances that ended, and what they cost then
	payments, refunds := 0, 0
	check := func(step int, what string) {
		t.Helper()
		checkLedger(t, db, users...)
		for _, in := range instances {
			got := getInstance(t, db, in.ID)
			if cost, ended := endedCost[in.ID]; ended && got.Cost != cost {
				t.Fatalf("step %d (%s): instance %d billed after it ended: %s → %s", step, what, in.ID, cost, got.Cost)
			}
			switch got.Status {
			case gpuportal.InstanceStopped, gpuportal.InstanceFailed, gpuportal.InstanceInterrupted:
				if got.EndedAt != nil {
					endedCost[in.ID] = got.Cost
				}
			}
		}
		for _, r := range reservations {
			got, err := db.Reservation(ctx, boss, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != gpuportal.ReservationActive {
				continue
			}
			if gpus, _ := db.ReservationGPUs(ctx, r.ID); len(gpus) != got.Count {
				t.Fatalf("step %d (%s): active reservation %d holds %d of its %d GPUs", step, what, r.ID, len(gpus), got.Count)
			}
		}
	}
	pick := func() *gpuportal.User { return users[rng.IntN(len(users))] }
	for step := range 250 {
		u := pick()
		what := ""
		switch op := rng.IntN(10); op {
		case 0, 1:
			what = "top-up"
			provider := gpuportal.TestPayProvider
			if rng.IntN(2) == 0 {
				provider = gpuportal.StripePayProvider
			}
			top, err := db.CreateTopUp(ctx, u, gpuportal.TopUpRequest{Amount: gpuportal.Fen(100 * (1 + rng.IntN(500))), Provider: provider})
			if err != nil {
				t.Fatal(err)
			}
			payments++
			ev := gpuportal.PaymentEvent{PaymentID: fmt.Sprintf("p-%d", payments), TopUpID: top.ID, Amount: top.Amount, Status: "paid"}
			for range 1 + rng.IntN(2) { // a webhook may come twice
				if _, err := db.ApplyPayment(ctx, provider, ev); err != nil {
					t.Fatal(err)
				}
			}
		case 2:
			what = "book"
			start := clock.Now().Truncate(time.Hour).Add(time.Duration(1+rng.IntN(30)) * time.Hour)
			r, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1 + rng.IntN(6), Start: start, End: start.Add(time.Duration(4+rng.IntN(4)) * time.Hour)})
			if err == nil {
				reservations = append(reservations, r)
			}
		case 3:
			what = "cancel"
			if len(reservations) > 0 {
				r := reservations[rng.IntN(len(reservations))]
				_, _ = db.Cancel(ctx, &gpuportal.User{ID: r.UserID, Role: gpuportal.RoleCustomer}, r.ID)
			}
		case 4, 5:
			what = "launch"
			kind := gpuportal.KindSpot
			if rng.IntN(3) == 0 {
				kind = gpuportal.KindOnDemand
			}
			in, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: kind, Model: "a100-80g", Region: "cd-1", Count: 1 + rng.IntN(4), Command: "x", AutoRestart: rng.IntN(2) == 0})
			if err == nil {
				instances = append(instances, in)
			}
		case 6:
			what = "stop"
			if len(instances) > 0 {
				in := instances[rng.IntN(len(instances))]
				if _, err := db.Stop(ctx, &gpuportal.User{ID: in.UserID, Role: gpuportal.RoleCustomer}, in.ID); err != nil {
					t.Fatal(err)
				}
			}
		case 7:
			what = "job"
			if rng.IntN(2) == 0 || len(jobs) == 0 {
				j, err := db.CreateJob(ctx, u, gpuportal.JobRequest{Name: "j", Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 1 + rng.IntN(6), Command: "x", MaxParallel: 3})
				if err == nil {
					jobs = append(jobs, j)
				}
			} else {
				j := jobs[rng.IntN(len(jobs))]
				if _, err := db.CancelJob(ctx, &gpuportal.User{ID: j.UserID, Role: gpuportal.RoleCustomer}, j.ID); err != nil {
					t.Fatal(err)
				}
			}
		case 8:
			what = "refund"
			// Unused balance back: asked, approved, and the provider
			// refunds each share, or refuses one now and then, or gives
			// no answer at first (settled by a later word).
			if r, err := db.RequestRefund(ctx, u, gpuportal.Fen(100*(1+rng.IntN(50))), ""); err == nil {
				_, parts, err := db.StartRefund(ctx, boss, r.ID)
				if err == nil {
					for k, p := range parts {
						upd := gpuportal.RefundUpdate{RefundID: p.RefundID, TopUpID: p.TopUpID, Status: gpuportal.RefundPartMade, Ref: fmt.Sprintf("re_%d_%d", r.ID, k)}
						if rng.IntN(4) == 0 {
							upd.Status, upd.Error = gpuportal.RefundPartRefused, "refused"
						}
						if rng.IntN(4) == 0 {
							if err := db.RefundPartUnknown(ctx, p.RefundID, p.TopUpID, "timeout"); err != nil {
								t.Fatal(err)
							}
						}
						if err := db.SettleRefundPart(ctx, upd); err != nil {
							t.Fatal(err)
						}
						if err := db.SettleRefundPart(ctx, upd); err != nil { // said twice (a webhook after the answer)
							t.Fatal(err)
						}
					}
					refunds++
				} else if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
					t.Fatal(err)
				}
			}
			if step == 150 {
				what = "disable"
				yes := true
				if _, err := db.UpdateAccount(ctx, boss, users[0].ID, store.AccountUpdate{Disabled: &yes}); err != nil {
					t.Fatal(err)
				}
			}
		default:
			what = "tick"
			clock.Set(clock.Now().Add(time.Duration(1+rng.IntN(40)) * time.Minute))
			if _, err := db.Tick(ctx, clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		// The agents report after every step, and a tick follows (as the
		// scheduler's kick would): job tasks and instances placed, ended
		// ones billed.
		simulatedAgents(t, db)
		if _, err := db.Tick(ctx, clock.Now()); err != nil {
			t.Fatal(err)
		}
		simulatedAgents(t, db)
		// Record the instances job tasks made, so they are checked too.
		if list, err := db.InstanceList(ctx, boss, store.InstanceFilter{Limit: 1000}); err == nil {
			known := map[int64]bool{}
			for _, in := range instances {
				known[in.ID] = true
			}
			for k := range list {
				if !known[list[k].ID] {
					instances = append(instances, &list[k])
				}
			}
		}
		check(step, what)
	}
	t.Logf("%d reservations, %d instances (%d ended), %d jobs, %d payments, %d refunds", len(reservations), len(instances), len(endedCost), len(jobs), payments, refunds)
	if len(endedCost) == 0 || len(reservations) == 0 || refunds == 0 {
		t.Fatalf("the walk did too little: %d instances ended, %d reservations", len(endedCost), len(reservations))
	}
}
