package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 22, item 23) A storm of terminated PostgreSQL backends: bookings
// whose connection is killed before they commit are run again (they died
// with it), so none fails for it — only a commit caught mid-flight may
// (its outcome is unknown and it must not be run twice) — and no hour is
// ever over capacity.
func TestBookingsSurviveTerminatedBackends(t *testing.T) {
	t.Parallel()
	if storetest.Engine() != "postgres" {
		t.Skip("about PostgreSQL connections")
	}
	ctx := context.Background()
	dsn := storetest.PostgresDSN(t)
	app := fmt.Sprintf("gpuportal_storm_%d", time.Now().UnixNano())
	db, _ := storetest.OpenAt(t, dsn+"&application_name="+app)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)

	killer, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close()
	stop := make(chan struct{})
	const workers, perWorker = 8, 25
	var killed atomic.Int64
	var ended [workers]atomic.Int64 // bookings each worker has finished
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A round every 100 ms — but only once every worker has finished
		// a booking since the last round (or all of its own): a storm
		// timed by the clock alone, on a machine where a booking takes
		// longer than 100 ms, killed every try until the store's patience
		// ran out. Paced by progress, every round cuts off the bookings
		// in flight and none is cut off twice in a row.
		var last [workers]int64
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			progressed := true
			for w := range workers {
				n := ended[w].Load()
				progressed = progressed && (n > last[w] || n == perWorker)
			}
			if !progressed && killed.Load() > 0 {
				continue
			}
			for w := range workers {
				last[w] = ended[w].Load()
			}
			var n int64
			if err := killer.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n); err == nil {
				killed.Add(n)
			}
		}
	}()
	var booked, refused, commitLost, failed atomic.Int64
	var firstFailure atomic.Value
	var running sync.WaitGroup
	for w := range workers {
		running.Add(1)
		go func() {
			defer running.Done()
			for k := range perWorker {
				start := storetest.Epoch.Truncate(time.Hour).Add(time.Duration(2+(w*perWorker+k)%40) * time.Hour)
				_, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 3, Start: start, End: start.Add(4 * time.Hour)})
				ended[w].Add(1)
				switch {
				case err == nil:
					booked.Add(1)
				case gpuportal.ErrorCode(err) == gpuportal.ECAPACITY:
					refused.Add(1)
				case strings.Contains(err.Error(), "commit:"):
					commitLost.Add(1) // outcome unknown: must not be retried
				default:
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	running.Wait()
	close(stop)
	wg.Wait()
	t.Logf("%d backends terminated; %d booked, %d refused (full), %d lost at commit, %d failed", killed.Load(), booked.Load(), refused.Load(), commitLost.Load(), failed.Load())
	if killed.Load() == 0 {
		t.Fatal("no backend was terminated: the storm did not happen")
	}
	if failed.Load() > 0 {
		t.Fatalf("%d bookings failed for a lost connection before their commit (first: %v)", failed.Load(), firstFailure.Load())
	}
	// Not one hour over the 8 GPUs, whatever was cut off.
	for h := range 50 {
		at := storetest.Epoch.Truncate(time.Hour).Add(time.Duration(h) * time.Hour)
		slots, err := db.Availability(ctx, "a100-80g", "cd-1", at, at.Add(time.Hour))
		if err != nil {
			continue // a connection the storm left broken
		}
		for _, s := range slots {
			if s.Reserved > 8 {
				t.Fatalf("%s: %d reserved of 8", s.Start, s.Reserved)
			}
		}
	}
}
