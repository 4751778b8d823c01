package store_test

import (
	"context"
	"maps"
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

// The tick keeps the active reservations' GPUs between runs too
// (reservation_gpus_revision): a start, a cancellation, a replaced GPU
// and an end each show in the next read.
func TestReservedGPUsFollowChangesBetweenTicks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 4)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	start := clock.Now().Truncate(time.Hour).Add(2 * time.Hour)
	book := func() int64 {
		t.Helper()
		r, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	first, second := book(), book()
	// want is what the database says: each active reservation's GPUs.
	want := func() map[string]int64 {
		out := map[string]int64{}
		for _, id := range []int64{first, second} {
			r, err := db.Reservation(ctx, u, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status == gpuportal.ReservationActive {
				for _, g := range r.GPUs {
					out[g] = id
				}
			}
		}
		return out
	}
	check := func(when string, wantLen int) {
		t.Helper()
		for range 2 { // read, then kept
			got, err := db.ReservedGPUs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if w := want(); !maps.Equal(got, w) || len(got) != wantLen {
				t.Fatalf("%s: the tick reads %v, the reservations hold %v (want %d GPUs)", when, got, w, wantLen)
			}
		}
	}
	check("before the start", 0)
	tick(t, db, clock, start)
	check("both started", 4)
	if _, err := db.Cancel(ctx, u, second); err != nil {
		t.Fatal(err)
	}
	check("the second cancelled", 2)
	r, err := db.Reservation(ctx, u, first)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetGPUHealth(ctx, r.GPUs[0], false); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start.Add(time.Minute))
	if now, err := db.Reservation(ctx, u, first); err != nil || slices.Equal(now.GPUs, r.GPUs) {
		t.Fatalf("GPUs %v after %s failed (%v), want it replaced", now.GPUs, r.GPUs[0], err)
	}
	check("a GPU replaced", 2)
	tick(t, db, clock, start.Add(4*time.Hour))
	check("ended", 0)
}
