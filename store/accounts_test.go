package store_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// Quotas hold under concurrency: bookings, launches and waitlist entries
// checked in the same transaction as the write.
func TestQuotasHoldUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 10, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	topUp(t, db, u, 1_000_000_00)
	quotas := gpuportal.Quotas{MaxRunningGPUs: 4, MaxBookedGPUHours: 40, MaxWaitlistEntries: 3}
	if _, err := db.UpdateAccount(ctx, admin, u.ID, store.AccountUpdate{Quotas: &quotas}); err != nil {
		t.Fatal(err)
	}
	start := storetest.Epoch.Truncate(time.Hour).Add(26 * time.Hour)
	count := func(n int, try func() error) (ok, over int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := try()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case gpuportal.ErrorCode(err) == gpuportal.EPOLICY && gpuportal.ErrorField(err) == "quota":
					over++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		return ok, over
	}
	// 8 GPU-hours each: 5 fit in 40.
	if ok, over := count(20, func() error {
		_, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour)})
		return err
	}); ok != 5 || over != 15 {
		t.Fatalf("bookings: %d booked, %d over quota", ok, over)
	}
	if ok, over := count(10, func() error {
		_, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x"})
		return err
	}); ok != 4 || over != 6 {
		t.Fatalf("launches: %d launched, %d over quota", ok, over)
	}
	if ok, over := count(6, func() error {
		_, err := db.JoinWaitlist(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start.Add(48 * time.Hour), End: start.Add(52 * time.Hour)}, false)
		return err
	}); ok != 3 || over != 3 {
		t.Fatalf("waitlist: %d joined, %d over quota", ok, over)
	}
}

// A disabled account cannot sign in or use its tokens, and its running
// instances get the stop notice; an admin can enable it again. Audited.
func TestDisabledAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	boss := storetest.MustCreateUser(t, db, "boss@example.com", gpuportal.RoleAdmin)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	_, token, _ := db.CreateAPIToken(ctx, u.ID, "script")
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x"})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, storetest.Epoch)
	fakeAgent{t, db}.runAll()
	yes, no := true, false
	if _, err := db.UpdateAccount(ctx, u, u.ID, store.AccountUpdate{Disabled: &yes}); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Fatalf("a customer disables: %v", err)
	}
	if _, err := db.UpdateAccount(ctx, boss, boss.ID, store.AccountUpdate{Disabled: &yes}); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
		t.Fatalf("an admin disables themselves: %v", err)
	}
	acct, err := db.UpdateAccount(ctx, boss, u.ID, store.AccountUpdate{Disabled: &yes})
	if err != nil || !acct.User.Disabled {
		t.Fatalf("disable: %+v, %v", acct, err)
	}
	if _, err := db.Authenticate(ctx, "u@example.com", storetest.Password); err != store.ErrDisabled {
		t.Fatalf("a disabled account signs in: %v", err)
	}
	if _, err := db.UserByAPIToken(ctx, token); gpuportal.ErrorCode(err) != gpuportal.EUNAUTHORIZED {
		t.Fatalf("a disabled account's token: %v", err)
	}
	if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceInterrupting || got.Interruption.Reason != gpuportal.ReasonAccountDisabled {
		t.Fatalf("its instance: %+v", got)
	}
	if _, err := db.UpdateAccount(ctx, boss, u.ID, store.AccountUpdate{Disabled: &no}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Authenticate(ctx, "u@example.com", storetest.Password); err != nil {
		t.Fatalf("enabled again: %v", err)
	}
	entries, _ := db.Audit(ctx, store.AuditFilter{Action: "account.update", Actor: "boss@example.com", Limit: 10})
	if n := len(entries); n != 2 {
		t.Fatalf("%d account.update audit entries by the admin", n)
	}
}

// A confirmed reservation always gets all its GPUs: on-demand GPUs count
// as taken in every hour ahead, and an on-demand launch that would take
// booked GPUs is refused, naming the first hour it would collide with.
func TestOnDemandAndBookingsShareCapacity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	start := storetest.Epoch.Truncate(time.Hour).Add(26 * time.Hour)
	slots, _ := db.Availability(ctx, "a100-80g", "cd-1", start, start.Add(time.Hour))
	bookable := slots[0].Capacity
	od, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 3, Command: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, storetest.Epoch)
	agent.runAll()
	if slots, _ := db.Availability(ctx, "a100-80g", "cd-1", start, start.Add(time.Hour)); slots[0].Capacity != bookable-3 {
		t.Fatalf("capacity beside 3 on-demand GPUs: %d of %d", slots[0].Capacity, bookable)
	}
	req := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: bookable - 3, Start: start, End: start.Add(4 * time.Hour)}
	if _, err := db.Book(ctx, u, req); err != nil {
		t.Fatal(err)
	}
	req.Count = 1
	if _, err := db.Book(ctx, u, req); gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		t.Fatalf("a booking into the on-demand GPUs: %v", err)
	}
	_, err = db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "serve"})
	if gpuportal.ErrorCode(err) != gpuportal.ECAPACITY || !strings.Contains(gpuportal.ErrorMessage(err), start.In(storetest.Shanghai).Format("2006-01-02 15:04")) {
		t.Fatalf("an on-demand launch into booked hours: %v", err)
	}
	// Stopped, its GPUs go back to the book.
	stopped, _ := db.Stop(ctx, u, od.ID)
	agent.exit(getInstance(t, db, stopped.ID))
	if _, err := db.Book(ctx, u, req); err != nil {
		t.Fatalf("booking after the on-demand instance stopped: %v", err)
	}
	// Through a day of churn, every active reservation holds all its GPUs.
	rng := rand.New(rand.NewPCG(3, 5))
	at := storetest.Epoch
	var live []*gpuportal.Instance
	for step := range 200 {
		switch rng.IntN(4) {
		case 0:
			s := at.Truncate(time.Hour).Add(time.Duration(2+rng.IntN(20)) * time.Hour)
			_, _ = db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1 + rng.IntN(4), Start: s, End: s.Add(4 * time.Hour)})
		case 1:
			kind := []gpuportal.InstanceKind{gpuportal.KindOnDemand, gpuportal.KindSpot}[rng.IntN(2)]
			if i, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: kind, Model: "a100-80g", Region: "cd-1", Count: 1 + rng.IntN(2), Command: "x"}); err == nil {
				live = append(live, i)
			}
		case 2:
			if len(live) > 0 {
				k := rng.IntN(len(live))
				if got, err := db.Stop(ctx, u, live[k].ID); err == nil && got.Node != "" {
					agent.exit(got)
				}
				live = slices.Delete(live, k, k+1)
			}
		case 3:
			at = at.Add(time.Duration(1+rng.IntN(60)) * time.Minute)
			tick(t, db, clock, at)
			agent.runAll()
			for _, i := range live {
				if got := getInstance(t, db, i.ID); got.Status == gpuportal.InstanceInterrupting {
					agent.exit(got)
				}
			}
			tick(t, db, clock, at)
		}
		active, _ := db.Reservations(ctx, u, store.ReservationFilter{Status: gpuportal.ReservationActive, Limit: 1000})
		for _, r := range active {
			if gpus, _ := db.ReservationGPUs(ctx, r.ID); len(gpus) != r.Count {
				t.Fatalf("step %d: reservation %d holds %d of its %d GPUs", step, r.ID, len(gpus), r.Count)
			}
		}
	}
}
