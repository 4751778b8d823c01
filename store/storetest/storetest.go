// Package storetest opens real, migrated databases for tests: a SQLite file
// in t.TempDir() (never a pooled :memory:), or a fresh database (else a
// fresh schema) of the PostgreSQL named by PORTAL_TEST_POSTGRES. Packages
// whose tests must hold on both engines run them twice from TestMain with
// Main: the same tests are the conformance suite of both.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for creating test databases and schemas

	"gpuportal"
	"gpuportal/store"

	"golang.org/x/crypto/bcrypt"
)

func init() {
	// Cheap password hashes: tests log in hundreds of times under -race.
	gpuportal.PasswordCost = bcrypt.MinCost
}

// Shanghai is the default site time zone.
var Shanghai, _ = time.LoadLocation("Asia/Shanghai")

// Epoch is where test clocks start: Monday 2026-11-30 00:00 UTC
// (08:00 in Asia/Shanghai).
var Epoch = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// engine is the engine Open uses in this run of the tests: "sqlite", or
// "postgres" during Main's second run.
var engine = "sqlite"

// Engine names the engine this run of the tests is on.
func Engine() string { return engine }

// PostgresEnv names the variable holding the URL of a PostgreSQL the tests
// may create databases in (or, failing that, schemas).
const PostgresEnv = "PORTAL_TEST_POSTGRES"

func postgresURL() (string, bool) {
	u := os.Getenv(PostgresEnv)
	return u, u != ""
}

// DSN returns the address of a new, empty database of this run's engine,
// removed when the test ends.
func DSN(tb testing.TB) string {
	tb.Helper()
	if engine == "postgres" {
		return PostgresDSN(tb)
	}
	return filepath.Join(tb.TempDir(), "portal.db")
}

// PostgresDSN returns the URL of a new, empty schema in the PostgreSQL of
// PORTAL_TEST_POSTGRES (dropped when the test ends), for tests about
// PostgreSQL itself. Without the variable the test is skipped, except
// under CI=true, where it fails.
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	base, ok := postgresURL()
	if !ok {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s is not set; CI=true requires the PostgreSQL tests", PostgresEnv)
		}
		tb.Skipf("PostgreSQL test skipped: %s is not set (e.g. postgres://postgres@127.0.0.1:5432/test)", PostgresEnv)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	schema := randomName("test_")
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		tb.Fatalf("create schema in %s: %v", PostgresEnv, err)
	}
	tb.Cleanup(func() {
		admin, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer admin.Close()
		if _, err := admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			tb.Logf("drop test schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("%s: %v", PostgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Open returns a new, migrated database of this run's engine, closed when
// the test ends, with a manual business clock at Epoch.
//
// The new database is a copy of one migrated once per test process (a
// file's bytes on SQLite, a template database on PostgreSQL): applying the
// migrations (52 of them) takes a quarter of a second of CPU under -race on SQLite
// and a third of a second of the server's on PostgreSQL, and the suites
// open a database in nearly every test.
func Open(tb testing.TB) (*store.DB, *gpuportal.ManualClock) {
	tb.Helper()
	if engine == "postgres" {
		return OpenAt(tb, migratedPostgres(tb))
	}
	dsn := DSN(tb)
	if err := os.WriteFile(dsn, migratedSQLite(tb), 0o600); err != nil {
		tb.Fatal(err)
	}
	return OpenAt(tb, dsn)
}

// sqliteTemplate holds the bytes of a SQLite file with every migration
// applied, made on first use.
var sqliteTemplate struct {
	sync.Mutex
	file []byte
}

// migratedSQLite returns the template file's bytes, making it on first use:
// a database migrated the way OpenAt migrates, then closed (closing the
// last connection checkpoints the WAL into the file and removes it).
func migratedSQLite(tb testing.TB) []byte {
	tb.Helper()
	sqliteTemplate.Lock()
	defer sqliteTemplate.Unlock()
	if sqliteTemplate.file != nil {
		return sqliteTemplate.file
	}
	dir, err := os.MkdirTemp("", "storetest-template-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "portal.db")
	file, err := migrateAndRead(path)
	if err != nil {
		tb.Fatalf("storetest: migrated template: %v", err)
	}
	sqliteTemplate.file = file
	return file
}

// pgTemplate is the migrated database Open copies on PostgreSQL, made on
// first use and dropped at the end of Main. Where the role may not create
// databases, noCreate is set and Open migrates a schema of its own instead.
var pgTemplate struct {
	sync.Mutex
	admin    *sql.DB
	name     string
	noCreate bool
}

// migratedPostgres returns the URL of a new database copied from the
// migrated template (CREATE DATABASE … TEMPLATE), dropped when the test
// ends.
func migratedPostgres(tb testing.TB) string {
	tb.Helper()
	base, ok := postgresURL()
	if !ok {
		return PostgresDSN(tb) // skips, or fails under CI
	}
	admin, template, err := postgresTemplate(base)
	if err != nil {
		tb.Fatalf("storetest: migrated template database: %v", err)
	}
	if admin == nil {
		return PostgresDSN(tb)
	}
	name := randomName("gpuportal_test_")
	if _, err := admin.Exec(`CREATE DATABASE ` + name + ` TEMPLATE ` + template); err != nil {
		tb.Fatalf("storetest: copy the template database: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := admin.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`); err != nil {
			tb.Logf("drop test database %s: %v", name, err)
		}
	})
	return databaseURL(base, name)
}

// postgresTemplate returns a connection able to create databases and the
// name of the migrated template, making it on first use; a nil connection
// where the role may not create databases.
func postgresTemplate(base string) (*sql.DB, string, error) {
	pgTemplate.Lock()
	defer pgTemplate.Unlock()
	if pgTemplate.name != "" || pgTemplate.noCreate {
		return pgTemplate.admin, pgTemplate.name, nil
	}
	if _, err := url.Parse(base); err != nil {
		return nil, "", fmt.Errorf("%s: %w", PostgresEnv, err)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return nil, "", err
	}
	name := randomName("gpuportal_template_")
	if _, err := admin.Exec(`CREATE DATABASE ` + name); err != nil {
		admin.Close()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			pgTemplate.noCreate = true
			return nil, "", nil
		}
		return nil, "", err
	}
	ctx := context.Background()
	db, err := store.Open(ctx, databaseURL(base, name), gpuportal.NewManualClock(Epoch))
	if err == nil {
		db.Location = Shanghai
		_, err = db.Migrate(ctx)
		// No connection may stay on a template while it is copied.
		db.Close()
	}
	if err != nil {
		_, _ = admin.Exec(`DROP DATABASE ` + name + ` WITH (FORCE)`)
		admin.Close()
		return nil, "", err
	}
	pgTemplate.admin, pgTemplate.name = admin, name
	return admin, name, nil
}

// dropPostgresTemplate drops the template database, if one was made.
func dropPostgresTemplate() {
	pgTemplate.Lock()
	defer pgTemplate.Unlock()
	if pgTemplate.name == "" {
		return
	}
	if _, err := pgTemplate.admin.Exec(`DROP DATABASE ` + pgTemplate.name + ` WITH (FORCE)`); err != nil {
		fmt.Printf("storetest: drop template database %s: %v\n", pgTemplate.name, err)
	}
	pgTemplate.admin.Close()
	pgTemplate.admin, pgTemplate.name = nil, ""
}

// databaseURL is base naming another database on the same server (base
// parses: postgresTemplate checked it).
func databaseURL(base, name string) string {
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String()
}

func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func migrateAndRead(path string) ([]byte, error) {
	ctx := context.Background()
	db, err := store.Open(ctx, path, gpuportal.NewManualClock(Epoch))
	if err != nil {
		return nil, err
	}
	db.Location = Shanghai
	if _, err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		return nil, fmt.Errorf("%s-wal is left after closing: the file alone is not the database", path)
	}
	return os.ReadFile(path)
}

// OpenAt is Open on a database the test chose (a file on a small disk, a
// PostgreSQL URL with parameters of its own).
func OpenAt(tb testing.TB, dsn string) (*store.DB, *gpuportal.ManualClock) {
	tb.Helper()
	clock := gpuportal.NewManualClock(Epoch)
	db, err := store.Open(context.Background(), dsn, clock)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	db.Location = Shanghai
	if _, err := db.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return db, clock
}

// MustCreateUser creates a customer (or admin) for a test, with
// TestBalance in the account so that what the test books and runs is paid,
// and TestQuotas (tests about money and quotas start from
// MustCreatePoorUser).
func MustCreateUser(tb testing.TB, db *store.DB, email, role string) *gpuportal.User {
	tb.Helper()
	u := MustCreatePoorUser(tb, db, email, role)
	if _, err := db.Credit(context.Background(), nil, u.ID, gpuportal.CreditRequest{Amount: TestBalance, Note: "test balance"}); err != nil {
		tb.Fatal(err)
	}
	// Room for what fleet-sized tests run and book (quota tests start from
	// MustCreatePoorUser, with the defaults).
	system := &gpuportal.User{Role: gpuportal.RoleAdmin}
	if _, err := db.UpdateAccount(context.Background(), system, u.ID, store.AccountUpdate{Quotas: &TestQuotas}); err != nil {
		tb.Fatal(err)
	}
	return u
}

// TestQuotas are MustCreateUser's quotas: more than any test needs.
var TestQuotas = gpuportal.Quotas{MaxRunningGPUs: 100_000, MaxBookedGPUHours: 100_000_000, MaxWaitlistEntries: 10_000, MaxQueuedTasks: 1_000_000}

// TestBalance is what MustCreateUser puts in each account: ¥10,000,000.
const TestBalance gpuportal.Fen = gpuportal.MaxCredit

// MustCreatePoorUser creates a user with nothing in their account.
func MustCreatePoorUser(tb testing.TB, db *store.DB, email, role string) *gpuportal.User {
	tb.Helper()
	u, err := db.CreateUser(context.Background(), gpuportal.SignUp{Email: email, Password: "correct-horse-battery", Name: "Test " + email}, role, "")
	if err != nil {
		tb.Fatal(err)
	}
	// Test users' addresses count as verified (verification has tests of
	// its own).
	if err := db.SetContactsVerified(context.Background(), u.ID); err != nil {
		tb.Fatal(err)
	}
	u.EmailVerified = true
	return u
}

// Password is the password MustCreateUser gives every user.
const Password = "correct-horse-battery"

// nvmlName is what NVML calls a model's devices (go-nvml's dgx mocks say
// the same).
func nvmlName(model string) string {
	switch model {
	case "a100-80g":
		return "NVIDIA A100-SXM4-80GB"
	case "h100-80g":
		return "NVIDIA H100 80GB HBM3"
	}
	return model
}

// AddFleet adds nodes × perNode healthy GPUs of a model in a region, with
// node ids "<prefix>-1", "<prefix>-2", … and returns the nodes.
func AddFleet(tb testing.TB, db *store.DB, prefix, region, model string, nodes, perNode int) []gpuportal.Node {
	tb.Helper()
	var out []gpuportal.Node
	for i := 1; i <= nodes; i++ {
		n := gpuportal.Node{ID: fmt.Sprintf("%s-%d", prefix, i), Hostname: fmt.Sprintf("%s-%d.example", prefix, i), Region: region, State: gpuportal.NodeOnline}
		for j := 0; j < perNode; j++ {
			n.GPUs = append(n.GPUs, gpuportal.GPU{UUID: fmt.Sprintf("GPU-%s-%d-%d", prefix, i, j), Index: j, Model: model, Name: nvmlName(model), Healthy: true, MemoryTotalMiB: 81920})
		}
		if err := db.AddNode(context.Background(), n); err != nil {
			tb.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}
