package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// The tick keeps each pool's GPU list between runs (store/gpulists.go):
// every change to the fleet — a GPU's health, a node added — must
// show in the next placement all the same.
func TestPlacementsFollowFleetChangesBetweenTicks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 2)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	at := clock.Now()
	launch := func() int64 {
		t.Helper()
		in, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "train"})
		if err != nil {
			t.Fatal(err)
		}
		return in.ID
	}
	tickOn := func() {
		t.Helper()
		at = at.Add(time.Minute)
		tick(t, db, clock, at)
	}
	gpusOf := func(id int64) []string { return getInstance(t, db, id).GPUs }

	first := launch()
	tickOn() // the list is read and kept
	if got := gpusOf(first); !slices.Equal(got, []string{"GPU-n-1-0"}) {
		t.Fatalf("first instance on %v, want GPU-n-1-0", got)
	}

	second := launch() // waits for a tick
	if err := db.SetGPUHealth(ctx, "GPU-n-1-1", false); err != nil {
		t.Fatal(err)
	}
	tickOn()
	if got := gpusOf(second); len(got) != 0 {
		t.Fatalf("placed on %v, the pool's only other GPU is unhealthy", got)
	}
	if err := db.SetGPUHealth(ctx, "GPU-n-1-1", true); err != nil {
		t.Fatal(err)
	}
	tickOn()
	if got := gpusOf(second); !slices.Equal(got, []string{"GPU-n-1-1"}) {
		t.Fatalf("second instance on %v once its GPU is healthy again, want GPU-n-1-1", got)
	}

	storetest.AddFleet(t, db, "m", "cd-1", "a100-80g", 1, 1)
	third := launch()
	tickOn()
	if got := gpusOf(third); !slices.Equal(got, []string{"GPU-m-1-0"}) {
		t.Fatalf("third instance on %v, want the new node's GPU-m-1-0 (n-1 is full)", got)
	}
}
