package webhooks_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
	"gpuportal/webhooks"
)

// BenchmarkWebhooks (DESIGN §7): an event reaches a healthy endpoint
// within 1 s of its cause (p99), and 10,000 deliveries pending to dead
// endpoints change no booking's latency — measured in the same run, on
// SQLite, with the real deliverer loop and the real clock:
//
//	go test -run '^$' -bench BenchmarkWebhooks -benchtime 1x ./webhooks/
func BenchmarkWebhooks(b *testing.B) {
	ctx := context.Background()
	db, _ := storetest.Open(b)
	db.Wall = gpuportal.RealClock{}
	storetest.AddFleet(b, db, "n", "cd-1", "a100-80g", 8, 8)
	booker := storetest.MustCreateUser(b, db, "booker@example.com", gpuportal.RoleCustomer)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Booking latency before anything is pending.
	bookings := func(from int) []time.Duration {
		var out []time.Duration
		start := time.Now().Truncate(time.Hour).Add(3 * time.Hour)
		for k := range 100 {
			s := start.Add(time.Duration((from+k)%200) * time.Hour)
			t0 := time.Now()
			if _, err := db.Book(ctx, booker, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: s, End: s.Add(4 * time.Hour)}); err != nil {
				b.Fatal(err)
			}
			out = append(out, time.Since(t0))
		}
		return out
	}

	// 10,000 deliveries pending to dead endpoints: five refuse the
	// connection, five accept it and never answer (each attempt holds a
	// worker its 10 s).
	dead := storetest.MustCreateUser(b, db, "dead@example.com", gpuportal.RoleCustomer)
	refused, _ := net.Listen("tcp", "127.0.0.1:0")
	refusedURL := "http://" + refused.Addr().String() + "/hook"
	refused.Close()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release) // before Close: it waits for the handlers
	var deadHooks []int64
	for k := range 10 {
		url := refusedURL
		if k%2 == 1 {
			url = hang.URL + "/hook"
		}
		w, err := db.CreateWebhook(ctx, dead, url, []string{"*"})
		if err != nil {
			b.Fatal(err)
		}
		deadHooks = append(deadHooks, w.ID)
	}
	for k := range 10_000 {
		if _, err := db.TestWebhook(ctx, dead, deadHooks[k%len(deadHooks)]); err != nil {
			b.Fatal(err)
		}
	}

	// A healthy endpoint that notes when each event arrives.
	var mu sync.Mutex
	arrived := map[int64]time.Time{}
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.Header.Get("Gpuportal-Event-Id"), 10, 64)
		mu.Lock()
		arrived[id] = time.Now()
		mu.Unlock()
	}))
	defer healthy.Close()
	live := storetest.MustCreateUser(b, db, "live@example.com", gpuportal.RoleCustomer)
	hook, err := db.CreateWebhook(ctx, live, healthy.URL+"/hook", []string{"*"})
	if err != nil {
		b.Fatal(err)
	}

	for b.Loop() {
		before := bookings(0)
		runCtx, stop := context.WithCancel(ctx)
		d := &webhooks.Deliverer{DB: db, Client: webhooks.NewClient(true), Log: quiet}
		done := make(chan struct{})
		go func() { d.Run(runCtx); close(done) }()

		// Events for the healthy endpoint, one every 20 ms, while the
		// deliverer also works on the dead endpoints' backlog.
		caused := map[int64]time.Time{}
		for range 200 {
			t0 := time.Now()
			del, err := db.TestWebhook(ctx, live, hook.ID)
			if err != nil {
				b.Fatal(err)
			}
			caused[del.EventID] = t0
			time.Sleep(20 * time.Millisecond)
		}
		during := bookings(100)
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(arrived)
			mu.Unlock()
			if n >= len(caused) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		<-done

		var latency []time.Duration
		mu.Lock()
		for id, t0 := range caused {
			if at, ok := arrived[id]; ok {
				latency = append(latency, at.Sub(t0))
			}
		}
		mu.Unlock()
		if len(latency) != len(caused) {
			b.Fatalf("%d of %d events arrived", len(latency), len(caused))
		}
		pending, err := db.WebhookDeliveries(ctx, dead, deadHooks[0], store.Page{Limit: 1, Total: new(int)})
		if err != nil || len(pending) == 0 {
			b.Fatal(err)
		}
		b.ReportMetric(ms(pct(latency, 50)), "event→delivery-p50-ms")
		b.ReportMetric(ms(pct(latency, 99)), "event→delivery-p99-ms")
		b.ReportMetric(ms(pct(before, 50)), "book-p50-ms-idle")
		b.ReportMetric(ms(pct(before, 99)), "book-p99-ms-idle")
		b.ReportMetric(ms(pct(during, 50)), "book-p50-ms-10k-dead")
		b.ReportMetric(ms(pct(during, 99)), "book-p99-ms-10k-dead")
		fmt.Printf("webhooks: event→delivery p50 %.1f ms p99 %.1f ms; booking p50/p99 %.2f/%.2f ms idle, %.2f/%.2f ms with 10,000 deliveries pending to 10 dead endpoints\n",
			ms(pct(latency, 50)), ms(pct(latency, 99)), ms(pct(before, 50)), ms(pct(before, 99)), ms(pct(during, 50)), ms(pct(during, 99)))
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
