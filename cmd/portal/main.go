// Command portal runs gpuportal's web portal, JSON API and scheduler, and
// administers its database (migrate, admin create).
//
// This file is wiring only: flags and environment → components → run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"gpuportal"
	"gpuportal/notify"
	"gpuportal/scheduler"
	"gpuportal/sessions"
	"gpuportal/store"
	"gpuportal/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "portal:", err)
		}
		os.Exit(1)
	}
}

// run is main without the process: tests call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, args, getenv, stdout, stderr)
	case "migrate-data":
		return runMigrateData(ctx, args, stdout, stderr)
	case "admin":
		return runAdmin(ctx, args, getenv, stdout, stderr)
	case "enroll-token":
		return runEnrollToken(ctx, args, getenv, stdout, stderr)
	case "simulate":
		return runSimulate(ctx, args, getenv, stdout, stderr)
	case "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

const usage = `usage:
  portal [serve] [flags]                 run the portal (portal serve -h lists the flags)
  portal migrate [--db PATH|URL]         apply pending database migrations
  portal migrate-data --from PATH --to postgres://…
                                         copy a SQLite installation into a new PostgreSQL database
  portal admin create --email E --password P [--name N] [--promote]
                                         create an admin, or reset an admin's password;
                                         --promote makes an existing customer account an admin
  portal enroll-token --region R         print a one-time token that enrols one node
  portal simulate --scenario demo|peak|FILE.json [--days N] [--policies FILE.json] [--scale K]
                                         replay demand through the real planner on a throwaway
                                         store and report utilisation, revenue, interruptions`

// dbFlags are the flags every command that opens the database shares.
type dbFlags struct {
	db       string
	timezone string
}

func (f *dbFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&f.db, "db", envOr(getenv, "PORTAL_DB", "data/portal.db"), "SQLite file path or postgres:// URL (env PORTAL_DB)")
	fs.StringVar(&f.timezone, "timezone", envOr(getenv, "PORTAL_TIMEZONE", "Asia/Shanghai"), "site time zone for off-peak windows, calendars and reminders (env PORTAL_TIMEZONE)")
}

func (f *dbFlags) open(ctx context.Context, clock gpuportal.Clock) (*store.DB, error) {
	if !strings.Contains(f.db, "://") {
		if dir := filepath.Dir(f.db); dir != "." {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("create database directory: %w", err)
			}
		}
	}
	return store.Open(ctx, f.db, clock)
}

// redacted is the database address fit for logs (no password).
func (f *dbFlags) redacted() string { return gpuportal.RedactURL(f.db) }

// demoAgentsDir is where --demo keeps its simulated nodes' state: beside
// a SQLite file, or under data/ for PostgreSQL.
func (f *dbFlags) demoAgentsDir() string {
	if strings.Contains(f.db, "://") {
		return filepath.Join("data", "demo-agents")
	}
	return filepath.Join(filepath.Dir(f.db), "demo-agents")
}

// minSecretBytes is the least PORTAL_SECRET accepted: the session keys
// are derived from it, so it must be as strong as a 256-bit key.
const minSecretBytes = 32

// envDuration reads a duration from the environment, or fallback when it
// is unset.
func envDuration(getenv func(string) string, key string, fallback time.Duration) (time.Duration, error) {
	raw := getenv(key)
	if raw == "" {
		return fallback, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return d, nil
}

func envOr(getenv func(string) string, key, fallback string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return fallback
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("portal serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dbf dbFlags
	dbf.register(fs, getenv)
	addr := fs.String("addr", envOr(getenv, "PORTAL_ADDR", "127.0.0.1:8080"), "listen address (env PORTAL_ADDR)")
	demo := fs.Bool("demo", false, "seed demo accounts and a demo fleet of simulated nodes, and print the logins")
	demoAgents := fs.String("demo-agent", defaultAgentBinary(), "with --demo: the agent binary that runs the simulated nodes (empty: seed the fleet without agents)")
	migrate := fs.Bool("migrate", false, "apply pending migrations before serving (a new, empty database is always migrated)")
	stripeMethods := fs.String("stripe-payment-methods", envOr(getenv, "PORTAL_STRIPE_PAYMENT_METHODS", "card,alipay,wechat_pay"), "with Stripe: the payment methods Checkout offers, comma-separated (env PORTAL_STRIPE_PAYMENT_METHODS)")
	stripeAPI := fs.String("stripe-api-url", getenv("PORTAL_STRIPE_API_URL"), "with Stripe: the API's address (default Stripe's own; env PORTAL_STRIPE_API_URL)")
	testPayments := fs.Bool("test-payments", envOr(getenv, "PORTAL_TEST_PAYMENTS", "") == "1", "turn on the built-in test payment provider, whose checkout page credits any top-up at the press of a button — for demos and tests only, never with real customers (env PORTAL_TEST_PAYMENTS=1; --demo turns it on)")
	testClock := fs.Bool("test-clock", false, "use a manual business clock that admins can move (POST /api/v1/admin/clock)")
	nowFlag := fs.String("now", "", "with --test-clock: start the clock at this RFC 3339 time (default: the real time)")
	logLevel := fs.String("log-level", envOr(getenv, "PORTAL_LOG_LEVEL", "info"), "debug, info, warn or error (env PORTAL_LOG_LEVEL)")
	publicURL := fs.String("public-url", getenv("PORTAL_PUBLIC_URL"), "the portal's address as users reach it, for links in emails and SMS and calendar UIDs (env PORTAL_PUBLIC_URL; default http://<addr>)")
	trustedProxies := fs.String("trusted-proxies", getenv("PORTAL_TRUSTED_PROXIES"), "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For/-Proto are believed (env PORTAL_TRUSTED_PROXIES; default none)")
	metricsAllow := fs.String("metrics-allow", getenv("PORTAL_METRICS_ALLOW"), "comma-separated addresses or CIDRs allowed to read /metrics (env PORTAL_METRICS_ALLOW; default everyone)")
	sshAddr := fs.String("ssh-addr", envOr(getenv, "PORTAL_SSH_ADDR", "127.0.0.1:2222"), "where the SSH gateway into instances listens (ssh -p PORT <instance id>@host); empty: no gateway (env PORTAL_SSH_ADDR)")
	proxyDomain := fs.String("proxy-domain", envOr(getenv, "PORTAL_PROXY_DOMAIN", "localhost"), "web apps in instances are served at http://<instance id>-<port>.DOMAIN[:<port>]/ (production: a wildcard DNS name and certificate such as apps.example.com; the default localhost works in browsers on this machine) (env PORTAL_PROXY_DOMAIN)")
	agentURL := fs.String("agent-url", getenv("PORTAL_AGENT_URL"), "this portal's own address as agents reach it, for the session streams they open (set it on each portal when several share a PostgreSQL database; default: the --portal agents were given) (env PORTAL_AGENT_URL)")
	defaultTTL, err := envDuration(getenv, "PORTAL_ENROLLMENT_TOKEN_TTL", 24*time.Hour)
	if err != nil {
		return err
	}
	enrollTTL := fs.Duration("enrollment-token-ttl", defaultTTL, "how long a node enrollment token works (env PORTAL_ENROLLMENT_TOKEN_TTL)")
	defaultGrace, err := envDuration(getenv, "PORTAL_NODE_LIVENESS_GRACE", gpuportal.AgentBackoffCap)
	if err != nil {
		return err
	}
	livenessGrace := fs.Duration("node-liveness-grace", defaultGrace, "after the portal starts leading, how long (beyond three heartbeats) nodes have to reach it before missed heartbeats take them offline; at least the agents' retry cap (env PORTAL_NODE_LIVENESS_GRACE)")
	fs.Usage = func() {
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	if secret := getenv("PORTAL_SECRET"); secret != "" && len(secret) < minSecretBytes {
		return fmt.Errorf("PORTAL_SECRET is %d bytes; it must be at least %d (e.g. openssl rand -base64 48)", len(secret), minSecretBytes)
	}
	proxies, err := web.ParseCIDRs(*trustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	metricsNets, err := web.ParseCIDRs(*metricsAllow)
	if err != nil {
		return fmt.Errorf("--metrics-allow: %w", err)
	}
	paymentSecret := getenv("PORTAL_PAYMENT_SECRET")
	if paymentSecret != "" && len(paymentSecret) < minSecretBytes {
		return fmt.Errorf("PORTAL_PAYMENT_SECRET is %d bytes; it must be at least %d", len(paymentSecret), minSecretBytes)
	}
	var stripeCfg *web.StripeConfig
	if key, hook := getenv("PORTAL_STRIPE_SECRET_KEY"), getenv("PORTAL_STRIPE_WEBHOOK_SECRET"); key != "" || hook != "" {
		if key == "" || hook == "" {
			return errors.New("PORTAL_STRIPE_SECRET_KEY and PORTAL_STRIPE_WEBHOOK_SECRET go together")
		}
		stripeCfg = &web.StripeConfig{SecretKey: key, WebhookSecret: hook, APIURL: *stripeAPI}
		for m := range strings.SplitSeq(*stripeMethods, ",") {
			switch m = strings.TrimSpace(m); m {
			case "card", "alipay", "wechat_pay":
				stripeCfg.PaymentMethods = append(stripeCfg.PaymentMethods, m)
			case "":
			default:
				return fmt.Errorf("--stripe-payment-methods: unknown method %q (card, alipay, wechat_pay)", m)
			}
		}
	}
	if *demo {
		*testPayments = true
	}
	if *testPayments && !*demo {
		log.Warn("TEST PAYMENTS ARE ON: any signed-in user can credit their own balance with the test provider's confirm button; never run this with real customers", "flag", "--test-payments")
	}
	if paymentSecret != "" && !*testPayments {
		log.Warn("PORTAL_PAYMENT_SECRET is set but no payment provider uses it: the test provider needs --test-payments; top-ups stay off")
	}
	if *enrollTTL <= 0 {
		return errors.New("--enrollment-token-ttl must be positive")
	}
	if *livenessGrace < 0 {
		return errors.New("--node-liveness-grace must not be negative")
	}
	loc, err := time.LoadLocation(dbf.timezone)
	if err != nil {
		return fmt.Errorf("--timezone %q: %w", dbf.timezone, err)
	}

	var clock gpuportal.Clock = gpuportal.RealClock{}
	var manual *gpuportal.ManualClock
	if *testClock {
		start := time.Now()
		if *nowFlag != "" {
			if start, err = time.Parse(time.RFC3339, *nowFlag); err != nil {
				return fmt.Errorf("--now: %w", err)
			}
		}
		manual = gpuportal.NewManualClock(start)
		clock = manual
	} else if *nowFlag != "" {
		return errors.New("--now needs --test-clock")
	}

	db, err := dbf.open(ctx, clock)
	if err != nil {
		return err
	}
	defer db.Close()
	db.Location = loc
	db.EnrollmentTokenTTL = *enrollTTL
	if err := prepareSchema(ctx, db, *migrate, log); err != nil {
		return err
	}
	if email, pw := getenv("PORTAL_ADMIN_EMAIL"), getenv("PORTAL_ADMIN_PASSWORD"); email != "" || pw != "" {
		if email == "" || pw == "" {
			return errors.New("PORTAL_ADMIN_EMAIL and PORTAL_ADMIN_PASSWORD go together")
		}
		if _, err := db.EnsureAdmin(ctx, email, pw, "", getenv("PORTAL_ADMIN_PROMOTE") == "1"); err != nil {
			return fmt.Errorf("PORTAL_ADMIN_EMAIL: %s", gpuportal.ErrorMessage(err))
		}
		log.Info("admin ensured", "email", email)
	}

	dispatcher, err := newDispatcher(db, getenv, log, loc)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	url := "http://" + l.Addr().String()
	if *publicURL == "" {
		*publicURL = url
	}
	dispatcher.BaseURL = *publicURL
	sched := scheduler.New(db, clock, gpuportal.RealClock{}, log)
	sched.LivenessGrace = *livenessGrace
	hub := sessions.NewHub(db, *agentURL, log)
	defer hub.Close()
	sshEndpoint, stopGateway, err := startGateway(ctx, hub, db, *sshAddr, *publicURL, log)
	if err != nil {
		l.Close()
		return err
	}
	defer stopGateway()
	srv, err := web.New(ctx, web.Config{
		Hub: hub, SSH: sshEndpoint, ProxyDomain: *proxyDomain,
		DB: db, Logger: log, Clock: clock, TestClock: manual, Location: loc, Secret: getenv("PORTAL_SECRET"), Scheduler: sched,
		TrustedProxies: proxies, MetricsAllow: metricsNets, PublicURL: *publicURL, TestPayments: *testPayments, PaymentSecret: paymentSecret, Stripe: stripeCfg,
	})
	if err != nil {
		l.Close()
		return err
	}
	if *demo {
		if err := seedDemo(ctx, db, stdout, url); err != nil {
			l.Close()
			return fmt.Errorf("demo: %w", err)
		}
	}
	log.Info("portal listening", "url", url, "db", dbf.redacted(), "timezone", loc.String(), "test_clock", *testClock)
	fmt.Fprintf(stdout, "portal listening on %s\n", url)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	schedCtx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	go func() { sched.Run(schedCtx); close(schedDone) }()
	dispatchDone := make(chan struct{})
	go func() { dispatcher.Run(schedCtx); close(dispatchDone) }()
	reconcileDone := make(chan struct{})
	go func() { reconcilePayments(schedCtx, srv, log); close(reconcileDone) }()
	defer func() { stopSched(); <-schedDone; <-dispatchDone; <-reconcileDone }()
	if *demo && *demoAgents != "" {
		stopAgents, err := startDemoAgents(ctx, db, url, *demoAgents, dbf.demoAgentsDir(), log)
		if err != nil {
			log.Warn("demo fleet not started", "err", err)
		} else {
			defer stopAgents()
		}
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return <-errc
}

// reconcilePayments asks the payment providers every minute about
// top-ups whose webhook may have been lost (see web.ReconcilePayments).
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
	}
}

// prepareSchema migrates a new database, and an old one only when told to;
// otherwise it refuses to run on a schema this build does not expect.
func prepareSchema(ctx context.Context, db *store.DB, migrate bool, log *slog.Logger) error {
	empty, err := db.IsEmpty(ctx)
	if err != nil {
		return err
	}
	if empty || migrate {
		n, err := db.Migrate(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			log.Info("database migrated", "applied", n)
		}
	}
	return db.CheckSchema(ctx)
}

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("portal migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dbf dbFlags
	dbf.register(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := dbf.open(ctx, gpuportal.RealClock{})
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	have, _, err := db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "applied %d migration(s); schema is at version %d\n", n, have)
	return nil
}

// runMigrateData moves a SQLite installation to PostgreSQL: it migrates
// both to this build's schema, then copies every row in one transaction.
func runMigrateData(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("portal migrate-data", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the SQLite database file to copy (stop its portal first)")
	to := fs.String("to", "", "the postgres:// URL of a new database to fill")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from == "" || strings.Contains(*from, "://") {
		return errors.New("--from: the path of the SQLite database file")
	}
	if !store.IsPostgresURL(*to) {
		return errors.New("--to: a postgres:// URL")
	}
	if _, err := os.Stat(*from); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	src, err := store.Open(ctx, *from, gpuportal.RealClock{})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := store.Open(ctx, *to, gpuportal.RealClock{})
	if err != nil {
		return err
	}
	defer dst.Close()
	for _, db := range []*store.DB{src, dst} {
		if _, err := db.Migrate(ctx); err != nil {
			return err
		}
	}
	copied, err := store.CopyAll(ctx, src, dst)
	if err != nil {
		return err
	}
	tables := slices.Sorted(maps.Keys(copied))
	var total int64
	for _, t := range tables {
		fmt.Fprintf(stdout, "%-20s %8d rows\n", t, copied[t])
		total += copied[t]
	}
	fmt.Fprintf(stdout, "copied %d rows in %d tables; start the portals with --db set to the --to URL\n", total, len(tables))
	return nil
}

func runAdmin(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return fmt.Errorf("usage: portal admin create --email E --password P [--name N] [--promote]")
	}
	fs := flag.NewFlagSet("portal admin create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dbf dbFlags
	dbf.register(fs, getenv)
	email := fs.String("email", "", "admin email (required)")
	password := fs.String("password", "", "admin password, at least 10 characters (required)")
	name := fs.String("name", "Administrator", "display name")
	promote := fs.Bool("promote", false, "promote an existing customer account with this email (ends its sessions, revokes its API tokens)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	db, err := dbf.open(ctx, gpuportal.RealClock{})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.CheckSchema(ctx); err != nil {
		return err
	}
	u, err := db.EnsureAdmin(ctx, *email, *password, *name, *promote)
	if err != nil {
		return cliError(err)
	}
	fmt.Fprintf(stdout, "admin %s (id %d) is ready\n", u.Email, u.ID)
	return nil
}

func runEnrollToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("portal enroll-token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dbf dbFlags
	dbf.register(fs, getenv)
	region := fs.String("region", "", "the region the node will belong to (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := dbf.open(ctx, gpuportal.RealClock{})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.CheckSchema(ctx); err != nil {
		return err
	}
	tok, err := db.CreateEnrollmentToken(ctx, nil, *region)
	if err != nil {
		return cliError(err)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// newDispatcher configures email and SMS from the environment and tells the
// store which channels to write to the outbox.
func newDispatcher(db *store.DB, getenv func(string) string, log *slog.Logger, loc *time.Location) (*notify.Dispatcher, error) {
	d := &notify.Dispatcher{DB: db, Log: log, Location: loc}
	db.Channels = map[string]bool{}
	if raw := getenv("PORTAL_SMTP_URL"); raw != "" {
		smtp, err := notify.NewSMTPSender(raw)
		if err != nil {
			return nil, err
		}
		d.Email = smtp
		db.Channels[gpuportal.ChannelEmail] = true
	}
	if raw := getenv("PORTAL_SMS_URL"); raw != "" {
		if getenv("PORTAL_SMS_SECRET") == "" {
			return nil, errors.New("PORTAL_SMS_URL needs PORTAL_SMS_SECRET to sign the requests")
		}
		d.SMS = &notify.SMSSender{URL: raw, Secret: getenv("PORTAL_SMS_SECRET")}
		db.Channels[gpuportal.ChannelSMS] = true
	}
	return d, nil
}

// startGateway opens the SSH gateway on addr ("" : none) and says how
// customers reach it: the public URL's host name, the bound port.
func startGateway(ctx context.Context, hub *sessions.Hub, db *store.DB, addr, publicURL string, log *slog.Logger) (web.SSHEndpoint, func(), error) {
	if addr == "" {
		log.Info("no SSH gateway (--ssh-addr is empty)")
		return web.SSHEndpoint{}, func() {}, nil
	}
	gw, err := sessions.NewGateway(ctx, hub, db, log)
	if err != nil {
		return web.SSHEndpoint{}, nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return web.SSHEndpoint{}, nil, fmt.Errorf("--ssh-addr: %w", err)
	}
	host := "localhost"
	if u, err := neturl.Parse(publicURL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	ep := web.SSHEndpoint{Host: host, Port: l.Addr().(*net.TCPAddr).Port, Fingerprint: gw.Fingerprint}
	log.Info("ssh gateway listening", "addr", l.Addr().String(), "host_key", gw.Fingerprint)
	go func() {
		if err := gw.Serve(l); err != nil {
			log.Error("ssh gateway", "err", err)
		}
	}()
	return ep, func() { _ = gw.Close() }, nil
}

// cliError is what a command prints for err: a refusal's own message
// (bad input, a name taken), and anything else with its cause — never
// flattened to "Internal error.".
func cliError(err error) error {
	var e *gpuportal.Error
	if errors.As(err, &e) {
		return errors.New(e.Message)
	}
	return err
}
