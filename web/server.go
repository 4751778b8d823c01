// Package web is the portal's HTTP face: server-rendered pages (templ +
// htmx) for browsers and the JSON API under /api/v1 for scripts and agents.
// Handlers parse input, call the store (which enforces the rules) and render
// HTML or JSON from the same result.
package web

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"gpuportal/scheduler"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"gpuportal"
	"gpuportal/sessions"
	"gpuportal/store"
	"gpuportal/webhooks"
)

// Config is what the server needs from the outside.
type Config struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is business time (bookings, prices). WallClock is real time
	// (rate limits, sessions); tests may replace both.
	Clock     gpuportal.Clock
	WallClock gpuportal.Clock
	// TestClock is set when the portal runs with --test-clock: admins may
	// then move Clock through the API.
	TestClock *gpuportal.ManualClock
	// Location is the site time zone.
	Location *time.Location
	// Secret, when set, derives the session keys (PORTAL_SECRET); otherwise
	// keys are generated once and kept in the database.
	Secret string
	// PublicURL is the portal's address as users reach it
	// (PORTAL_PUBLIC_URL): links handed out and calendar UIDs use it,
	// never a request's Host header.
	PublicURL string
	// TrustedProxies are the networks whose X-Forwarded-For and
	// X-Forwarded-Proto are believed (--trusted-proxies; none by default).
	TrustedProxies []*net.IPNet
	// MetricsAllow limits /metrics to these networks (--metrics-allow;
	// empty: everyone).
	MetricsAllow []*net.IPNet
	// TestPayments turns on the built-in test payment provider, whose
	// checkout page credits a top-up at the press of a button: for the
	// demo and tests only (--demo, --test-payments), never production.
	TestPayments bool
	// Stripe, when set, takes top-ups through Stripe Checkout.
	Stripe *StripeConfig
	// PaymentSecret is the key the test provider signs its webhooks with
	// (PORTAL_PAYMENT_SECRET); with TestPayments and no secret, one is made
	// up at start.
	PaymentSecret string
	// Scheduler is kicked by the store after changes that make something
	// due; the server asks it whether it leads, and it runs
	// the minutes a moved test clock skips. Nil: nothing is scheduled.
	Scheduler Scheduler
	// Hub pairs sessions into instances with their agents' streams; the
	// SSH gateway shares it. Nil: the server makes its own (no gateway).
	Hub *sessions.Hub
	// SSH is where the SSH gateway listens, as customers reach it (zero:
	// no gateway).
	SSH SSHEndpoint
	// WhatIfDays is how many days a policy what-if simulates (0: a week,
	// the product's; tests run shorter ones).
	WhatIfDays int
	// ProxyDomain is the domain web apps in instances are served under,
	// at http://<instance id>-<port>.<ProxyDomain>[:<portal port>]/
	// (--proxy-domain; default "localhost").
	ProxyDomain string
	// WebhookAllowPrivate lets webhooks be made for loopback and private
	// addresses (--webhook-allow-private: tests, on-premises installs).
	WebhookAllowPrivate bool
	// Resolver checks where a new webhook's host points (nil: the
	// system's).
	Resolver webhooks.Resolver
}

// SSHEndpoint is what a customer puts in ~/.ssh/config (GET /ssh).
type SSHEndpoint struct {
	Host        string `json:"host"`
	Port        int    `json:"port"`
	Fingerprint string `json:"host_key_fingerprint"`
}

// Scheduler is what the web layer needs of the scheduler.
type Scheduler interface {
	// Leading reports whether this portal runs the scheduler (several
	// portals on PostgreSQL run one between them).
	Leading() bool
	Advance(ctx context.Context, clock *gpuportal.ManualClock, to time.Time) error
	// Health is how this portal's ticks have gone (/healthz, /metrics).
	Health() scheduler.TickHealth
}

// Server is the portal's HTTP server.
type Server struct {
	cfg        Config
	db         *store.DB
	log        *slog.Logger
	echo       *echo.Echo
	sessions   *sessionStore
	limiter    *limiter
	metrics    *httpMetrics
	registry   *prometheus.Registry
	http       *http.Server
	ratesCache ratesCache
	catalog    catalogCache
	whatIfs    whatIfRuns
	stripe     *stripeProvider // nil: no Stripe
	hub        *sessions.Hub
	apps       *sessions.AppProxy
	// sessionCookie is the session cookie's name (secureSessionCookie
	// behind TLS).
	sessionCookie string
}

// New builds the server and its routes.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("web: no database")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = gpuportal.RealClock{}
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.WallClock == nil {
		cfg.WallClock = gpuportal.RealClock{}
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	if cfg.TestPayments && cfg.PaymentSecret == "" {
		cfg.PaymentSecret = rand.Text() + rand.Text()
	}
	if cfg.Hub == nil {
		cfg.Hub = sessions.NewHub(cfg.DB, "", cfg.Logger)
	}
	go cfg.Hub.Run(ctx)
	if cfg.ProxyDomain == "" {
		cfg.ProxyDomain = "localhost"
	}
	apps, err := sessions.NewAppProxy(ctx, cfg.Hub, cfg.DB, cfg.ProxyDomain, cfg.Logger)
	if err != nil {
		return nil, err
	}
	sessions, err := newSessionStore(ctx, cfg.DB, cfg.Secret)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:           cfg,
		db:            cfg.DB,
		log:           cfg.Logger,
		echo:          echo.New(),
		sessions:      sessions,
		hub:           cfg.Hub,
		apps:          apps,
		sessionCookie: sessionCookie,
		whatIfs:       whatIfRuns{days: cmp.Or(cfg.WhatIfDays, whatIfDays)},
		limiter:       newLimiter(cfg.WallClock),
		registry:      prometheus.NewRegistry(),
	}
	if cfg.Stripe != nil {
		s.stripe = newStripeProvider(*cfg.Stripe)
	}
	if strings.HasPrefix(cfg.PublicURL, "https://") {
		s.sessionCookie = secureSessionCookie
	}
	// The app cookie is Secure when the request came over HTTPS, here or
	// at a proxy this portal trusts.
	apps.IsHTTPS = s.requestIsHTTPS
	s.metrics = newHTTPMetrics(s.registry)
	if cfg.Scheduler != nil {
		s.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpuportal_scheduler_leader",
			Help: "1 while this portal runs the scheduler, 0 while another portal on the database does.",
		}, func() float64 {
			if cfg.Scheduler.Leading() {
				return 1
			}
			return 0
		}))
		registerTickMetrics(s.registry, cfg.Scheduler, cfg.WallClock)
	}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.echo.HideBanner = true
	s.echo.HidePort = true
	s.echo.HTTPErrorHandler = s.handleError
	s.echo.IPExtractor = s.ipExtractor()
	s.routes()
	return s, nil
}

// ServeHTTP lets the server be used with httptest.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A web app's own origin: none of the portal's pages, cookies or
	// middleware.
	if _, _, ok := s.apps.Match(r.Host); ok {
		s.apps.ServeHTTP(w, r)
		return
	}
	s.echo.ServeHTTP(w, r)
}

// Registry is the Prometheus registry behind /metrics, for other components
// (the scheduler) to add their own metrics to.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Serve serves HTTP on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	if err := s.http.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Shutdown stops accepting requests and waits for those in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.http.Shutdown(ctx)
}
