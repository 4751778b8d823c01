package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 44, item 1) One customer's booking whose launch mounts a volume
// suspended by its start (the balance ran out) used to fail every tick
// for everyone. Now its reservation starts, its launch alone fails and
// its owner is told why; everyone else's reservation starts and runs its
// work, spot is placed, and the volumes' billing goes on.
func TestSuspendedVolumeInALaunchHaltsNobody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	admin := &gpuportal.User{Role: gpuportal.RoleAdmin}
	start := storetest.Epoch.Add(6 * time.Hour)
	req := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 4, Start: start, End: start.Add(4 * time.Hour)}

	// The poor customer: enough for the booking and an hour of a big volume.
	poor := storetest.MustCreatePoorUser(t, db, "poor@example.com", gpuportal.RoleCustomer)
	q, err := db.Quote(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Credit(ctx, admin, poor.ID, gpuportal.CreditRequest{Amount: q.Total + 100, Note: "just enough"}); err != nil {
		t.Fatal(err)
	}
	vol, err := db.CreateVolume(ctx, poor, gpuportal.VolumeRequest{Name: "data", Region: "cd-1", SizeGiB: 1000})
	if err != nil {
		t.Fatal(err)
	}
	poorReq := req
	poorReq.Launch = &gpuportal.LaunchSpec{Command: "train", Volumes: []gpuportal.VolumeMount{{ID: vol.ID}}}
	poorRes, err := db.Book(ctx, poor, poorReq)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else books the same hour with work of their own, and runs spot.
	rich := storetest.MustCreateUser(t, db, "rich@example.com", gpuportal.RoleCustomer)
	richReq := req
	richReq.Launch = &gpuportal.LaunchSpec{Command: "train"}
	richRes, err := db.Book(ctx, rich, richReq)
	if err != nil {
		t.Fatal(err)
	}
	for at := clock.Now().Add(time.Hour); at.Before(start); at = at.Add(time.Hour) {
		tick(t, db, clock, at)
	}
	if v, _ := db.Volume(ctx, poor, vol.ID); v.Status != gpuportal.VolumeSuspended {
		t.Fatalf("the poor customer's volume is %s before the start; the test wants it suspended", v.Status)
	}
	spot, err := db.Launch(ctx, rich, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "sleep"})
	if err != nil {
		t.Fatal(err)
	}

	res := tick(t, db, clock, start) // on today's code: an error, for everyone
	if res.Activated != 2 || res.Failed != 1 || res.Launched != 1 {
		t.Errorf("the start tick: %+v; want both reservations started, the rich one's work launched, one decision failed", res)
	}
	for _, r := range []struct {
		u  *gpuportal.User
		id int64
	}{{poor, poorRes.ID}, {rich, richRes.ID}} {
		if got, _ := db.Reservation(ctx, r.u, r.id); got.Status != gpuportal.ReservationActive || len(got.GPUs) != 4 {
			t.Errorf("reservation %d is %s with %d GPUs; want active with 4", r.id, got.Status, len(got.GPUs))
		}
	}
	tick(t, db, clock, start.Add(time.Minute))
	if got := getInstance(t, db, spot.ID); got.Node == "" {
		t.Errorf("the spot instance was not placed: %+v", got)
	}
	richWork, _ := db.Instances(ctx, rich, 0)
	launched := 0
	for _, i := range richWork {
		if i.ReservationID != nil && *i.ReservationID == richRes.ID {
			launched++
		}
	}
	if launched == 0 {
		t.Error("the other customer's reservation launched no work")
	}
	if poorWork, _ := db.Instances(ctx, poor, 0); len(poorWork) != 0 {
		t.Errorf("the failed launch left instances: %+v", poorWork)
	}
	notes, _ := db.InApp(ctx, poor.ID, 50)
	var told *gpuportal.Notification
	for k := range notes {
		if notes[k].Kind == gpuportal.NoteReservationLaunchFailed && notes[k].Params.ReservationID == poorRes.ID {
			told = &notes[k]
		}
	}
	if told == nil || !strings.Contains(told.Params.Reason, "suspended") {
		t.Fatalf("the owner was not told why the launch failed: %+v", told)
	}
	failures, err := db.TickFailures(ctx, start.Add(-time.Hour), 10)
	if err != nil || len(failures) != 1 || failures[0].Step != gpuportal.StepLaunch || failures[0].UserID == nil || *failures[0].UserID != poor.ID {
		t.Fatalf("recorded failures = %+v, %v", failures, err)
	}
	// A top-up lifts the suspension at the next tick, as before: nothing
	// stuck behind the failure.
	if _, err := db.Credit(ctx, admin, poor.ID, gpuportal.CreditRequest{Amount: 100_000, Note: "top-up"}); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start.Add(2*time.Minute))
	if v, _ := db.Volume(ctx, poor, vol.ID); v.Status == gpuportal.VolumeSuspended {
		t.Errorf("the volume is still suspended after the top-up")
	}
}

// (issue 44, item 1) The applier applies every decision that does not
// fail: decisions failing at random (reservations' starts and ends,
// placements, book-keeping) never keep any other from applying, each
// failure is recorded and its owner told once, and a failed decision is
// applied by a later tick once it stops failing.
func TestEveryDecisionThatDoesNotFailApplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			db, clock := storetest.Open(t)
			storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 4, 8)
			rng := rand.New(rand.NewPCG(seed, 44))
			start := storetest.Epoch.Add(2 * time.Hour)
			var users []*gpuportal.User
			var bookings []*gpuportal.Reservation
			for k := range 6 {
				u := storetest.MustCreateUser(t, db, fmt.Sprintf("u%d@example.com", k), gpuportal.RoleCustomer)
				users = append(users, u)
				r, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				bookings = append(bookings, r)
			}
			var instances []*gpuportal.Instance
			for k := range 8 {
				i, err := db.Launch(ctx, users[k%len(users)], gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "sleep"})
				if err != nil {
					t.Fatal(err)
				}
				instances = append(instances, i)
			}
			// Roughly a third of the decisions fail, chosen at random once
			// per subject: the same subject keeps failing every tick.
			var mu sync.Mutex
			failing := map[string]bool{}
			decided := map[string]bool{}
			db.FailDecisionsForTest(func(step, subject string) error {
				mu.Lock()
				defer mu.Unlock()
				key := step + "/" + subject
				if !decided[key] {
					decided[key], failing[key] = true, rng.IntN(3) == 0
				}
				if failing[key] {
					return errors.New("injected failure")
				}
				return nil
			})
			clock.Set(start)
			res, err := db.Tick(ctx, start)
			if err != nil {
				t.Fatalf("the tick failed as a whole: %v", err)
			}
			failedNow := 0
			for _, f := range failing {
				if f {
					failedNow++
				}
			}
			if res.Failed != failedNow {
				t.Errorf("the tick counts %d failed decisions; %d were made to fail", res.Failed, failedNow)
			}
			for _, r := range bookings {
				got, _ := db.Reservation(ctx, admin, r.ID)
				want := gpuportal.ReservationActive
				if failing[gpuportal.StepActivate+"/"+fmt.Sprintf("reservation %d", r.ID)] {
					want = gpuportal.ReservationConfirmed
				}
				if got.Status != want {
					t.Errorf("reservation %d is %s, want %s", r.ID, got.Status, want)
				}
			}
			for _, i := range instances {
				got := getInstance(t, db, i.ID)
				placed := got.Node != ""
				if wantPlaced := !failing[gpuportal.StepPlace+"/"+fmt.Sprintf("instance %d", i.ID)]; placed != wantPlaced {
					t.Errorf("instance %d placed = %v, want %v", i.ID, placed, wantPlaced)
				}
			}
			failures, err := db.TickFailures(ctx, start, 100)
			if err != nil || len(failures) != failedNow {
				t.Errorf("recorded %d failures (%v), want %d", len(failures), err, failedNow)
			}
			// A second tick: the same failures again, recorded once each,
			// owners told once.
			clock.Set(start.Add(time.Minute))
			if _, err := db.Tick(ctx, start.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			for _, u := range users {
				notes, _ := db.InApp(ctx, u.ID, 100)
				seen := map[string]int{}
				for _, n := range notes {
					if n.Kind == gpuportal.NoteScheduleFailed {
						seen[n.Params.Kind+"/"+n.Params.Subject]++
					}
				}
				for key, n := range seen {
					if n != 1 || !failing[key] {
						t.Errorf("user %d told %d times of %s (failing: %v)", u.ID, n, key, failing[key])
					}
				}
			}
			// The faults clear: the next tick applies what failed.
			db.FailDecisionsForTest(nil)
			clock.Set(start.Add(2 * time.Minute))
			if _, err := db.Tick(ctx, start.Add(2*time.Minute)); err != nil {
				t.Fatal(err)
			}
			for _, r := range bookings {
				if got, _ := db.Reservation(ctx, admin, r.ID); got.Status != gpuportal.ReservationActive {
					t.Errorf("after the fault cleared, reservation %d is %s", r.ID, got.Status)
				}
			}
			for _, i := range instances {
				if got := getInstance(t, db, i.ID); got.Node == "" {
					t.Errorf("after the fault cleared, instance %d is not placed", i.ID)
				}
			}
		})
	}
}

// (issue 44, item 8) A disabled account runs nothing: its booking starts
// (it is paid) but its launch spec does not run, and an instance of it
// still pending (a write that raced the close-down) never places.
func TestDisabledAccountLaunchesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "gone@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Add(2 * time.Hour)
	r, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour),
		Launch: &gpuportal.LaunchSpec{Command: "mine"}})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := db.UpdateAccount(ctx, &gpuportal.User{Role: gpuportal.RoleAdmin}, u.ID, store.AccountUpdate{Disabled: &yes}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Reservation(ctx, admin, r.ID); got.Launch != nil {
		t.Errorf("the disabled account's booking keeps its launch spec: %+v", got.Launch)
	}
	if res := tick(t, db, clock, start); res.Activated != 1 || res.Launched != 0 {
		t.Errorf("the start of a disabled account's booking: %+v; want it started and nothing launched", res)
	}
	// An instance written as the account closed down stays pending.
	other := storetest.MustCreateUser(t, db, "racer@example.com", gpuportal.RoleCustomer)
	i, err := db.Launch(ctx, other, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "sleep"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MarkDisabledForTest(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, start.Add(time.Minute))
	if got := getInstance(t, db, i.ID); got.Node != "" || got.Status != gpuportal.InstancePending {
		t.Errorf("a disabled account's pending instance was placed: %+v", got)
	}
}
