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

// seedBook fills the store with a fleet of gpus A100s (8 per node) and a
// book of n reservations spread over the next 90 days, written in bulk
// (consistent with the hourly usage the way Book would leave it).
func seedBook(b *testing.B, db *store.DB, gpus, n int) {
	b.Helper()
	storetest.AddFleet(b, db, "n", "cd-1", "a100-80g", gpus/8, 8)
	u := storetest.MustCreateUser(b, db, "bench@example.com", gpuportal.RoleCustomer)
	rng := rand.New(rand.NewPCG(1, 2))
	start0 := storetest.Epoch.Truncate(time.Hour).Add(time.Hour)
	reqs := make([]gpuportal.BookingRequest, n)
	for i := range reqs {
		start := start0.Add(time.Duration(rng.IntN(90*24-24)) * time.Hour)
		reqs[i] = gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1 + rng.IntN(8), Start: start, End: start.Add(time.Duration(4+rng.IntN(9)) * time.Hour)}
	}
	if err := db.BulkInsertReservationsForBenchmark(context.Background(), u.ID, reqs); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAvailability: a 14-day × 24-hour grid for one model/region with
// 10,000 GPUs and 200,000 reservations in the book (DESIGN §7: < 5 ms).
func BenchmarkAvailability(b *testing.B) {
	for _, n := range []int{2_000, 200_000} {
		b.Run(fmt.Sprintf("book=%d", n), func(b *testing.B) {
			db, _ := storetest.Open(b)
			seedBook(b, db, 10_000, n)
			ctx := context.Background()
			from := storetest.Epoch.Add(7 * 24 * time.Hour)
			to := from.Add(14 * 24 * time.Hour)
			b.ResetTimer()
			for b.Loop() {
				slots, err := db.Availability(ctx, "a100-80g", "cd-1", from, to)
				if err != nil || len(slots) != 336 {
					b.Fatal(len(slots), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/grid")
		})
	}
}

// BenchmarkOfferings: "when can I get 64 GPUs for 48 h in the next two
// weeks?" over a 14-day range for one model/region with 10,000 GPUs and
// 200,000 reservations in the book (DESIGN §7: < 10 ms), cheapest first.
func BenchmarkOfferings(b *testing.B) {
	for _, n := range []int{2_000, 200_000} {
		b.Run(fmt.Sprintf("book=%d", n), func(b *testing.B) {
			db, _ := storetest.Open(b)
			seedBook(b, db, 10_000, n)
			ctx := context.Background()
			from := storetest.Epoch.Add(7 * 24 * time.Hour)
			req := gpuportal.OfferingRequest{Model: "a100-80g", Region: "cd-1", Count: 64, DurationHours: 48,
				Earliest: from, LatestEnd: from.Add(14 * 24 * time.Hour), Sort: gpuportal.OfferingsByPrice}
			b.ResetTimer()
			for b.Loop() {
				if _, err := db.Offerings(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/search")
		})
	}
}

// BenchmarkTick: one scheduler tick over 10,000 GPUs with 5,000 running
// spot instances and 2,000 upcoming reservations (nothing due: the cost of
// deciding that, every minute).
func BenchmarkTick(b *testing.B) {
	for _, queued := range []int{0, 1000} {
		b.Run(fmt.Sprintf("queued_tasks=%d", queued), func(b *testing.B) { benchmarkTick(b, queued) })
	}
}

// benchmarkTick: with queued > 0, batch jobs first fill the GPUs the
// 5,000 plain spot instances and the book leave free (those tasks run as
// spot instances too), and queued tasks more wait in their queues.
func benchmarkTick(b *testing.B, queued int) {
	db, clock := storetest.Open(b)
	ctx := context.Background()
	seedBook(b, db, 10_000, 2_000)
	u, _ := db.UserByEmail(ctx, "bench@example.com")
	if err := db.BulkRunSpotForBenchmark(ctx, u.ID, "a100-80g", "cd-1", 5_000); err != nil {
		b.Fatal(err)
	}
	// The book above may already need some spot GPUs back: settle that once.
	if _, err := db.Tick(ctx, clock.Now()); err != nil {
		b.Fatal(err)
	}
	if queued > 0 {
		for k := 0; ; k++ {
			if _, err := db.CreateJob(ctx, u, gpuportal.JobRequest{Name: fmt.Sprintf("bench-%d", k), Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 500,
				Command: "x", MaxParallel: 500}); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Tick(ctx, clock.Now()); err != nil {
				b.Fatal(err)
			}
			jobs, err := db.Jobs(ctx, u, 1000, 0)
			if err != nil {
				b.Fatal(err)
			}
			waiting, running := 0, 0
			for _, j := range jobs {
				waiting += j.Tasks.Queued
				running += j.Tasks.Running
			}
			if waiting >= queued {
				b.ReportMetric(float64(waiting), "queued_tasks")
				b.ReportMetric(float64(running), "running_tasks")
				break
			}
		}
	}
	// Start what can start, so every measured tick is the steady state:
	// deciding that nothing is due.
	for {
		res, err := db.Tick(ctx, clock.Now())
		if err != nil {
			b.Fatal(err)
		}
		if res == (store.TickResult{}) {
			break
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := db.Tick(ctx, clock.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/tick")
}

// BenchmarkRates: GET /interruption-rates' work with a year of spot history
// on a 10,000-GPU fleet (876,000 runs: 100 starts an hour, 2–15 h each).
func BenchmarkRates(b *testing.B) {
	db, clock := storetest.Open(b)
	ctx := context.Background()
	storetest.AddFleet(b, db, "n", "cd-1", "a100-80g", 1250, 8)
	u := storetest.MustCreateUser(b, db, "bench@example.com", gpuportal.RoleCustomer)
	if err := db.BulkSpotHistoryForBenchmark(ctx, u.ID, "a100-80g", "cd-1", clock.Now(), 365*24, 100); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		r, err := db.Rates(ctx, "a100-80g", "cd-1", 2)
		if err != nil || r.Trailing.Instances == 0 {
			b.Fatal(r, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/request")
}

// BenchmarkCatalog: GET /catalog's reading at 10,000 GPUs with 200,000
// reservations in the book and a year of spot history — what the web
// layer does once every 10 s at most (it caches the answer; a cached
// answer is web's BenchmarkCatalogHTTP).
func BenchmarkCatalog(b *testing.B) {
	db, clock := storetest.Open(b)
	seedBook(b, db, 10_000, 200_000)
	u := storetest.MustCreateUser(b, db, "spot@example.com", gpuportal.RoleCustomer)
	ctx := context.Background()
	if err := db.BulkSpotHistoryForBenchmark(ctx, u.ID, "a100-80g", "cd-1", clock.Now(), 365*24, 100); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		list, err := db.Catalog(ctx)
		if err != nil || len(list) != 1 || list[0].GPUsPerNode != 8 {
			b.Fatal(list, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/read")
}

// BenchmarkRepeatedWorkloadReports: a busy node's status repeats the
// reports of its 8 running instances (nothing new), as every heartbeat
// does, while bookings go on beside it; ns/op is one node's reports.
// Reports that change nothing are read and take no write transaction
// (issue 51 step 2), so the bookings' latency is what it is without them.
func BenchmarkRepeatedWorkloadReports(b *testing.B) {
	ctx := context.Background()
	db, clock := storetest.Open(b)
	nodes := storetest.AddFleet(b, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(b, db, "bench@example.com", gpuportal.RoleCustomer)
	var reports []gpuportal.WorkloadStatus
	for range 8 {
		inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "train"})
		if err != nil {
			b.Fatal(err)
		}
		reports = append(reports, gpuportal.WorkloadStatus{InstanceID: inst.ID, State: gpuportal.WorkloadRunning, LogTail: "epoch 1"})
	}
	if _, err := db.Tick(ctx, clock.Now()); err != nil {
		b.Fatal(err)
	}
	d, err := db.DesiredFor(ctx, nodes[0].ID)
	if err != nil || len(d.Workloads) == 0 {
		b.Fatalf("placed on the first node: %d, %v", len(d.Workloads), err)
	}
	var mine []gpuportal.WorkloadStatus
	for _, w := range d.Workloads {
		for _, r := range reports {
			if r.InstanceID == w.InstanceID {
				r.Attempt = w.Attempt
				mine = append(mine, r)
			}
		}
	}
	if err := db.ApplyWorkloadReports(ctx, nodes[0].ID, mine); err != nil { // the first: they start
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := db.ApplyWorkloadReports(ctx, nodes[0].ID, mine); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(mine)), "reports/op")
}
