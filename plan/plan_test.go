package plan

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"gpuportal"
)

var (
	a100 = PoolKey{Model: "a100-80g", Region: "cd-1"}
	t0   = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC) // a Monday
)

// testPool is a detailed pool of nodes × perNode idle GPUs, named
// "<node>-<index>", with the default policies.
func testPool(perNode int, nodes ...string) *Pool {
	pl := &Pool{Key: a100, Model: gpuportal.Model{ID: a100.Model, ListPrice: 2000}, Policy: gpuportal.DefaultPolicies().Global,
		Booked: map[int64]int{}, Detail: DetailFull}
	for _, n := range nodes {
		for k := range perNode {
			pl.GPUs = append(pl.GPUs, GPU{UUID: fmt.Sprintf("%s-%d", n, k), Node: n})
		}
	}
	pl.Healthy = len(pl.GPUs)
	return pl
}

// runSpot puts a spot instance on the named GPUs.
func runSpot(pl *Pool, s Spot, gpus ...string) {
	s.Count = len(gpus)
	s.Node = gpus[0][:len(gpus[0])-2]
	for k := range pl.GPUs {
		for _, g := range gpus {
			if pl.GPUs[k].UUID == g {
				pl.GPUs[k].Holder = s.ID
			}
		}
	}
	pl.Spots = append(pl.Spots, s)
	pl.Spot += s.Count
	pl.Held += s.Count
	if s.JobTask {
		pl.JobTaskSpot += s.Count
	}
}

func snapshotOf(pools ...*Pool) Snapshot {
	s := Snapshot{Pools: map[PoolKey]*Pool{}, Owners: map[int64]Owner{}, JobGPUs: map[UserPool]int{}, FreeHours: map[PoolKey]map[int64]int{}}
	for _, pl := range pools {
		s.Pools[pl.Key] = pl
	}
	return s
}

func TestPackingPutsAReservationOnTheFewestNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pool  func() *Pool
		count int
		want  []string
	}{
		{"one node has room: the fullest one that fits", func() *Pool {
			pl := testPool(4, "n1", "n2")
			runSpot(pl, Spot{ID: 9, StartedAt: t0}, "n1-0") // n1 has 3 idle, n2 4
			return pl
		}, 3, []string{"n1-1", "n1-2", "n1-3"}},
		{"across nodes: whole nodes first", func() *Pool { return testPool(4, "n1", "n2", "n3") }, 8,
			[]string{"n1-0", "n1-1", "n1-2", "n1-3", "n2-0", "n2-1", "n2-2", "n2-3"}},
		{"not enough idle: takes spot GPUs", func() *Pool {
			pl := testPool(2, "n1")
			runSpot(pl, Spot{ID: 9, StartedAt: t0}, "n1-1")
			return pl
		}, 2, []string{"n1-0", "n1-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := tc.pool()
			s := snapshotOf(pl)
			s.Reservations = []Reservation{{ID: 1, Pool: a100, Count: tc.count, Start: t0, End: t0.Add(4 * time.Hour), Status: gpuportal.ReservationConfirmed}}
			got := Plan(s, t0)
			if len(got.Activate) != 1 || !reflect.DeepEqual(got.Activate[0].GPUs, tc.want) || got.Activate[0].Missing != 0 {
				t.Fatalf("activate = %+v, want GPUs %v", got.Activate, tc.want)
			}
		})
	}
}

func TestAReservationShortOfGPUsIsToldWhatIsMissing(t *testing.T) {
	pl := testPool(4, "n1")
	s := snapshotOf(pl)
	s.Reservations = []Reservation{{ID: 1, Pool: a100, Count: 6, Start: t0, End: t0.Add(4 * time.Hour), Status: gpuportal.ReservationConfirmed}}
	got := Plan(s, t0)
	if a := got.Activate[0]; len(a.GPUs) != 4 || a.Missing != 2 {
		t.Fatalf("activate = %+v, want 4 GPUs and 2 missing", a)
	}
}

// Which spot instances give their GPUs back: by work lost since their
// checkpoint reports (the default), against the old youngest-first rule
// where the two differ.
func TestVictimsLoseTheLeastWork(t *testing.T) {
	start := t0.Add(time.Hour)
	now := start.Add(-SpotHorizon(gpuportal.DefaultPolicy()))
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, tc := range []struct {
		name   string
		rule   string
		spots  []Spot // on n1-0.., in order, each Count GPUs
		counts []int
		need   int
		want   []int64
	}{
		{"youngest rule: one big instance rather than two small", gpuportal.VictimsYoungest,
			[]Spot{{ID: 1, StartedAt: ago(3 * time.Hour)}, {ID: 2, StartedAt: ago(2 * time.Hour)}, {ID: 3, StartedAt: ago(time.Hour)}},
			[]int{2, 1, 1}, 2, []int64{1}},
		{"work lost: the two small ones lose less than the big old one", gpuportal.VictimsByWorkLost,
			[]Spot{{ID: 1, StartedAt: ago(3 * time.Hour)}, {ID: 2, StartedAt: ago(2 * time.Hour)}, {ID: 3, StartedAt: ago(time.Hour)}},
			[]int{2, 1, 1}, 2, []int64{3, 2}},
		{"youngest rule: youngest first on ties", gpuportal.VictimsYoungest,
			[]Spot{{ID: 1, StartedAt: ago(3 * time.Hour)}, {ID: 2, StartedAt: ago(time.Hour)}, {ID: 3, StartedAt: ago(2 * time.Hour)}},
			[]int{1, 1, 1}, 1, []int64{2}},
		{"work lost: a checkpoint a moment ago makes the cheapest victim", "",
			[]Spot{{ID: 1, StartedAt: ago(5 * time.Hour), LastCheckpoint: ago(30 * time.Second)}, {ID: 2, StartedAt: ago(10 * time.Minute)}},
			[]int{2, 2}, 2, []int64{1}},
		{"youngest rule on the same: the young silent one, which loses more", gpuportal.VictimsYoungest,
			[]Spot{{ID: 1, StartedAt: ago(5 * time.Hour), LastCheckpoint: ago(30 * time.Second)}, {ID: 2, StartedAt: ago(10 * time.Minute)}},
			[]int{2, 2}, 2, []int64{2}},
		{"work lost: equal work goes to the youngest", "",
			[]Spot{{ID: 1, StartedAt: ago(2 * time.Hour), LastCheckpoint: ago(time.Hour)}, {ID: 2, StartedAt: ago(time.Hour)}},
			[]int{1, 1}, 1, []int64{2}},
		{"work lost: a cheap pair beats one instance that saved long ago", "",
			[]Spot{{ID: 1, StartedAt: ago(4 * time.Hour), LastCheckpoint: ago(2 * time.Hour)}, {ID: 2, StartedAt: ago(3 * time.Hour), LastCheckpoint: ago(time.Minute)},
				{ID: 3, StartedAt: ago(3 * time.Hour), LastCheckpoint: ago(2 * time.Minute)}},
			[]int{2, 1, 1}, 2, []int64{2, 3}},
		{"nothing needed, nobody interrupted", "", []Spot{{ID: 1, StartedAt: t0}}, []int{1}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := testPool(4, "n1")
			next := 0
			for k, s := range tc.spots {
				var gpus []string
				for range tc.counts[k] {
					gpus = append(gpus, fmt.Sprintf("n1-%d", next))
					next++
				}
				runSpot(pl, s, gpus...)
			}
			// A booking of the idle GPUs plus need, starting within the horizon.
			pl.Booked[start.Unix()] = 4 - next + tc.need
			snap := snapshotOf(pl)
			snap.VictimRule = tc.rule
			got := Plan(snap, now)
			var ids []int64
			for _, in := range got.Interrupt {
				ids = append(ids, in.InstanceID)
				if in.Reason != gpuportal.ReasonReservation || !in.Deadline.Equal(now.Add(120*time.Second)) || in.Grace != 30 {
					t.Errorf("interruption %+v: want reason reservation, deadline %s, grace 30", in, now.Add(120*time.Second))
				}
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Fatalf("victims = %v, want %v", ids, tc.want)
			}
		})
	}
}

// The notice goes out at the first tick within notice + grace + a minute
// of the start, so the GPUs are free at the start and the workload gets the
// whole notice.
func TestNoticeIsTimedForTheStart(t *testing.T) {
	start := t0.Add(time.Hour)
	for _, tc := range []struct {
		notice, grace int
		at            time.Time
		want          bool
	}{
		{120, 30, start.Add(-4 * time.Minute), false},
		{120, 30, start.Add(-210 * time.Second), true},
		{120, 30, start.Add(-3 * time.Minute), true},
		{600, 300, start.Add(-17 * time.Minute), false},
		{600, 300, start.Add(-16 * time.Minute), true},
	} {
		t.Run(fmt.Sprintf("notice %ds grace %ds at %s", tc.notice, tc.grace, tc.at.Format("15:04:05")), func(t *testing.T) {
			pl := testPool(1, "n1")
			pl.Policy.SpotNoticeSeconds, pl.Policy.SpotGraceSeconds = tc.notice, tc.grace
			runSpot(pl, Spot{ID: 7, StartedAt: t0}, "n1-0")
			pl.Booked[start.Unix()] = 1
			got := Plan(snapshotOf(pl), tc.at)
			if (len(got.Interrupt) == 1) != tc.want {
				t.Fatalf("interruptions = %+v, want one: %v", got.Interrupt, tc.want)
			}
			if tc.want {
				free := got.Interrupt[0].Deadline.Add(time.Duration(tc.grace) * time.Second)
				if free.After(start) {
					t.Fatalf("GPUs free at %s, after the start %s", free, start)
				}
			}
		})
	}
}

func TestOnDemandWaitingTakesSpotGPUs(t *testing.T) {
	pl := testPool(2, "n1")
	runSpot(pl, Spot{ID: 1, StartedAt: t0}, "n1-0", "n1-1")
	pl.OnDemandWait = 2
	s := snapshotOf(pl)
	s.Pending = []PendingInstance{{ID: 5, Kind: gpuportal.KindOnDemand, Pool: a100, Count: 2}}
	got := Plan(s, t0)
	if len(got.Interrupt) != 1 || got.Interrupt[0].Reason != gpuportal.ReasonOnDemand {
		t.Fatalf("interrupt = %+v, want spot 1 for on-demand", got.Interrupt)
	}
	if len(got.Place) != 0 {
		t.Fatalf("placed %+v while the spot instance still holds the GPUs", got.Place)
	}
}

func TestPlacement(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pool    func() *Pool
		pending PendingInstance
		want    *Placement
	}{
		{"spot avoids the node it was interrupted on", func() *Pool { return testPool(2, "n1", "n2") },
			PendingInstance{ID: 5, Kind: gpuportal.KindSpot, Count: 2, LastNode: "n1", Restarts: 1},
			&Placement{InstanceID: 5, Node: "n2", GPUs: []string{"n2-0", "n2-1"}, Restarted: true}},
		{"spot goes back to its node when nothing else fits", func() *Pool {
			pl := testPool(2, "n1", "n2")
			runSpot(pl, Spot{ID: 1, StartedAt: t0}, "n2-0")
			return pl
		}, PendingInstance{ID: 5, Kind: gpuportal.KindSpot, Count: 2, LastNode: "n1"},
			&Placement{InstanceID: 5, Node: "n1", GPUs: []string{"n1-0", "n1-1"}}},
		{"spot does not take GPUs booked within the horizon", func() *Pool {
			pl := testPool(2, "n1")
			pl.Booked[t0.Unix()] = 1
			return pl
		}, PendingInstance{ID: 5, Kind: gpuportal.KindSpot, Count: 2}, nil},
		{"on-demand leaves what the next day's bookings need", func() *Pool {
			pl := testPool(4, "n1")
			pl.Booked[t0.Add(20*time.Hour).Unix()] = 3
			return pl
		}, PendingInstance{ID: 5, Kind: gpuportal.KindOnDemand, Count: 2}, nil},
		{"reserved runs on its reservation's GPUs only", func() *Pool {
			pl := testPool(2, "n1", "n2")
			pl.GPUs[2].Reservation, pl.GPUs[3].Reservation = 3, 3
			return pl
		}, PendingInstance{ID: 5, Kind: gpuportal.KindReserved, Count: 2, ReservationID: 3},
			&Placement{InstanceID: 5, Node: "n2", GPUs: []string{"n2-0", "n2-1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := tc.pool()
			tc.pending.Pool = a100
			switch tc.pending.Kind {
			case gpuportal.KindSpot:
				pl.SpotWait = tc.pending.Count
			case gpuportal.KindOnDemand:
				pl.OnDemandWait = tc.pending.Count // counted since its launch, as the store loads it
			}
			s := snapshotOf(pl)
			s.Pending = []PendingInstance{tc.pending}
			got := Plan(s, t0)
			switch {
			case tc.want == nil && len(got.Place) != 0:
				t.Fatalf("placed %+v, want nothing", got.Place)
			case tc.want != nil && (len(got.Place) != 1 || !reflect.DeepEqual(got.Place[0], *tc.want)):
				t.Fatalf("placed %+v, want %+v", got.Place, *tc.want)
			}
		})
	}
}

// Between jobs, the next GPU goes to the owner with the fewest job GPUs in
// the pool; a waiting spot launch comes before job tasks and takes GPUs
// from them.
func TestPlacementFairness(t *testing.T) {
	t.Run("fewest job GPUs first", func(t *testing.T) {
		pl := testPool(2, "n1")
		s := snapshotOf(pl)
		s.Jobs = []JobQueue{
			{ID: 1, UserID: 10, Pool: a100, Kind: gpuportal.JobSpot, GPUsPerTask: 1, MaxParallel: 10, Queued: []QueuedTask{{Index: 0}, {Index: 1}}},
			{ID: 2, UserID: 20, Pool: a100, Kind: gpuportal.JobSpot, GPUsPerTask: 1, MaxParallel: 10, Queued: []QueuedTask{{Index: 0}, {Index: 1}}},
		}
		s.JobGPUs[UserPool{10, a100}] = 4 // user 10 already runs tasks elsewhere in the pool
		s.Owners[10] = Owner{Available: 1e9, GPURoom: 100}
		s.Owners[20] = Owner{Available: 1e9, GPURoom: 100}
		got := Plan(s, t0)
		if len(got.Tasks) != 2 || got.Tasks[0].JobID != 2 || got.Tasks[1].JobID != 2 {
			t.Fatalf("tasks = %+v, want both GPUs for job 2", got.Tasks)
		}
		if got.Tasks[0].Price != 600 {
			t.Fatalf("task price = %d, want the spot price 600", got.Tasks[0].Price)
		}
	})
	t.Run("a spot launch takes GPUs from job tasks", func(t *testing.T) {
		pl := testPool(2, "n1")
		runSpot(pl, Spot{ID: 1, StartedAt: t0.Add(-time.Hour), JobTask: true}, "n1-0")
		runSpot(pl, Spot{ID: 2, StartedAt: t0.Add(-2 * time.Hour)}, "n1-1")
		pl.SpotWait = 1
		s := snapshotOf(pl)
		s.Pending = []PendingInstance{{ID: 5, Kind: gpuportal.KindSpot, Pool: a100, Count: 1}}
		got := Plan(s, t0)
		if len(got.Interrupt) != 1 || got.Interrupt[0].InstanceID != 1 || got.Interrupt[0].Reason != gpuportal.ReasonFairShare {
			t.Fatalf("interrupt = %+v, want the job task 1 (fair share)", got.Interrupt)
		}
	})
	t.Run("an owner who cannot pay starts nothing and is told once", func(t *testing.T) {
		pl := testPool(2, "n1")
		s := snapshotOf(pl)
		s.Jobs = []JobQueue{{ID: 1, UserID: 10, Pool: a100, Kind: gpuportal.JobSpot, GPUsPerTask: 1, MaxParallel: 10, Queued: []QueuedTask{{Index: 0}}}}
		s.Owners[10] = Owner{Available: 599, GPURoom: 100}
		got := Plan(s, t0)
		if len(got.Tasks) != 0 || !reflect.DeepEqual(got.UnpaidJobs, []int64{1}) {
			t.Fatalf("tasks %+v unpaid %v, want none and job 1", got.Tasks, got.UnpaidJobs)
		}
		s.Jobs[0].UnpaidNoted = true
		if got := Plan(s, t0); len(got.UnpaidJobs) != 0 {
			t.Fatalf("told again: %v", got.UnpaidJobs)
		}
	})
	t.Run("hybrid runs its on-demand workers first", func(t *testing.T) {
		pl := testPool(4, "n1")
		s := snapshotOf(pl)
		s.Jobs = []JobQueue{{ID: 1, UserID: 10, Pool: a100, Kind: gpuportal.JobHybrid, OnDemandWorkers: 1, GPUsPerTask: 1, MaxParallel: 3,
			Queued: []QueuedTask{{Index: 0}, {Index: 1}, {Index: 2}, {Index: 3}}}}
		s.Owners[10] = Owner{Available: 1e9, GPURoom: 100}
		got := Plan(s, t0)
		var kinds []gpuportal.InstanceKind
		for _, task := range got.Tasks {
			kinds = append(kinds, task.Kind)
		}
		if want := []gpuportal.InstanceKind{gpuportal.KindOnDemand, gpuportal.KindSpot, gpuportal.KindSpot}; !reflect.DeepEqual(kinds, want) {
			t.Fatalf("kinds = %v, want %v (max_parallel 3)", kinds, want)
		}
	})
	// (issue 22, item 3) On-demand runs until stopped: a hybrid job's
	// on-demand worker and a pending on-demand launch leave every booked
	// hour ahead, not only the next day's — a booking three days out of
	// all but one GPU leaves room for one on-demand GPU, no more.
	t.Run("on-demand starts leave the whole book ahead", func(t *testing.T) {
		for _, tc := range []struct {
			name           string
			reservedAhead  int
			wantOnDemand   int // hybrid workers started on-demand
			pendingPlaced  bool
			pendingOnDemnd int
		}{
			{"nothing booked", 0, 2, true, 1},
			{"3 of 4 booked in three days", 3, 0, true, 1},
			{"all 4 booked in three days", 4, 0, false, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				pl := testPool(4, "n1")
				pl.ReservedAhead = tc.reservedAhead // beyond Booked's next day
				pl.OnDemandWait = tc.pendingOnDemnd
				s := snapshotOf(pl)
				s.Pending = []PendingInstance{{ID: 7, UserID: 11, Pool: a100, Kind: gpuportal.KindOnDemand, Count: 1}}
				s.Jobs = []JobQueue{{ID: 1, UserID: 10, Pool: a100, Kind: gpuportal.JobHybrid, OnDemandWorkers: 2, GPUsPerTask: 1, MaxParallel: 2,
					Queued: []QueuedTask{{Index: 0}, {Index: 1}}}}
				s.Owners[10] = Owner{Available: 1e9, GPURoom: 100}
				s.Owners[11] = Owner{Available: 1e9, GPURoom: 100}
				got := Plan(s, t0)
				if placed := len(got.Place) == 1; placed != tc.pendingPlaced {
					t.Fatalf("pending on-demand launch placed = %v, want %v", placed, tc.pendingPlaced)
				}
				onDemand := 0
				for _, task := range got.Tasks {
					if task.Kind == gpuportal.KindOnDemand {
						onDemand++
					}
				}
				if onDemand != tc.wantOnDemand {
					t.Fatalf("%d hybrid workers on-demand, want %d (tasks %+v)", onDemand, tc.wantOnDemand, got.Tasks)
				}
			})
		}
	})
}

func TestWaitlistOffersFirstFit(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	pl := testPool(4, "n1")
	s := snapshotOf(pl)
	free := map[int64]int{}
	for k := 1; k < 10; k++ {
		free[h(k).Unix()] = 3
	}
	s.FreeHours[a100] = free
	s.Waitlist = []WaitEntry{
		{ID: 1, Pool: a100, Count: 4, Start: h(2), End: h(6), Status: gpuportal.WaitWaiting},                   // too big
		{ID: 2, Pool: a100, Count: 2, Start: h(2), End: h(6), Status: gpuportal.WaitWaiting},                   // fits
		{ID: 3, Pool: a100, Count: 2, Start: h(4), End: h(8), Status: gpuportal.WaitWaiting},                   // 1 left in 4–6
		{ID: 4, Pool: a100, Count: 1, Start: h(4), End: h(8), Status: gpuportal.WaitWaiting, AutoBook: true},   // fits, booked
		{ID: 5, Pool: a100, Count: 1, Start: t0, End: h(4), Status: gpuportal.WaitWaiting},                     // its window started
		{ID: 6, Pool: a100, Count: 1, Start: h(8), End: h(9), Status: gpuportal.WaitOffered, OfferExpires: t0}, // lapsed
		{ID: 7, Pool: a100, Count: 4, Start: h(8), End: h(9), Status: gpuportal.WaitWaiting},                   // fits with 6's GPU back
		{ID: 8, Pool: a100, Count: 1, Start: h(1), End: h(2), Status: gpuportal.WaitWaiting},                   // starts in 15 min: the offer ends at the start
	}
	got := Plan(s, t0.Add(45*time.Minute))
	want := []WaitlistAction{
		{EntryID: 5, Action: WaitlistExpireEntry},
		{EntryID: 6, Action: WaitlistExpireOffer},
		{EntryID: 2, Action: WaitlistOffer, Expires: t0.Add(75 * time.Minute)},
		{EntryID: 4, Action: WaitlistBook},
		{EntryID: 7, Action: WaitlistOffer, Expires: t0.Add(75 * time.Minute)},
		{EntryID: 8, Action: WaitlistOffer, Expires: h(1)},
	}
	if !reflect.DeepEqual(got.Waitlist, want) {
		t.Fatalf("waitlist =\n%+v\nwant\n%+v", got.Waitlist, want)
	}
}

func TestRemindersAndReservationEnds(t *testing.T) {
	s := snapshotOf(testPool(8, "n1"))
	s.Reservations = []Reservation{
		{ID: 1, Pool: a100, Count: 1, Start: t0.Add(-4 * time.Hour), End: t0, Status: gpuportal.ReservationActive},                  // ends now
		{ID: 2, Pool: a100, Count: 1, Start: t0.Add(time.Hour), End: t0.Add(5 * time.Hour), Status: gpuportal.ReservationConfirmed}, // starts in 1 h
		{ID: 3, Pool: a100, Count: 1, Start: t0.Add(61 * time.Minute), End: t0.Add(5 * time.Hour), Status: gpuportal.ReservationConfirmed},
		{ID: 4, Pool: a100, Count: 1, Start: t0.Add(-3 * time.Hour), End: t0.Add(40 * time.Minute), Status: gpuportal.ReservationActive},
		{ID: 5, Pool: a100, Count: 1, Start: t0.Add(-3 * time.Hour), End: t0.Add(30 * time.Minute), Status: gpuportal.ReservationActive, RemindedEnd: true},
	}
	got := Plan(s, t0)
	if !reflect.DeepEqual(got.Complete, []int64{1}) {
		t.Errorf("complete = %v, want [1]", got.Complete)
	}
	want := []Reminder{{2, gpuportal.NoteReservationStarts}, {4, gpuportal.NoteReservationEnds}}
	if !reflect.DeepEqual(got.Reminders, want) {
		t.Errorf("reminders = %v, want %v", got.Reminders, want)
	}
}

func TestBalanceRule(t *testing.T) {
	runsOut := func(in time.Duration) *time.Time { at := t0.Add(in); return &at }
	for _, tc := range []struct {
		name string
		acc  Account
		want []BalanceVerb
	}{
		{"at zero: stopped", Account{Balance: gpuportal.Balance{Available: 0}, Stoppable: 2}, []BalanceVerb{BalanceStop}},
		{"at zero, nothing left to stop", Account{Balance: gpuportal.Balance{Available: -5}}, nil},
		{"runs out soon: warned", Account{Balance: gpuportal.Balance{Available: 100, RunsOutAt: runsOut(20 * time.Minute)}, Stoppable: 1},
			[]BalanceVerb{BalanceWarn}},
		{"already warned", Account{Balance: gpuportal.Balance{Available: 100, RunsOutAt: runsOut(20 * time.Minute)}, LowNoted: true, Stoppable: 1}, nil},
		{"topped up during the stop notice: called off", Account{Balance: gpuportal.Balance{Available: 1e6, RunsOutAt: runsOut(10 * time.Hour)}, Stopping: true},
			[]BalanceVerb{BalanceCallOff}},
		{"topped up well clear: the warning is reset", Account{Balance: gpuportal.Balance{Available: 1e6, RunsOutAt: runsOut(10 * time.Hour)}, LowNoted: true, Stoppable: 1},
			[]BalanceVerb{BalanceClear}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshotOf()
			tc.acc.UserID = 3
			s.Accounts = []Account{tc.acc}
			var got []BalanceVerb
			for _, b := range Plan(s, t0).Balance {
				got = append(got, b.Action)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("actions = %v, want %v", got, tc.want)
			}
		})
	}
}

// An account is clear exactly where the balance rule would do nothing
// with the lowest balance its runs allow, and so nothing with any higher:
// each case also runs the rule on the lowest balance and on one ¥10,000
// higher.
func TestAccountIsClear(t *testing.T) {
	at := func(available, burn gpuportal.Fen) gpuportal.Balance {
		return gpuportal.NewBalance(available, 0, 0, burn, t0)
	}
	for _, tc := range []struct {
		name               string
		lowest             gpuportal.Balance
		lowNoted, stopping bool
		want               bool
	}{
		{"lasts for days", at(1_000_000, 100), false, false, true},
		{"nothing running costs", at(1, 0), false, false, true},
		{"at zero", at(0, 100), false, false, false},
		{"overdrawn", at(-50, 100), false, false, false},
		{"runs out within the warning", at(50, 100), false, false, false},
		{"runs out within twice the warning", at(90, 100), false, false, false},
		{"just past twice the warning", at(102, 100), false, false, true},
		{"a warning to reset", at(1_000_000, 100), true, false, false},
		{"a stop to call off", at(1_000_000, 100), false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AccountIsClear(tc.lowest, tc.lowNoted, tc.stopping, t0); got != tc.want {
				t.Fatalf("AccountIsClear = %v, want %v", got, tc.want)
			}
			if !tc.want {
				return
			}
			higher := tc.lowest
			higher.Available += 1_000_000
			higher = gpuportal.NewBalance(higher.Available, 0, 0, higher.BurnPerHour, t0)
			for _, b := range []gpuportal.Balance{tc.lowest, higher} {
				s := snapshotOf()
				s.Accounts = []Account{{UserID: 3, Balance: b, LowNoted: tc.lowNoted, Stopping: tc.stopping, Stoppable: 1}}
				if got := Plan(s, t0).Balance; len(got) != 0 {
					t.Fatalf("a clear account (available %d) got %+v", b.Available, got)
				}
			}
		})
	}
}

// A user being stopped for lack of balance gets no new placements, and
// their spot instances are not counted twice as victims.
func TestStoppedUsersAreNotPlaced(t *testing.T) {
	pl := testPool(2, "n1")
	pl.SpotWait = 1
	s := snapshotOf(pl)
	s.Accounts = []Account{{UserID: 3, Stoppable: 1}}
	s.Pending = []PendingInstance{{ID: 5, UserID: 3, Kind: gpuportal.KindSpot, Pool: a100, Count: 1}}
	if got := Plan(s, t0); len(got.Place) != 0 {
		t.Fatalf("placed %+v for a user at zero", got.Place)
	}
}

func TestLostWork(t *testing.T) {
	pl := testPool(2, "n1")
	s := snapshotOf(pl)
	s.Lost = []LostInstance{{ID: 1, Kind: gpuportal.KindSpot}, {ID: 2, Kind: gpuportal.KindSpot, Interrupting: true}, {ID: 3, Kind: gpuportal.KindOnDemand}}
	s.Reservations = []Reservation{{ID: 9, Pool: a100, Count: 4, Start: t0.Add(-time.Hour), End: t0.Add(time.Hour), Status: gpuportal.ReservationActive, Lost: 3}}
	got := Plan(s, t0)
	want := []Outcome{{1, gpuportal.InstanceInterrupted, true}, {2, gpuportal.InstanceInterrupted, false}, {3, gpuportal.InstanceFailed, false}}
	if !reflect.DeepEqual(got.LostWork, want) {
		t.Errorf("lost work = %+v, want %+v", got.LostWork, want)
	}
	if len(got.Replace) != 1 || len(got.Replace[0].GPUs) != 2 || got.Replace[0].Missing != 1 {
		t.Errorf("replace = %+v, want 2 GPUs and 1 missing", got.Replace)
	}
}

// The planner is deterministic: the same snapshot gives the same plan (the
// simulator's same seed, same report).
func TestPlanIsDeterministic(t *testing.T) {
	build := func() Snapshot {
		var pools []*Pool
		for k, model := range []string{"a", "b", "c", "d"} {
			pl := testPool(2, "n1", "n2")
			pl.Key = PoolKey{Model: model, Region: "r"}
			runSpot(pl, Spot{ID: int64(10 + k), StartedAt: t0}, "n1-0")
			pl.Booked[t0.Unix()] = 4
			pools = append(pools, pl)
		}
		return snapshotOf(pools...)
	}
	first := Plan(build(), t0)
	for range 20 {
		if got := Plan(build(), t0); !reflect.DeepEqual(got, first) {
			t.Fatalf("plans differ:\n%+v\n%+v", got, first)
		}
	}
}

func TestDetailNeeded(t *testing.T) {
	quiet := testPool(2, "n1")
	quiet.Detail = DetailNone
	busy := testPool(2, "n1")
	busy.Key = PoolKey{Model: "h100-80g", Region: "cd-1"}
	busy.Detail = DetailNone
	s := snapshotOf(quiet, busy)
	s.Pending = []PendingInstance{{ID: 1, Pool: busy.Key, Kind: gpuportal.KindSpot, Count: 1}}
	if got := DetailNeeded(s, t0); !reflect.DeepEqual(got, map[PoolKey]Detail{busy.Key: DetailFree}) {
		t.Fatalf("detail needed = %v, want only %v's idle GPUs", got, busy.Key)
	}
	// A spot launch that the counts cannot fit reads no GPUs.
	runSpot(busy, Spot{ID: 9, StartedAt: t0}, "n1-0", "n1-1")
	s.Pending[0].Count = 1
	if got := DetailNeeded(s, t0); len(got) != 0 {
		t.Fatalf("detail needed for a full pool = %v, want none", got)
	}
	// A booked hour within the horizon that needs spot GPUs back: all of it.
	busy.Booked[t0.Unix()] = 1
	if got := DetailNeeded(s, t0); got[busy.Key] != DetailFull {
		t.Fatalf("detail needed before a booked hour = %v, want all of %v", got, busy.Key)
	}
}

// Back-to-back bookings on the same GPUs: the one that ends stops its
// reserved instance, and the one that starts gets those GPUs (they are
// free within the grace) instead of being shorted.
func TestBackToBackReservationsShareGPUs(t *testing.T) {
	pl := testPool(4, "n1")
	for k := range pl.GPUs {
		pl.GPUs[k].Reservation, pl.GPUs[k].Holder = 1, 50 // reservation 1's reserved instance 50 runs on all four
	}
	pl.Held = 4
	s := snapshotOf(pl)
	s.Reservations = []Reservation{
		{ID: 1, Pool: a100, Count: 4, Start: t0.Add(-4 * time.Hour), End: t0, Status: gpuportal.ReservationActive},
		{ID: 2, Pool: a100, Count: 4, Start: t0, End: t0.Add(4 * time.Hour), Status: gpuportal.ReservationConfirmed},
	}
	got := Plan(s, t0)
	if len(got.Activate) != 1 || len(got.Activate[0].GPUs) != 4 || got.Activate[0].Missing != 0 {
		t.Fatalf("activate = %+v, want reservation 2 on the four GPUs", got.Activate)
	}
	if len(got.Interrupt) != 0 {
		t.Fatalf("interrupted %+v: the reserved instance is stopped with its reservation, not interrupted", got.Interrupt)
	}
}

// (issue 22, item 9) An entry its owner cannot pay holds nothing: the
// freed GPUs go to the next entry that fits and can pay; an auto-book
// entry that cannot pay is told, and holds nothing either.
func TestWaitlistPassesOverEntriesThatCannotPay(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	pl := testPool(4, "n1")
	s := snapshotOf(pl)
	s.FreeHours[a100] = map[int64]int{h(2).Unix(): 4, h(3).Unix(): 4}
	s.Waitlist = []WaitEntry{
		{ID: 1, UserID: 1, Pool: a100, Count: 4, Start: h(2), End: h(4), Status: gpuportal.WaitWaiting, Price: 12800, Available: 0},
		{ID: 2, UserID: 2, Pool: a100, Count: 4, Start: h(2), End: h(4), Status: gpuportal.WaitWaiting, AutoBook: true, Price: 12800, Available: 100},
		{ID: 3, UserID: 3, Pool: a100, Count: 4, Start: h(2), End: h(4), Status: gpuportal.WaitWaiting, Price: 12800, Available: 12800},
	}
	got := Plan(s, t0).Waitlist
	want := []WaitlistAction{{EntryID: 2, Action: WaitlistUnpaid}, {EntryID: 3, Action: WaitlistOffer, Expires: t0.Add(30 * time.Minute)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("waitlist = %+v, want %+v", got, want)
	}
}

// (issue 26) Within the rebalance lead of a booking, the rebalance
// recommendation goes exactly to the instances that will get the notice
// (by the same rule), once; the notice itself comes at the horizon, as
// before.
func TestRebalanceGoesToTheInstancesThatWillGetNotice(t *testing.T) {
	start := t0.Add(2 * time.Hour)
	build := func(now time.Time, rebalanced bool) Decisions {
		pl := testPool(4, "n1")
		runSpot(pl, Spot{ID: 1, StartedAt: now.Add(-3 * time.Hour), LastCheckpoint: now.Add(-time.Minute), Rebalanced: rebalanced}, "n1-0", "n1-1")
		runSpot(pl, Spot{ID: 2, StartedAt: now.Add(-time.Hour)}, "n1-2", "n1-3")
		pl.Booked[start.Unix()] = 2
		return Plan(snapshotOf(pl), now)
	}
	policy := gpuportal.DefaultPolicy()
	early := start.Add(-RebalanceLead(policy) - time.Minute)
	if got := build(early, false); len(got.Rebalance) != 0 || len(got.Interrupt) != 0 {
		t.Fatalf("before the lead: %+v", got)
	}
	within := start.Add(-RebalanceLead(policy) + time.Minute)
	got := build(within, false)
	if len(got.Rebalance) != 1 || got.Rebalance[0].InstanceID != 1 || got.Rebalance[0].Node != "n1" || len(got.Interrupt) != 0 {
		t.Fatalf("within the lead: rebalance %+v, interrupt %+v; want a recommendation to 1 alone", got.Rebalance, got.Interrupt)
	}
	if again := build(within, true); len(again.Rebalance) != 0 {
		t.Fatalf("recommended twice: %+v", again.Rebalance)
	}
	notice := build(start.Add(-SpotHorizon(policy)), true)
	if len(notice.Interrupt) != 1 || notice.Interrupt[0].InstanceID != 1 {
		t.Fatalf("at the horizon: %+v; want the notice to the recommended instance", notice.Interrupt)
	}
	// With the lead off, no recommendation.
	pl := testPool(4, "n1")
	pl.Policy.RebalanceLeadMinutes = 0
	runSpot(pl, Spot{ID: 1, StartedAt: within.Add(-time.Hour)}, "n1-0", "n1-1", "n1-2", "n1-3")
	pl.Booked[start.Unix()] = 2
	if got := Plan(snapshotOf(pl), within); len(got.Rebalance) != 0 {
		t.Fatalf("lead 0: %+v", got.Rebalance)
	}
}

// (issue 26) A spot instance that asked for a longer notice gets it, and
// it goes out earlier: the GPUs are still free by the booked hour.
func TestLongerNoticesStartEarlier(t *testing.T) {
	start := t0.Add(2 * time.Hour)
	policy := gpuportal.DefaultPolicy()
	plan := func(now time.Time, notice int) Decisions {
		pl := testPool(2, "n1")
		runSpot(pl, Spot{ID: 1, StartedAt: now.Add(-time.Hour), NoticeSeconds: notice}, "n1-0", "n1-1")
		pl.LongestNotice = notice
		pl.Booked[start.Unix()] = 2
		return Plan(snapshotOf(pl), now)
	}
	long := 600
	early := start.Add(-time.Duration(long+policy.SpotGraceSeconds+60) * time.Second)
	if got := plan(early, 0); len(got.Interrupt) != 0 {
		t.Fatalf("with the policy's notice, no notice yet %s before the start: %+v", start.Sub(early), got.Interrupt)
	}
	got := plan(early, long)
	if len(got.Interrupt) != 1 {
		t.Fatalf("with a %d s notice asked for: %+v; want the notice now", long, got.Interrupt)
	}
	in := got.Interrupt[0]
	if !in.Deadline.Equal(early.Add(time.Duration(long) * time.Second)) {
		t.Errorf("deadline %s; want the %d s asked for", in.Deadline, long)
	}
	if free := in.Deadline.Add(time.Duration(in.Grace) * time.Second); free.After(start) {
		t.Errorf("GPUs free at %s, after the booked hour %s", free, start)
	}
}
