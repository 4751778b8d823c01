package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gpuportal"
	"gpuportal/scheduler"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuportal_http_requests_total",
			Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpuportal_http_request_duration_seconds",
			Help:    "HTTP request durations by route and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.duration, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// measure records every request under its route template (c.Path()), so
// /api/v1/reservations/42 and /43 count as one series.
func (s *Server) measure(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := s.cfg.WallClock.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" { // c.Path() is a registered route or empty, never raw input
			route = "unmatched"
		}
		method := metricMethod(c.Request().Method)
		s.metrics.requests.WithLabelValues(route, method, strconv.Itoa(c.Response().Status)).Inc()
		s.metrics.duration.WithLabelValues(route, method).Observe(s.cfg.WallClock.Now().Sub(start).Seconds())
		return nil
	}
}

// metricMethod keeps the method label to a fixed set: the method comes
// from the client, and a label per invented method would let anyone grow
// the portal's memory without bound.
func metricMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

func (s *Server) handleMetrics() echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
}

// registerTickMetrics exports how the scheduler's ticks go: a tick that
// fails as a whole starts no reservation for anyone, and a decision that
// fails alone leaves one customer's thing undone (tick_failures has it).
func registerTickMetrics(reg *prometheus.Registry, sched Scheduler, wall gpuportal.Clock) {
	counter := func(name, help string, read func(h scheduler.TickHealth) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(read(sched.Health())) })
	}
	reg.MustRegister(
		counter("gpuportal_scheduler_ticks_total", "Scheduler ticks this portal ran.", func(h scheduler.TickHealth) int64 { return h.Ticks }),
		counter("gpuportal_scheduler_tick_failures_total", "Scheduler ticks that failed as a whole (nothing of them applied).", func(h scheduler.TickHealth) int64 { return h.FailedTicks }),
		counter("gpuportal_scheduler_failed_decisions_total", "Scheduler decisions that failed alone: rolled back, recorded in tick_failures, their owners told; the rest of their ticks applied.",
			func(h scheduler.TickHealth) int64 { return h.FailedDecisions }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpuportal_scheduler_failing_seconds", Help: "How long the scheduler's ticks have failed in a row (0 while the last one succeeded)."},
			func() float64 { return sched.Health().FailingFor(wall.Now()).Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpuportal_scheduler_last_success_timestamp_seconds", Help: "When the last scheduler tick succeeded (Unix time; 0: none yet)."},
			func() float64 {
				if at := sched.Health().LastSuccess; !at.IsZero() {
					return float64(at.Unix())
				}
				return 0
			}),
	)
}
