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
