package e2e

import (
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gpuportal/store/storetest"
)

// BenchmarkBookPortalProcesses books through real portal processes over
// HTTP — one portal on SQLite, one and two portals on one PostgreSQL —
// from 16 customers at once, one GPU for 4 hours per booking, windows
// spread over 85 days of a 2,000-GPU fleet so every booking is confirmed.
// The load generator, the portals and PostgreSQL share the machine.
// Run: PORTAL_TEST_POSTGRES=postgres://… go test -run '^$' -bench BookPortalProcesses -benchtime 5000x ./e2e/
func BenchmarkBookPortalProcesses(b *testing.B) {
	b.Run("sqlite-1-portal", func(b *testing.B) {
		dsn, emails := installation(b, filepath.Join(b.TempDir(), "portal.db"), 250, 16)
		benchBookings(b, []*portalProc{startPortalProc(b, dsn)}, emails)
	})
	b.Run("postgres-1-portal", func(b *testing.B) {
		dsn, emails := installation(b, storetest.PostgresDSN(b), 250, 16)
		benchBookings(b, []*portalProc{startPortalProc(b, dsn)}, emails)
	})
	b.Run("postgres-2-portals", func(b *testing.B) {
		dsn, emails := installation(b, storetest.PostgresDSN(b), 250, 16)
		benchBookings(b, []*portalProc{startPortalProc(b, dsn), startPortalProc(b, dsn)}, emails)
	})
}

func benchBookings(b *testing.B, portals []*portalProc, emails []string) {
	tokens := make([]string, len(emails))
	for i, email := range emails {
		tokens[i] = portals[i%len(portals)].logIn(email, storetest.Password)
	}
	first := testClockStart.Truncate(time.Hour).Add(3 * time.Hour)
	var seq, failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range tokens {
		p := portals[w%len(portals)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := seq.Add(1)
				if i > int64(b.N) {
					return
				}
				start := first.Add(time.Duration(i%(85*24)) * time.Hour)
				if st, body := p.call("POST", "/api/v1/reservations", tokens[w], bookingBody(1, start, 4)); st != http.StatusCreated {
					if failed.Add(1) == 1 {
						b.Errorf("booking answered %d: %s", st, body)
					}
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bookings/s")
}
