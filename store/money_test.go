package store_test

import (
	"context"
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

func topUp(t *testing.T, db *store.DB, u *gpuportal.User, amount gpuportal.Fen) {
	t.Helper()
	top, err := db.CreateTopUp(context.Background(), u, gpuportal.TopUpRequest{Amount: amount})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := db.ApplyPayment(context.Background(), gpuportal.TestPayProvider, gpuportal.PaymentEvent{PaymentID: fmt.Sprintf("pay-%d", top.ID), TopUpID: top.ID, Amount: amount, Status: "paid"}); err != nil || !ok {
		t.Fatalf("payment: %v, %v", ok, err)
	}
}

func balanceOf(t *testing.T, db *store.DB, u *gpuportal.User) gpuportal.Balance {
	t.Helper()
	b, err := db.Balance(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkLedger: the cached balance is what the ledger adds up to.
func checkLedger(t *testing.T, db *store.DB, users ...*gpuportal.User) {
	t.Helper()
	for _, u := range users {
		sum, err := db.LedgerSum(context.Background(), u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b := balanceOf(t, db, u); b.Balance != sum {
			t.Fatalf("%s: balance %d, ledger %d", u.Email, b.Balance, sum)
		}
	}
}

// A booking beyond the available balance is insufficient_funds and
// changes nothing; with the money there it books and draws it down, and a
// cancellation's refund and fee move the balance exactly.
func TestBookingIsPaidFromTheBalance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Truncate(time.Hour).Add(26 * time.Hour)
	req := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 2, Start: start, End: start.Add(4 * time.Hour)} // 8 GPU-hours
	_, err := db.Book(ctx, u, req)
	if gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Fatalf("booking with no money: %v", err)
	}
	if list, _ := db.Reservations(ctx, u, store.ReservationFilter{Limit: 10}); len(list) != 0 {
		t.Fatalf("booked anyway: %+v", list)
	}
	if slots, _ := db.Availability(ctx, "a100-80g", "cd-1", start, start.Add(time.Hour)); slots[0].Reserved != 0 {
		t.Fatalf("capacity taken: %+v", slots[0])
	}
	q, _ := db.Quote(ctx, req)
	topUp(t, db, u, q.Total-100)
	if _, err := db.Book(ctx, u, req); gpuportal.ErrorCode(err) != gpuportal.EFUNDS || !strings.Contains(gpuportal.ErrorMessage(err), "top up ¥1.00") {
		t.Fatalf("one yuan short: %v", err)
	}
	topUp(t, db, u, 100)
	r, err := db.Book(ctx, u, req)
	if err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, db, u); b.Balance != 0 || b.Available != 0 {
		t.Fatalf("after paying: %+v", b)
	}
	clock.Set(start.Add(-5 * time.Hour)) // 50 % fee
	c, err := db.Cancel(ctx, u, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b := balanceOf(t, db, u); b.Balance != *c.Refund || *c.Refund+*c.Fee != q.Total {
		t.Fatalf("after the refund: balance %d, refund %d, fee %d", b.Balance, *c.Refund, *c.Fee)
	}
	checkLedger(t, db, u)
}

// 64 bookings at once by a user whose balance covers 10 of them book
// exactly 10.
func TestConcurrentBookingsCannotOverspend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 100, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Truncate(time.Hour).Add(26 * time.Hour)
	req := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)}
	q, _ := db.Quote(ctx, req)
	topUp(t, db, u, q.Total*10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	booked, refused := 0, 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := db.Book(ctx, u, req)
			mu.Lock()
			defer mu.Unlock()
			switch gpuportal.ErrorCode(err) {
			case "":
				booked++
			case gpuportal.EFUNDS:
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if booked != 10 || refused != 54 {
		t.Fatalf("booked %d, refused %d", booked, refused)
	}
	if b := balanceOf(t, db, u); b.Balance != 0 {
		t.Fatalf("balance %d", b.Balance)
	}
	checkLedger(t, db, u)
}

// The provider's webhook credits a top-up once per payment id, whatever
// comes twice or late; a payment that does not match is refused.
func TestTopUpsCreditOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreatePoorUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	top, err := db.CreateTopUp(ctx, u, gpuportal.TopUpRequest{Amount: 50000})
	if err != nil || top.Status != gpuportal.TopUpPending {
		t.Fatalf("top-up %+v, %v", top, err)
	}
	if _, err := db.TopUp(ctx, other, top.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("another user reads it: %v", err)
	}
	paid := gpuportal.PaymentEvent{PaymentID: "pay-1", TopUpID: top.ID, Amount: 50000, Status: "paid"}
	for k := range 3 {
		ok, err := db.ApplyPayment(ctx, gpuportal.TestPayProvider, paid)
		if err != nil || ok != (k == 0) {
			t.Fatalf("delivery %d: credited %v, %v", k+1, ok, err)
		}
	}
	if b := balanceOf(t, db, u); b.Balance != 50000 {
		t.Fatalf("balance %d after three deliveries", b.Balance)
	}
	// A second payment for a paid top-up, or a wrong amount: a person looks.
	if _, err := db.ApplyPayment(ctx, gpuportal.TestPayProvider, gpuportal.PaymentEvent{PaymentID: "pay-2", TopUpID: top.ID, Amount: 50000, Status: "paid"}); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("second payment: %v", err)
	}
	late, _ := db.CreateTopUp(ctx, u, gpuportal.TopUpRequest{Amount: 20000})
	if _, err := db.ApplyPayment(ctx, gpuportal.TestPayProvider, gpuportal.PaymentEvent{PaymentID: "pay-3", TopUpID: late.ID, Amount: 1, Status: "paid"}); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("wrong amount: %v", err)
	}
	// It expires; the payment still arrives afterwards and is credited.
	clock.Set(storetest.Epoch.Add(gpuportal.TopUpValidFor + time.Minute))
	tick(t, db, clock, clock.Now())
	if got, _ := db.TopUp(ctx, u, late.ID); got.Status != gpuportal.TopUpExpired {
		t.Fatalf("not expired: %+v", got)
	}
	if ok, err := db.ApplyPayment(ctx, gpuportal.TestPayProvider, gpuportal.PaymentEvent{PaymentID: "pay-3", TopUpID: late.ID, Amount: 20000, Status: "paid"}); err != nil || !ok {
		t.Fatalf("late payment: %v, %v", ok, err)
	}
	if b := balanceOf(t, db, u); b.Balance != 70000 {
		t.Fatalf("balance %d", b.Balance)
	}
	for _, bad := range []gpuportal.PaymentEvent{{TopUpID: top.ID, Amount: 1, Status: "paid"}, {PaymentID: "x", TopUpID: top.ID, Amount: 1, Status: "refunded"}, {PaymentID: "y", Amount: 1, Status: "paid"}} {
		if _, err := db.ApplyPayment(ctx, gpuportal.TestPayProvider, bad); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := db.Credit(ctx, u, other.ID, gpuportal.CreditRequest{Amount: 100, Note: "gift"}); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Fatalf("a customer credits: %v", err)
	}
	checkLedger(t, db, u, other)
}

// A launch needs an hour of its price available; running instances hold
// what they cost so far; a user about to run out is told once, at zero
// their instances get the stop notice (reason balance), and a top-up
// within the notice calls the stop off.
func TestRunningOutOfBalance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	launch := gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 2, Command: "train"}
	if _, err := db.Launch(ctx, u, launch); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Fatalf("launch with no money: %v", err)
	}
	topUp(t, db, u, 600) // ¥6: a little over an hour of 2 × ¥2.40
	inst, err := db.Launch(ctx, u, launch)
	if err != nil {
		t.Fatal(err)
	}
	at := storetest.Epoch
	tick(t, db, clock, at)
	agent.runAll()
	b := balanceOf(t, db, u)
	if b.BurnPerHour != 480 || b.RunsOutAt == nil || !b.RunsOutAt.Equal(at.Add(75*time.Minute)) {
		t.Fatalf("balance while running: %+v", b)
	}
	// 50 minutes in: ¥4.00 held, 25 minutes left: told once.
	for _, m := range []int{50, 51} {
		tick(t, db, clock, at.Add(time.Duration(m)*time.Minute))
	}
	notes, _ := db.InApp(ctx, u.ID, 20)
	low := 0
	for _, n := range notes {
		if n.Kind == gpuportal.NoteBalanceLow {
			low++
		}
	}
	if low != 1 {
		t.Fatalf("%d low-balance notices", low)
	}
	// 75 minutes in: nothing left; the stop notice.
	tick(t, db, clock, at.Add(75*time.Minute))
	got := getInstance(t, db, inst.ID)
	if got.Status != gpuportal.InstanceInterrupting || got.Interruption.Reason != gpuportal.ReasonBalance {
		t.Fatalf("at zero: %+v", got)
	}
	d, _ := db.DesiredFor(ctx, got.Node)
	if d.Workloads[0].Interrupt == nil || d.Workloads[0].Interrupt.Action != "stop" {
		t.Fatalf("the agent is told %+v", d.Workloads[0].Interrupt)
	}
	// A top-up within the notice calls the stop off.
	topUp(t, db, u, 10000)
	tick(t, db, clock, at.Add(75*time.Minute))
	if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceRunning || got.Interruption != nil {
		t.Fatalf("after the top-up: %+v", got)
	}
	if d, _ := db.DesiredFor(ctx, got.Node); d.Workloads[0].Interrupt != nil {
		t.Fatal("the agent still has the notice")
	}
	// Reservations are never touched: only the instance is billed.
	stopped, _ := db.Stop(ctx, u, inst.ID)
	agent.exit(getInstance(t, db, stopped.ID))
	checkLedger(t, db, u)
}

// A balance stop gives each instance the notice it would get from the
// book: the one its launch asked for, else the policy's.
func TestBalanceStopHonoursTheAskedNotice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreatePoorUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}
	topUp(t, db, u, 600) // a little over an hour of 2 × ¥2.40
	asked := 300
	long, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "train", NoticeSeconds: &asked})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "train"})
	if err != nil {
		t.Fatal(err)
	}
	at := storetest.Epoch
	tick(t, db, clock, at)
	agent.runAll()
	tick(t, db, clock, at.Add(75*time.Minute))
	for _, c := range []struct {
		id     int64
		notice time.Duration
	}{{long.ID, 300 * time.Second}, {plain.ID, time.Duration(gpuportal.DefaultPolicy().SpotNoticeSeconds) * time.Second}} {
		got := getInstance(t, db, c.id)
		if got.Interruption == nil || got.Interruption.Reason != gpuportal.ReasonBalance {
			t.Fatalf("instance %d at zero: %+v", c.id, got)
		}
		if n := got.Interruption.Deadline.Sub(got.Interruption.NoticeAt); n != c.notice {
			t.Errorf("instance %d: a notice of %s, want %s", c.id, n, c.notice)
		}
	}
}

// Whatever happens, in whatever order, the balance is the ledger's sum.
func TestBalanceIsTheLedgerSum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 4, 8)
	rng := rand.New(rand.NewPCG(7, 11))
	var users []*gpuportal.User
	for k := range 3 {
		users = append(users, storetest.MustCreatePoorUser(t, db, fmt.Sprintf("u%d@example.com", k), gpuportal.RoleCustomer))
	}
	agent := fakeAgent{t, db}
	at := storetest.Epoch
	var reservations []*gpuportal.Reservation
	var instances []*gpuportal.Instance
	for step := range 300 {
		u := users[rng.IntN(len(users))]
		switch rng.IntN(6) {
		case 0:
			topUp(t, db, u, gpuportal.Fen(100+rng.IntN(100000)))
		case 1:
			start := at.Truncate(time.Hour).Add(time.Duration(2+rng.IntN(72)) * time.Hour)
			r, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1 + rng.IntN(4), Start: start, End: start.Add(time.Duration(4+rng.IntN(8)) * time.Hour)})
			if err == nil {
				reservations = append(reservations, r)
			} else if c := gpuportal.ErrorCode(err); c != gpuportal.EFUNDS && c != gpuportal.ECAPACITY && c != gpuportal.EPOLICY {
				t.Fatalf("step %d: book: %v", step, err)
			}
		case 2:
			if len(reservations) > 0 {
				r := reservations[rng.IntN(len(reservations))]
				owner := &gpuportal.User{ID: r.UserID, Role: gpuportal.RoleCustomer}
				if _, err := db.Cancel(ctx, owner, r.ID); err != nil && gpuportal.ErrorCode(err) == "" {
					t.Fatalf("step %d: cancel: %v", step, err)
				}
			}
		case 3:
			i, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: []gpuportal.InstanceKind{gpuportal.KindSpot, gpuportal.KindOnDemand}[rng.IntN(2)], Model: "a100-80g", Region: "cd-1", Count: 1 + rng.IntN(2), Command: "x"})
			if err == nil {
				instances = append(instances, i)
			} else if c := gpuportal.ErrorCode(err); c != gpuportal.EFUNDS && c != gpuportal.ECAPACITY {
				t.Fatalf("step %d: launch: %v", step, err)
			}
		case 4:
			if len(instances) > 0 {
				i := instances[rng.IntN(len(instances))]
				if got, err := db.Stop(ctx, &gpuportal.User{ID: i.UserID, Role: gpuportal.RoleCustomer}, i.ID); err == nil && got.Node != "" && got.Status != gpuportal.InstanceStopped {
					agent.exit(got)
				}
			}
		case 5:
			at = at.Add(time.Duration(1+rng.IntN(90)) * time.Minute)
			tick(t, db, clock, at)
			agent.runAll()
			// What ran out gets its stop; the agent carries it out.
			for _, i := range instances {
				if got := getInstance(t, db, i.ID); got.Status == gpuportal.InstanceInterrupting {
					agent.exit(got)
				}
			}
		}
		checkLedger(t, db, users...)
	}
}

// Writes that arrive together commit together, each all or nothing: a
// booking that fails after it took capacity and stored its reservation
// (its owner cannot pay) leaves nothing behind, while the others are all
// there; and the database syncs every commit to disk.
func TestGroupCommitKeepsEachWriteWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	if db.Dialect() != "sqlite" {
		t.Skip("group commit is SQLite's")
	}
	if mode, err := db.SynchronousMode(ctx); err != nil || mode != 2 {
		t.Fatalf("synchronous = %d, %v; want 2 (FULL)", mode, err)
	}
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 10, 8)
	start := storetest.Epoch.Truncate(time.Hour).Add(26 * time.Hour)
	req := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)}
	q, _ := db.Quote(ctx, req)
	users := make([]*gpuportal.User, 40)
	for k := range users {
		users[k] = storetest.MustCreatePoorUser(t, db, fmt.Sprintf("u%d@example.com", k), gpuportal.RoleCustomer)
		if k%2 == 0 {
			topUp(t, db, users[k], q.Total)
		}
	}
	var wg sync.WaitGroup
	for k, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := db.Book(ctx, u, req)
			if (k%2 == 0) != (err == nil) || (err != nil && gpuportal.ErrorCode(err) != gpuportal.EFUNDS) {
				t.Errorf("user %d: %v", k, err)
			}
		}()
	}
	wg.Wait()
	for k, u := range users {
		list, _ := db.Reservations(ctx, u, store.ReservationFilter{Limit: 10})
		if want := 1 - k%2; len(list) != want {
			t.Errorf("user %d has %d reservations, want %d", k, len(list), want)
		}
	}
	if slots, _ := db.Availability(ctx, "a100-80g", "cd-1", start, start.Add(time.Hour)); slots[0].Reserved != 20 {
		t.Fatalf("%d GPUs reserved; want the 20 paid ones", slots[0].Reserved)
	}
	checkLedger(t, db, users...)
}

// An auto-book its owner cannot pay when capacity frees is skipped, they
// are told once, and it books at the next tick after a top-up; a job
// whose owner has run out starts no more tasks.
func TestUnpaidAutoBookAndJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	rich := storetest.MustCreateUser(t, db, "rich@example.com", gpuportal.RoleCustomer)
	poor := storetest.MustCreatePoorUser(t, db, "poor@example.com", gpuportal.RoleCustomer)
	start := storetest.Epoch.Truncate(time.Hour).Add(26 * time.Hour)
	window := gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start, End: start.Add(4 * time.Hour)}
	q0, err := db.Quote(ctx, window)
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Book(ctx, rich, window)
	if err != nil {
		t.Fatal(err)
	}
	// (issue 22, item 9) Joining needs the money for the window now; the
	// poor customer had it, then spent it.
	if _, err := db.JoinWaitlist(ctx, poor, window, true); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Fatalf("join from ¥0: %v", err)
	}
	topUp(t, db, poor, q0.Total)
	if _, err := db.JoinWaitlist(ctx, poor, window, true); err != nil {
		t.Fatal(err)
	}
	later := window
	later.Start, later.End = window.Start.AddDate(0, 0, 7), window.End.AddDate(0, 0, 7) // the same price a week on
	if _, err := db.Book(ctx, poor, later); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Cancel(ctx, rich, r.ID); err != nil {
		t.Fatal(err)
	}
	at := storetest.Epoch
	for range 2 {
		at = at.Add(time.Minute)
		tick(t, db, clock, at)
	}
	notes, _ := db.InApp(ctx, poor.ID, 10)
	unpaid := 0
	for _, n := range notes {
		if n.Kind == gpuportal.NoteAutoBookUnpaid {
			unpaid++
		}
	}
	if unpaid != 1 {
		t.Fatalf("%d unpaid notices: %+v", unpaid, notes)
	}
	if list, _ := db.Reservations(ctx, poor, store.ReservationFilter{Limit: 10}); len(list) != 1 { // the week after's
		t.Fatalf("booked without money: %+v", list)
	}
	q, _ := db.Quote(ctx, window)
	topUp(t, db, poor, q.Total)
	tick(t, db, clock, at.Add(time.Minute))
	if list, _ := db.Reservations(ctx, poor, store.ReservationFilter{Limit: 10}); len(list) != 2 {
		t.Fatalf("not booked after the top-up: %+v", list)
	}
	// The money is spent: a job needs its first task-hour to be queued
	// (issue 22, item 5), and once that is spent it starts no more tasks.
	job := gpuportal.JobRequest{Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 3, Command: "x", MaxParallel: 3}
	if _, err := db.CreateJob(ctx, poor, job); gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Fatalf("a job from ¥0: %v", err)
	}
	topUp(t, db, poor, 240) // one task-hour
	if _, err := db.CreateJob(ctx, poor, job); err != nil {
		t.Fatal(err)
	}
	for k, want := range []int{1, 0} {
		if res := tick(t, db, clock, at.Add(time.Duration(2*60+k)*time.Second)); res.TasksStarted != want {
			t.Fatalf("tick %d started %d tasks on the money for one, want %d", k, res.TasksStarted, want)
		}
	}
	waiting := 0
	notes, _ = db.InApp(ctx, poor.ID, 20)
	for _, n := range notes {
		if n.Kind == gpuportal.NoteJobUnpaid {
			waiting++
		}
	}
	if waiting != 1 {
		t.Fatalf("%d job-waits-for-money notices; want one", waiting)
	}
	topUp(t, db, poor, 240*2) // two task-hours
	if res := tick(t, db, clock, at.Add(3*time.Minute)); res.TasksStarted != 2 {
		t.Fatalf("%d tasks started on money for two", res.TasksStarted)
	}
}
