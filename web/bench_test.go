package web

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// BenchmarkBookHTTP books through the real JSON API over HTTP (keep-alive),
// one GPU for 4 hours per booking, windows spread over 90 days of a 10,000
// GPU fleet so every booking is confirmed (DESIGN §7: ≥ 2,000/s).
func BenchmarkBookHTTP(b *testing.B) {
	e := newTestEnv(b)
	storetest.AddFleet(b, e.db, "n", "cd-1", "a100-80g", 1250, 8)
	tokens := make([]string, 16)
	for i := range tokens {
		_, tokens[i] = e.apiToken(fmt.Sprintf("user%d@example.com", i), gpuportal.RoleCustomer)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	first := storetest.Epoch.Truncate(time.Hour).Add(2 * time.Hour)
	var seq, failed atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			start := first.Add(time.Duration(i%(85*24)) * time.Hour)
			body := fmt.Sprintf(`{"model":"a100-80g","region":"cd-1","count":1,"start":%q,"end":%q}`,
				start.Format(time.RFC3339), start.Add(4*time.Hour).Format(time.RFC3339))
			req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/reservations", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tokens[i%int64(len(tokens))])
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d bookings were not confirmed", failed.Load())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bookings/s")
}

// BenchmarkCatalogHTTP: GET /api/v1/catalog over HTTP at 10,000 GPUs, as
// an orchestrator polling it is answered (DESIGN: ≤ 5 ms; the answer is
// read once per 10 s and cached — store's BenchmarkCatalog times a read).
func BenchmarkCatalogHTTP(b *testing.B) {
	e := newTestEnv(b)
	storetest.AddFleet(b, e.db, "n", "cd-1", "a100-80g", 1250, 8)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.ResetTimer()
	for b.Loop() {
		resp, err := client.Get(e.srv.URL + "/api/v1/catalog")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/request")
}
