package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"gpuportal"
	"gpuportal/scheduler"
	"gpuportal/sessions"
	"gpuportal/store"
	"gpuportal/web"
	"gpuportal/webhooks"
)

// `portal serve` in named steps: read and check the flags and environment
// (parseServe), open the store (openServeStore), build the components
// (newPortal), then run them until the context ends (portal.run).

// serveOptions is `portal serve` once its flags and environment are read
// and checked: nothing below needs getenv or a flag again.
type serveOptions struct {
	db                                              dbFlags
	addr, publicURL, sshAddr, proxyDomain, agentURL string
	demo                                            bool
	demoAgents                                      string
	migrate                                         bool
	testPayments, testClock                         bool
	now                                             time.Time // with testClock: where the clock starts (zero: the real time)
	logLevel                                        string
	secret, paymentSecret                           string
	stripe                                          *web.StripeConfig
	proxies, metricsNets                            []*net.IPNet
	enrollTTL, livenessGrace                        time.Duration
	location                                        *time.Location
	adminEmail, adminPassword                       string
	adminPromote                                    bool
	webhookAllowPrivate                             bool
}

// parseServe reads `portal serve`'s flags and environment and checks them
// all before anything starts.
func parseServe(args []string, getenv func(string) string, stderr io.Writer) (*serveOptions, error) {
	o := &serveOptions{}
	fs := flag.NewFlagSet("portal serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.db.register(fs, getenv)
	fs.StringVar(&o.addr, "addr", envOr(getenv, "PORTAL_ADDR", "127.0.0.1:8080"), "listen address (env PORTAL_ADDR)")
	fs.BoolVar(&o.demo, "demo", false, "seed demo accounts and a demo fleet of simulated nodes, and print the logins")
	fs.StringVar(&o.demoAgents, "demo-agent", defaultAgentBinary(), "with --demo: the agent binary that runs the simulated nodes (empty: seed the fleet without agents)")
	fs.BoolVar(&o.migrate, "migrate", false, "apply pending migrations before serving (a new, empty database is always migrated)")
	stripeMethods := fs.String("stripe-payment-methods", envOr(getenv, "PORTAL_STRIPE_PAYMENT_METHODS", "card,alipay,wechat_pay"), "with Stripe: the payment methods Checkout offers, comma-separated (env PORTAL_STRIPE_PAYMENT_METHODS)")
	stripeAPI := fs.String("stripe-api-url", getenv("PORTAL_STRIPE_API_URL"), "with Stripe: the API's address (default Stripe's own; env PORTAL_STRIPE_API_URL)")
	fs.BoolVar(&o.testPayments, "test-payments", envOr(getenv, "PORTAL_TEST_PAYMENTS", "") == "1", "turn on the built-in test payment provider, whose checkout page credits any top-up at the press of a button — for demos and tests only, never with real customers (env PORTAL_TEST_PAYMENTS=1; --demo turns it on)")
	fs.BoolVar(&o.webhookAllowPrivate, "webhook-allow-private", envOr(getenv, "PORTAL_WEBHOOK_ALLOW_PRIVATE", "") == "1", "let webhooks reach loopback and private addresses — for tests and on-premises installs only: a customer's webhook could then reach the portal's own network (env PORTAL_WEBHOOK_ALLOW_PRIVATE=1)")
	fs.BoolVar(&o.testClock, "test-clock", false, "use a manual business clock that admins can move (POST /api/v1/admin/clock)")
	nowFlag := fs.String("now", "", "with --test-clock: start the clock at this RFC 3339 time (default: the real time)")
	fs.StringVar(&o.logLevel, "log-level", envOr(getenv, "PORTAL_LOG_LEVEL", "info"), "debug, info, warn or error (env PORTAL_LOG_LEVEL)")
	fs.StringVar(&o.publicURL, "public-url", getenv("PORTAL_PUBLIC_URL"), "the portal's address as users reach it, for links in emails and SMS and calendar UIDs (env PORTAL_PUBLIC_URL; default http://<addr>)")
	trustedProxies := fs.String("trusted-proxies", getenv("PORTAL_TRUSTED_PROXIES"), "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For/-Proto are believed (env PORTAL_TRUSTED_PROXIES; default none)")
	metricsAllow := fs.String("metrics-allow", getenv("PORTAL_METRICS_ALLOW"), "comma-separated addresses or CIDRs allowed to read /metrics (env PORTAL_METRICS_ALLOW; default everyone)")
	fs.StringVar(&o.sshAddr, "ssh-addr", envOr(getenv, "PORTAL_SSH_ADDR", "127.0.0.1:2222"), "where the SSH gateway into instances listens (ssh -p PORT <instance id>@host); empty: no gateway (env PORTAL_SSH_ADDR)")
	fs.StringVar(&o.proxyDomain, "proxy-domain", envOr(getenv, "PORTAL_PROXY_DOMAIN", "localhost"), "web apps in instances are served at http://<instance id>-<port>.DOMAIN[:<port>]/ (production: a wildcard DNS name and certificate on a registrable domain of its own, never a subdomain of the portal's, such as gpuapps-example.net; the default localhost works in browsers on this machine) (env PORTAL_PROXY_DOMAIN)")
	fs.StringVar(&o.agentURL, "agent-url", getenv("PORTAL_AGENT_URL"), "this portal's own address as agents reach it, for the session streams they open (set it on each portal when several share a PostgreSQL database; default: the --portal agents were given) (env PORTAL_AGENT_URL)")
	defaultTTL, err := envDuration(getenv, "PORTAL_ENROLLMENT_TOKEN_TTL", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	fs.DurationVar(&o.enrollTTL, "enrollment-token-ttl", defaultTTL, "how long a node enrollment token works (env PORTAL_ENROLLMENT_TOKEN_TTL)")
	defaultGrace, err := envDuration(getenv, "PORTAL_NODE_LIVENESS_GRACE", gpuportal.AgentBackoffCap)
	if err != nil {
		return nil, err
	}
	fs.DurationVar(&o.livenessGrace, "node-liveness-grace", defaultGrace, "after the portal starts leading, how long (beyond three heartbeats) nodes have to reach it before missed heartbeats take them offline; at least the agents' retry cap (env PORTAL_NODE_LIVENESS_GRACE)")
	fs.Usage = func() { serveUsage(fs, stderr) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}

	o.secret = getenv("PORTAL_SECRET")
	if o.secret != "" && len(o.secret) < minSecretBytes {
		return nil, fmt.Errorf("PORTAL_SECRET is %d bytes; it must be at least %d (e.g. openssl rand -base64 48)", len(o.secret), minSecretBytes)
	}
	if o.proxies, err = web.ParseCIDRs(*trustedProxies); err != nil {
		return nil, fmt.Errorf("--trusted-proxies: %w", err)
	}
	if o.metricsNets, err = web.ParseCIDRs(*metricsAllow); err != nil {
		return nil, fmt.Errorf("--metrics-allow: %w", err)
	}
	o.paymentSecret = getenv("PORTAL_PAYMENT_SECRET")
	if o.paymentSecret != "" && len(o.paymentSecret) < minSecretBytes {
		return nil, fmt.Errorf("PORTAL_PAYMENT_SECRET is %d bytes; it must be at least %d", len(o.paymentSecret), minSecretBytes)
	}
	if o.stripe, err = stripeConfig(getenv, *stripeMethods, *stripeAPI); err != nil {
		return nil, err
	}
	if o.demo {
		o.testPayments = true
	}
	if o.enrollTTL <= 0 {
		return nil, errors.New("--enrollment-token-ttl must be positive")
	}
	if o.livenessGrace < 0 {
		return nil, errors.New("--node-liveness-grace must not be negative")
	}
	if o.location, err = time.LoadLocation(o.db.timezone); err != nil {
		return nil, fmt.Errorf("--timezone %q: %w", o.db.timezone, err)
	}
	switch {
	case *nowFlag != "" && !o.testClock:
		return nil, errors.New("--now needs --test-clock")
	case *nowFlag != "":
		if o.now, err = time.Parse(time.RFC3339, *nowFlag); err != nil {
			return nil, fmt.Errorf("--now: %w", err)
		}
	}
	o.adminEmail, o.adminPassword, o.adminPromote = getenv("PORTAL_ADMIN_EMAIL"), getenv("PORTAL_ADMIN_PASSWORD"), getenv("PORTAL_ADMIN_PROMOTE") == "1"
	if (o.adminEmail == "") != (o.adminPassword == "") {
		return nil, errors.New("PORTAL_ADMIN_EMAIL and PORTAL_ADMIN_PASSWORD go together")
	}
	return o, nil
}

func serveUsage(fs *flag.FlagSet, stderr io.Writer) {
	fmt.Fprintln(stderr, "usage: portal [serve] [flags]\n\nflags:")
	fs.PrintDefaults()
	fmt.Fprint(stderr, `
environment:
  PORTAL_SECRET           derives the session cookie keys, at least 32 bytes (default: generated once, kept in the database)
  PORTAL_ADMIN_EMAIL      with PORTAL_ADMIN_PASSWORD: make sure this admin exists at start
  PORTAL_ADMIN_PASSWORD
  PORTAL_ADMIN_PROMOTE    1: PORTAL_ADMIN_EMAIL may name an existing customer account, which is promoted
                          (its sessions end, its API tokens are revoked); otherwise that is refused
  PORTAL_SMTP_URL         smtp://user:pass@host:port?from=addr&tls=none|starttls|tls — enables email
  PORTAL_SMS_URL          HTTP endpoint receiving {"to","text"} JSON — enables SMS
  PORTAL_SMS_SECRET       signs SMS requests: X-Signature: sha256=<hex HMAC-SHA256 of the body>
  PORTAL_STRIPE_SECRET_KEY     with PORTAL_STRIPE_WEBHOOK_SECRET: top-ups through Stripe Checkout (cards, Alipay,
  PORTAL_STRIPE_WEBHOOK_SECRET WeChat Pay, in CNY); the webhook is POST /api/v1/payments/stripe/webhook
  PORTAL_TEST_PAYMENTS    1: the same as --test-payments
  PORTAL_PAYMENT_SECRET   with --test-payments: the key the test provider signs its webhooks with
                          (X-Signature: sha256=<hex HMAC-SHA256 of the body>), at least 32 bytes;
                          made up at start when it is not set. On its own it enables nothing.
`)
}

// stripeConfig is Stripe's configuration from the environment (nil: no
// Stripe).
func stripeConfig(getenv func(string) string, methods, apiURL string) (*web.StripeConfig, error) {
	key, hook := getenv("PORTAL_STRIPE_SECRET_KEY"), getenv("PORTAL_STRIPE_WEBHOOK_SECRET")
	if key == "" && hook == "" {
		return nil, nil
	}
	if key == "" || hook == "" {
		return nil, errors.New("PORTAL_STRIPE_SECRET_KEY and PORTAL_STRIPE_WEBHOOK_SECRET go together")
	}
	cfg := &web.StripeConfig{SecretKey: key, WebhookSecret: hook, APIURL: apiURL}
	for m := range strings.SplitSeq(methods, ",") {
		switch m = strings.TrimSpace(m); m {
		case "card", "alipay", "wechat_pay":
			cfg.PaymentMethods = append(cfg.PaymentMethods, m)
		case "":
		default:
			return nil, fmt.Errorf("--stripe-payment-methods: unknown method %q (card, alipay, wechat_pay)", m)
		}
	}
	return cfg, nil
}

// warn logs what is allowed but dangerous or useless.
func (o *serveOptions) warn(log *slog.Logger) {
	if o.testPayments && !o.demo {
		log.Warn("TEST PAYMENTS ARE ON: any signed-in user can credit their own balance with the test provider's confirm button; never run this with real customers", "flag", "--test-payments")
	}
	if o.paymentSecret != "" && !o.testPayments {
		log.Warn("PORTAL_PAYMENT_SECRET is set but no payment provider uses it: the test provider needs --test-payments; top-ups stay off")
	}
}

// clocks is the business clock: the real one, or with --test-clock a
// manual one admins move (returned again as manual).
func (o *serveOptions) clocks() (clock gpuportal.Clock, manual *gpuportal.ManualClock) {
	if !o.testClock {
		return gpuportal.RealClock{}, nil
	}
	start := o.now
	if start.IsZero() {
		start = time.Now()
	}
	manual = gpuportal.NewManualClock(start)
	return manual, manual
}

// openServeStore opens the database, brings its schema up (or refuses a
// schema this build does not expect) and makes sure of the admin the
// environment names.
func openServeStore(ctx context.Context, o *serveOptions, clock gpuportal.Clock, log *slog.Logger) (*store.DB, error) {
	db, err := o.db.open(ctx, clock)
	if err != nil {
		return nil, err
	}
	db.Location = o.location
	db.EnrollmentTokenTTL = o.enrollTTL
	if err := prepareSchema(ctx, db, o.migrate, log); err != nil {
		db.Close()
		return nil, err
	}
	if o.adminEmail != "" {
		if _, err := db.EnsureAdmin(ctx, o.adminEmail, o.adminPassword, "", o.adminPromote); err != nil {
			db.Close()
			return nil, fmt.Errorf("PORTAL_ADMIN_EMAIL: %w", cliError(err))
		}
		log.Info("admin ensured", "email", o.adminEmail)
	}
	return db, nil
}

// servePortal is the running portal's parts.
type servePortal struct {
	log        *slog.Logger
	listener   net.Listener
	url        string // where it listens
	srv        *web.Server
	sched      *scheduler.Scheduler
	dispatcher interface{ Run(context.Context) }
	webhooks   *webhooks.Deliverer
	closers    []func() // in the order they are to run
}

// newPortal builds the portal's parts on db: the notification dispatcher,
// the listener, the scheduler, the session hub and its SSH gateway, and
// the web server.
func newPortal(ctx context.Context, o *serveOptions, db *store.DB, clock gpuportal.Clock, manual *gpuportal.ManualClock, getenv func(string) string, log *slog.Logger) (*servePortal, error) {
	p := &servePortal{log: log}
	dispatcher, err := newDispatcher(db, getenv, log, o.location)
	if err != nil {
		return nil, err
	}
	p.dispatcher = dispatcher
	if p.listener, err = net.Listen("tcp", o.addr); err != nil {
		return nil, err
	}
	p.url = "http://" + p.listener.Addr().String()
	publicURL := o.publicURL
	if publicURL == "" {
		publicURL = p.url
	}
	dispatcher.BaseURL = publicURL
	if o.webhookAllowPrivate {
		log.Warn("WEBHOOKS MAY REACH PRIVATE ADDRESSES (--webhook-allow-private): a customer's webhook can reach this portal's own network; use it for tests and on-premises installs only")
	}
	p.webhooks = &webhooks.Deliverer{DB: db, Client: webhooks.NewClient(o.webhookAllowPrivate), Log: log}
	p.sched = scheduler.New(db, clock, gpuportal.RealClock{}, log)
	p.sched.LivenessGrace = o.livenessGrace
	hub := sessions.NewHub(db, o.agentURL, log)
	p.closers = append(p.closers, hub.Close)
	sshEndpoint, stopGateway, err := startGateway(ctx, hub, db, o.sshAddr, publicURL, log)
	if err != nil {
		p.close()
		return nil, err
	}
	p.closers = append([]func(){stopGateway}, p.closers...)
	p.srv, err = web.New(ctx, web.Config{
		Hub: hub, SSH: sshEndpoint, ProxyDomain: o.proxyDomain,
		DB: db, Logger: log, Clock: clock, TestClock: manual, Location: o.location, Secret: o.secret, Scheduler: p.sched,
		TrustedProxies: o.proxies, MetricsAllow: o.metricsNets, PublicURL: publicURL, TestPayments: o.testPayments, PaymentSecret: o.paymentSecret, Stripe: o.stripe,
		WebhookAllowPrivate: o.webhookAllowPrivate,
	})
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// close releases what newPortal opened (the listener, unless serving
// took it).
func (p *servePortal) close() {
	if p.listener != nil {
		p.listener.Close()
	}
	for _, f := range p.closers {
		f()
	}
}

// run serves until ctx ends (or the server fails), with the scheduler,
// the dispatcher and the payment reconciliation beside it, then shuts
// down: the server first (15 s for requests under way), then the loops.
func (p *servePortal) run(ctx context.Context) error {
	errc := make(chan error, 1)
	l := p.listener
	p.listener = nil // the server closes it
	go func() { errc <- p.srv.Serve(l) }()
	loops, stopLoops := context.WithCancel(ctx)
	var done []chan struct{}
	for _, loop := range []func(context.Context){p.sched.Run, p.dispatcher.Run, p.webhooks.Run, func(ctx context.Context) { reconcilePayments(ctx, p.srv, p.log) }} {
		d := make(chan struct{})
		done = append(done, d)
		go func() { loop(loops); close(d) }()
	}
	defer func() {
		stopLoops()
		for _, d := range done {
			<-d
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	p.log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return <-errc
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseServe(args, getenv, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, o.logLevel)
	if err != nil {
		return err
	}
	o.warn(log)
	clock, manual := o.clocks()
	db, err := openServeStore(ctx, o, clock, log)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := newPortal(ctx, o, db, clock, manual, getenv, log)
	if err != nil {
		return err
	}
	defer p.close()
	if o.demo {
		if err := seedDemo(ctx, db, stdout, p.url); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	log.Info("portal listening", "url", p.url, "db", o.db.redacted(), "timezone", o.location.String(), "test_clock", o.testClock)
	fmt.Fprintf(stdout, "portal listening on %s\n", p.url)
	if o.demo && o.demoAgents != "" {
		stopAgents, err := startDemoAgents(ctx, db, p.url, o.demoAgents, o.db.demoAgentsDir(), log)
		if err != nil {
			log.Warn("demo fleet not started", "err", err)
		} else {
			defer stopAgents()
		}
	}
	return p.run(ctx)
}

// reconcilePayments asks the payment providers every minute about
// top-ups whose webhook may have been lost (see web.ReconcilePayments)
// and refunds whose outcome is not known yet (web.RetryRefunds).
func reconcilePayments(ctx context.Context, srv *web.Server, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := srv.ReconcilePayments(ctx); err != nil && ctx.Err() == nil {
			log.Error("payment reconciliation", "err", err)
		} else if n > 0 {
			log.Info("payment reconciliation credited top-ups", "count", n)
		}
		if n, err := srv.RetryRefunds(ctx); err != nil && ctx.Err() == nil {
			log.Error("refund retry", "err", err)
		} else if n > 0 {
			log.Info("refund retry settled refund parts whose outcome was unknown", "count", n)
		}
	}
}
