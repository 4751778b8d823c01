package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
