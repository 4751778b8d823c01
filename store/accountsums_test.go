package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// The tick keeps each account's sums between runs
// (live_account_revisions): a launch, its start, a second account's run,
// a top-up, a credit limit, a low-balance notice, a balance stop and its
// calling off, one of two runs ending, a stop and an exit each show in
// the next read, which is always what one aggregate over the live runs
// reads.
func TestAccountSumsFollowChangesBetweenTicks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	v := storetest.MustCreateUser(t, db, "v@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	check := func(when string, accounts int) {
		t.Helper()
		for range 2 { // summed, then kept
			kept, now, err := db.AccountSums(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(kept, now) || len(now) != accounts {
				t.Fatalf("%s: the tick reads\n%v\nthe live runs sum to\n%v\n(want %d accounts)", when, kept, now, accounts)
			}
		}
	}
	check("nothing runs", 0)
	topUp(t, db, u, 600) // ¥6: a little over an hour of 2 × ¥2.40
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "train"})
	if err != nil {
		t.Fatal(err)
	}
	check("launched", 1)
	at := storetest.Epoch
	tick(t, db, clock, at)
	agent.runAll()
	check("running", 1)
	if _, err := db.Launch(ctx, v, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "serve"}); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, at.Add(time.Minute))
	agent.runAll()
	check("a second account runs", 2)
	limit := gpuportal.Fen(100)
	if _, err := db.UpdateAccount(ctx, admin, v.ID, store.AccountUpdate{CreditLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	check("a credit limit", 2)
	tick(t, db, clock, at.Add(50*time.Minute)) // 25 minutes left: told
	check("told the balance runs low", 2)
	tick(t, db, clock, at.Add(75*time.Minute)) // nothing left: the balance stop
	if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceInterrupting {
		t.Fatalf("at zero: %+v", got)
	}
	check("a balance stop", 2)
	topUp(t, db, u, 10000)
	check("topped up", 2)
	tick(t, db, clock, at.Add(75*time.Minute)) // the stop called off
	if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceRunning {
		t.Fatalf("after the top-up: %+v", got)
	}
	check("the stop called off", 2)
	// One of two runs ends: the account's sums lose it.
	extra, err := db.Launch(ctx, v, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "eval"})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, at.Add(76*time.Minute))
	agent.runAll()
	check("a second run", 2)
	if _, err := db.Stop(ctx, v, extra.ID); err != nil {
		t.Fatal(err)
	}
	check("one of two runs asked to stop", 2)
	agent.exit(getInstance(t, db, extra.ID))
	check("one of two runs ended", 2)
	stopped, err := db.Stop(ctx, u, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("asked to stop", 1)
	agent.exit(getInstance(t, db, stopped.ID))
	check("exited", 1)
}
