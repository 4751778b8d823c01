package store_test

import (
	"context"
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
	if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceInterrupting || got.Interruption.Reason != gpuportal.ReasonAdmin {
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
