// Package store persists gpuportal's data: SQLite by default (one file, WAL)
// and PostgreSQL when one machine is not enough. It implements persistence
// and the transactions that keep the rules true (no overbooking); the rules
// themselves are pure functions in package gpuportal.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"gpuportal"
	"gpuportal/migrations"
	"gpuportal/plan"

	"github.com/jackc/pgx/v5"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver ("sqlite")
)

// DB is the portal's database. Writes go through one connection (SQLite has
// one writer; queuing in Go is cheaper than busy-waiting in SQLite), reads
// through a pool.
type DB struct {
	write   *sql.DB
	read    *sql.DB
	dialect string
	// Clock is business time; every timestamp the store writes comes from it.
	Clock gpuportal.Clock
	// Location is the site time zone (off-peak windows are local hours).
	Location *time.Location
	// Planner decides each tick (plan.Plan when nil).
	Planner Planner
	// VictimRule is how the scheduler picks spot instances to interrupt
	// (gpuportal.VictimsByWorkLost when empty); `portal simulate` sets it
	// to compare the rules.
	VictimRule string
	// Wakeups wakes agents whose desired state changed.
	Wakeups *Wakeups
	// Wall is real time, for what agents enforce in their own clocks
	// (the notice they are given counts from the real moment it was issued).
	Wall gpuportal.Clock

	// Channels are the notification channels the portal can send (email
	// with PORTAL_SMTP_URL, sms with PORTAL_SMS_URL); in-app always works.
	Channels map[string]bool
	// EnrollmentTokenTTL is how long a node enrollment token works (default
	// a day).
	EnrollmentTokenTTL time.Duration

	// PostgreSQL only: the connection settings (for the listener and the
	// scheduler lock's own connections), the kicks other portals send,
	// and the listener's lifetime.
	pgConfig      *pgx.ConnConfig
	writerKey     int64 // advisory lock keys, see advisoryKey
	leaderKey     int64
	wakeupChannel string // notification channels, see channelName
	kickChannel   string
	kicks         chan struct{}
	// SQLite only: the write transactions' group commit.
	group         *groupCommitter
	stopListening context.CancelFunc
	listening     chan struct{}

	// writesFailing is set while writes fail for want of space (see
	// writehealth.go).
	writesFailing atomic.Bool

	// Kept between ticks (kept.go): the pools' usable GPUs (gpulists.go)
	// and the GPUs of the active reservations (snapshot.go).
	gpuLists     kept[plan.PoolKey, []plan.GPU]
	reservedGPUs kept[struct{}, map[string]int64]
	// Each account's live runs summed, kept per account (accountsums.go).
	accountSums accountSums

	// decisionFault fails chosen tick decisions (tests only; decisions.go).
	decisionFault decisionFault
}

// Open opens the database named by dsn: a SQLite file path (created if
// missing) or a postgres:// URL. It does not migrate; see Migrate and
// CheckSchema.
func Open(ctx context.Context, dsn string, clock gpuportal.Clock) (*DB, error) {
	if clock == nil {
		clock = gpuportal.RealClock{}
	}
	if IsPostgresURL(dsn) {
		return openPostgres(ctx, dsn, clock)
	}
	return openSQLite(ctx, dsn, clock, false)
}

// OpenScratch opens a throwaway SQLite store, for the simulator, held in
// memory: nothing of it is ever on disk, so a write costs no system call
// (a simulated day of 960 GPUs: 7.9 s on a WAL file, 5.2 s in memory),
// and it is gone when closed. Without a disk to wait for, commits are not
// grouped either (group commit shares one fsync among the writes that
// arrive together; here it would only add a goroutine handoff and a
// savepoint per write).
func OpenScratch(ctx context.Context, clock gpuportal.Clock) (*DB, error) {
	// SQLite's memdb VFS shares a database among the connections of one
	// process that open the same name starting with "/"; each scratch
	// store has a name of its own.
	name := fmt.Sprintf("/gpuportal-scratch-%d", scratchStores.Add(1))
	return openSQLite(ctx, name, clock, true)
}

var scratchStores atomic.Int64

func openSQLite(ctx context.Context, path string, clock gpuportal.Clock, scratch bool) (*DB, error) {
	if path == "" {
		return nil, errors.New("open sqlite: empty path")
	}
	// Pragmas are set per connection through the DSN so every pooled
	// connection has them: foreign keys on, a busy timeout instead of
	// instant SQLITE_BUSY errors, and WAL for concurrent readers.
	pragmas := "_pragma=" + url.QueryEscape("busy_timeout(10000)") +
		"&_pragma=" + url.QueryEscape("foreign_keys(ON)")
	if scratch {
		// In memory there is no WAL (nor a disk to sync): the rollback
		// journal is kept in memory too.
		pragmas = "vfs=memdb&" + pragmas + "&_pragma=" + url.QueryEscape("journal_mode(MEMORY)")
	} else {
		pragmas += "&_pragma=" + url.QueryEscape("journal_mode(WAL)") +
			"&_pragma=" + url.QueryEscape("synchronous(FULL)") + // a commit is on disk before it is answered (see groupcommit.go)
			// After a checkpoint the WAL is cut back to 64 MiB: without a
			// limit it keeps its largest size for ever, and a disk that
			// filled once fills again at once.
			"&_pragma=" + url.QueryEscape("journal_size_limit(67108864)")
	}
	// The path is part of a URI: characters that mean something there
	// (%, ?, #) are escaped.
	base := "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path) + "?" + pragmas
	// IMMEDIATE takes the write lock at BEGIN, so a read-then-write
	// transaction (check capacity, then insert) cannot be overtaken.
	write, err := sql.Open(sqliteDriver, base+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetConnMaxIdleTime(0)
	read, err := sql.Open(sqliteDriver, base+"&"+"_pragma="+url.QueryEscape("query_only(ON)"))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	db := &DB{write: write, read: read, dialect: "sqlite", Clock: clock, Location: time.UTC, Wakeups: NewWakeups(), Wall: gpuportal.RealClock{}, kicks: make(chan struct{}, 1)}
	if !scratch {
		db.group = newGroupCommitter(write)
	}
	if err := write.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// Close closes the database.
func (db *DB) Close() error {
	if db.group != nil {
		db.group.close()
	}
	if db.stopListening != nil {
		db.stopListening()
		<-db.listening
	}
	if db.read == db.write {
		return db.write.Close()
	}
	return errors.Join(db.read.Close(), db.write.Close())
}

// Dialect names the engine: "sqlite" or "postgres".
func (db *DB) Dialect() string { return db.dialect }

func (db *DB) now() time.Time { return db.Clock.Now() }

// inTx runs fn in a write transaction, committing when fn returns nil.
// Write transactions run one at a time: SQLite has one writer connection,
// and on PostgreSQL each takes the writer advisory lock first, so the same
// holds across every portal on the database.
//
// op names the write ("book", "cancel job"): an error it fails with, other
// than a refusal, starts with it (see named).
func (db *DB) inTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	return db.runTx(ctx, op, db.dialect == "postgres", 1, fn)
}

// kickAfter kicks the scheduler when err is nil: the write methods whose
// commit makes something due (see Kick) end with it, so that no caller has
// to remember to.
func (db *DB) kickAfter(ctx context.Context, err error) error {
	if err == nil {
		db.Kick(ctx)
	}
	return err
}

// inConcurrentTx runs fn in a write transaction that, on PostgreSQL, does
// not take the writer lock: for transactions whose correctness rests on
// row locks and conditional updates alone (a booking takes its hours with
// one conditional UPDATE per hour row, which PostgreSQL re-checks against
// the latest committed row when two bookings meet), so bookings on several
// portals run side by side. Two of them that deadlock on the same hours are
// retried. On SQLite it is inTx.
func (db *DB) inConcurrentTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if db.dialect != "postgres" {
		return db.inTx(ctx, op, fn)
	}
	return db.runTx(ctx, op, false, 3, fn)
}

// lostConnectionPatience is how long a transaction cut short by a lost
// PostgreSQL connection (before its commit) keeps being run again: long
// enough to ride out a server restart or a storm of terminated backends,
// short enough that a request does not hang on a database that is gone.
// Between runs it waits a little longer each time (lostConnectionBackoff).
const lostConnectionPatience = 15 * time.Second

func lostConnectionBackoff(lost int) time.Duration {
	return min(time.Duration(lost)*10*time.Millisecond, 250*time.Millisecond)
}

// runTx runs fn in a transaction (after taking the writer lock, if asked),
// up to attempts times while it fails only for meeting another one.
func (db *DB) runTx(ctx context.Context, op string, writerLock bool, attempts int, fn func(tx *sql.Tx) error) error {
	return named(op, db.noteWrite(db.runTxOnce(ctx, writerLock, attempts, fn)))
}

// named puts the name of the write that failed before its error, so that
// a logged internal error says which write it was (and, through the
// helpers' own prefixes, which step: "book: take capacity: …"). A refusal
// (*gpuportal.Error) is returned as it is: its message is the user's, and
// its code is what callers read (through errors.As, which sees through
// the wrapping either way).
func named(op string, err error) error {
	var refusal *gpuportal.Error
	if err == nil || errors.As(err, &refusal) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (db *DB) runTxOnce(ctx context.Context, writerLock bool, attempts int, fn func(tx *sql.Tx) error) error {
	if db.group != nil {
		return db.group.do(ctx, fn)
	}
	// Runs cut short by a lost connection are tried again for up to
	// lostConnectionPatience, beside the attempts for meeting others.
	lost := 0
	var firstLost time.Time
	retryLost := func(err error) bool {
		if db.dialect != "postgres" || !connectionLost(err) || ctx.Err() != nil {
			return false
		}
		if lost == 0 {
			firstLost = time.Now()
		} else if time.Since(firstLost) > lostConnectionPatience {
			return false
		}
		lost++
		select {
		case <-ctx.Done():
			return false
		case <-time.After(lostConnectionBackoff(lost)):
			return true
		}
	}
	for attempt := 1; ; attempt++ {
		tx, err := db.write.BeginTx(ctx, nil)
		if err != nil {
			if retryLost(err) {
				attempt-- // a pooled connection the server dropped: another one
				continue
			}
			return fmt.Errorf("begin: %w", err)
		}
		if writerLock {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, db.writerKey); err != nil {
				_ = tx.Rollback()
				if retryLost(err) {
					attempt--
					continue
				}
				return fmt.Errorf("writer lock: %w", err)
			}
		}
		retryable := false
		if err = fn(tx); err != nil {
			_ = tx.Rollback()
			// Before the commit a broken connection took the transaction
			// with it: safe to run again.
			if retryLost(err) {
				attempt--
				continue
			}
			retryable = isRetryable(err)
		} else if err = tx.Commit(); err != nil {
			// A commit that failed for a lost connection may have
			// committed: never run it twice.
			retryable = isRetryable(err)
			err = fmt.Errorf("commit: %w", err)
		}
		if err == nil || attempt == attempts || !retryable {
			return err
		}
	}
}

// SchemaVersion returns the version the database is at and the version this
// build needs.
func (db *DB) SchemaVersion(ctx context.Context) (have, want int, err error) {
	ms, err := migrations.For(db.dialect)
	if err != nil {
		return 0, 0, err
	}
	want = len(ms)
	tables, err := db.tableNames(ctx)
	if err != nil || !slices.Contains(tables, "schema_migrations") {
		return 0, want, err
	}
	err = db.write.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have)
	return have, want, err
}

// tableNames lists the database's tables in the order they were created
// (SQLite) or by name (PostgreSQL, in the connection's schema).
func (db *DB) tableNames(ctx context.Context) ([]string, error) {
	query := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid`
	if db.dialect == "postgres" {
		query = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
	}
	return scanColumn[string](db.write.QueryContext(ctx, query))
}

// ErrSchemaOutdated is returned by CheckSchema when migrations are pending.
var ErrSchemaOutdated = errors.New("database schema is out of date")

// CheckSchema refuses to run on a schema older (or newer) than this build's.
func (db *DB) CheckSchema(ctx context.Context) error {
	have, want, err := db.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if have < want {
		return fmt.Errorf("%w: it is at version %d, this portal needs %d; run `portal migrate` (or start with --migrate)", ErrSchemaOutdated, have, want)
	}
	if have > want {
		return fmt.Errorf("database schema is at version %d, newer than this portal (%d): run a newer portal", have, want)
	}
	return nil
}

// Migrate applies every pending migration, each in its own transaction, and
// returns how many it applied.
func (db *DB) Migrate(ctx context.Context) (int, error) {
	err := db.inTx(ctx, "migrate", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	ms, err := migrations.For(db.dialect)
	if err != nil {
		return 0, err
	}
	have, _, err := db.SchemaVersion(ctx)
	if err != nil {
		return 0, err
	}
	applied := 0
	for _, m := range ms[have:] {
		ran := false
		err := db.inTx(ctx, "migrate", func(tx *sql.Tx) error {
			// Another portal starting beside this one may have applied it
			// since; the writer lock makes this check and the change one step.
			var done int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&done); err != nil || done > 0 {
				return err
			}
			ran = true
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, m.Version, m.Name, unix(db.now()))
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if ran {
			applied++
		}
	}
	return applied, nil
}

// IsEmpty reports whether the database has no schema at all (a new file
// or a new PostgreSQL database).
func (db *DB) IsEmpty(ctx context.Context) (bool, error) {
	tables, err := db.tableNames(ctx)
	return len(tables) == 0, err
}

func unix(t time.Time) int64 { return t.Unix() }

func fromUnix(s int64) time.Time { return time.Unix(s, 0).UTC() }

func fromNullUnix(s sql.NullInt64) *time.Time {
	if !s.Valid {
		return nil
	}
	t := fromUnix(s.Int64)
	return &t
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.write.PingContext(ctx) }

// SynchronousMode is SQLite's synchronous setting on the write connection
// (2 = FULL: every commit is on disk before it returns).
func (db *DB) SynchronousMode(ctx context.Context) (int, error) {
	var mode int
	err := db.write.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&mode)
	return mode, err
}
