package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"gpuportal"
)

// PostgreSQL is how a platform outgrows one machine: several portals share
// one database. The store's SQL is written once, in the dialect both
// engines share; what differs lives here:
//
//   - parameters: queries mark them with SQLite's question mark, which the
//     connection rewrites to PostgreSQL's $1, $2, … (see qmarkConn);
//   - flags are 0/1 integers in both schemas, so Go bools are sent as 0/1;
//   - write transactions take one transaction-scoped advisory lock, so
//     every portal's writes run one at a time exactly as SQLite's single
//     writer runs them: the store's read-then-write transactions (capacity
//     checks, cancellations, claims) keep their meaning across processes;
//   - agent wake-ups and scheduler kicks travel between portals by
//     LISTEN/NOTIFY, and one portal at a time leads the scheduler by a
//     session advisory lock (see Lead).

// advisoryKey is the advisory lock key of a lock ("writer": held by every
// write transaction; "leader": held by the portal running the scheduler) of
// the installation in a schema. Advisory locks are per database, so two
// installations in two schemas of one database do not share them.
func advisoryKey(lock, schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("gpuportal:" + lock + ":" + schema))
	return int64(h.Sum64())
}

// channelName is the name of a notification channel between the portals
// of the installation in a schema ("wakeup": node ids, comma-separated;
// "kick": the scheduler's leader should tick now). Channels are per
// database, like advisory locks.
func channelName(channel, schema string) string {
	return fmt.Sprintf("gpuportal_%s_%08x", channel, uint32(advisoryKey(channel, schema)))
}

// IsPostgresURL reports whether dsn names a PostgreSQL database (else it
// is a SQLite file path).
func IsPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

func openPostgres(ctx context.Context, dsn string, clock gpuportal.Clock) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL URL: %w", err)
	}
	pool := sql.OpenDB(qmarkConnector{stdlib.GetConnector(*cfg)})
	pool.SetMaxOpenConns(16)
	pool.SetMaxIdleConns(16)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	db := &DB{write: pool, read: pool, dialect: "postgres", pgConfig: cfg, Clock: clock, Location: time.UTC, Wakeups: NewWakeups(), Wall: gpuportal.RealClock{}, kicks: make(chan struct{}, 1)}
	var schema string
	if err := pool.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db.writerKey, db.leaderKey = advisoryKey("writer", schema), advisoryKey("leader", schema)
	db.wakeupChannel, db.kickChannel = channelName("wakeup", schema), channelName("kick", schema)
	listenCtx, stop := context.WithCancel(context.Background())
	db.stopListening = stop
	db.listening = make(chan struct{})
	ready := make(chan struct{})
	go db.listen(listenCtx, ready)
	select {
	case <-ready:
	case <-ctx.Done():
		db.Close()
		return nil, ctx.Err()
	}
	return db, nil
}

// qmarkConnector opens pgx connections that accept the store's SQL.
type qmarkConnector struct{ driver.Connector }

func (c qmarkConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return qmarkConn{conn.(*stdlib.Conn)}, nil
}

// qmarkConn is pgx's database/sql connection with question-mark parameters
// rewritten and bools sent as 0/1; everything else (transactions, pings,
// session resets, pgx's statement cache) is pgx's own.
type qmarkConn struct{ *stdlib.Conn }

func (c qmarkConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(rebind(query))
}

func (c qmarkConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(query))
}

func (c qmarkConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(query), args)
}

func (c qmarkConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(query), args)
}

// CheckNamedValue sends Go bools as 0/1: flags are integer columns in both
// schemas (SQLite has no boolean type).
func (c qmarkConn) CheckNamedValue(nv *driver.NamedValue) error {
	if b, ok := nv.Value.(bool); ok {
		nv.Value = int64(0)
		if b {
			nv.Value = int64(1)
		}
	}
	return nil
}

// rebind numbers the question-mark parameters $1, $2, … outside string
// literals, quoted identifiers and comments.
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case ch == '\'' || ch == '"':
			end := strings.IndexByte(query[i+1:], ch)
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+2])
			i += end + 1
		case ch == '-' && strings.HasPrefix(query[i:], "--"):
			end := strings.IndexByte(query[i:], '\n')
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end])
			i += end - 1
		case ch == '/' && strings.HasPrefix(query[i:], "/*"):
			end := strings.Index(query[i:], "*/")
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+2])
			i += end + 1
		case ch == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// isRetryable reports whether a transaction failed only because another
// one met it (deadlock or serialization failure), so running it again can
// succeed.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// connectionLost reports whether a statement failed because the
// connection to PostgreSQL broke (the server restarted, the backend was
// terminated, the network dropped). Before the commit that is as safe to
// run again as a serialization failure: the transaction died with its
// connection.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exception; 57P01–57P03: the server shut down or
		// terminated the backend.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}

// listen relays other portals' (and this one's) notifications: agent
// wake-ups to this portal's long polls, kicks to its scheduler. It
// reconnects after a lost connection and then wakes every long poll, since
// notifications sent meanwhile are gone.
func (db *DB) listen(ctx context.Context, ready chan struct{}) {
	defer close(db.listening)
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	for ctx.Err() == nil {
		listened, err := db.listenOnce(ctx, ready)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = firstBackoff // it worked until now: a new loss starts the backoff again
		}
		slog.Warn("postgres listener lost its connection; reconnecting", "err", err, "in", backoff)
		db.Wakeups.NotifyAll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// listenOnce listens on one connection until it breaks; listened says
// whether it got as far as listening.
func (db *DB) listenOnce(ctx context.Context, ready chan struct{}) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, db.pgConfig)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	for _, ch := range []string{db.wakeupChannel, db.kickChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return false, err
		}
	}
	select {
	case <-ready:
	default:
		close(ready)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		switch n.Channel {
		case db.wakeupChannel:
			db.Wakeups.Notify(strings.Split(n.Payload, ",")...)
		case db.kickChannel:
			select {
			case db.kicks <- struct{}{}:
			default:
			}
		}
	}
}

// wake tells long-polling agents of these nodes that their desired state
// changed: at once in this process on SQLite, through NOTIFY to every
// portal on PostgreSQL. Call it after the transaction commits.
func (db *DB) wake(ctx context.Context, nodeIDs ...string) {
	var ids []string
	for _, id := range nodeIDs {
		if id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	if db.dialect != "postgres" {
		db.Wakeups.Notify(ids...)
		return
	}
	// A payload is at most 8000 bytes; send the ids in batches well under it.
	for len(ids) > 0 {
		batch, size := 0, 0
		for batch < len(ids) && size+len(ids[batch])+1 < 7000 {
			size += len(ids[batch]) + 1
			batch++
		}
		batch = max(batch, 1)
		if _, err := db.write.ExecContext(ctx, `SELECT pg_notify(?, ?)`, db.wakeupChannel, strings.Join(ids[:batch], ",")); err != nil {
			// The agents still learn at their next heartbeat.
			slog.Warn("notify agents", "err", err)
			db.Wakeups.Notify(ids[:batch]...)
		}
		ids = ids[batch:]
	}
}

// Kick asks the portal leading the scheduler to tick now: a change was
// committed that makes something due (a booking, a cancellation, a launch,
// a stop, freed GPUs, a waitlist change, a policy change). The store's own
// write methods call it after their commit, so every way in — page, API,
// scheduler — kicks the same way. On SQLite the leader is this process;
// on PostgreSQL the kick reaches the leader, on whichever portal, by
// NOTIFY (its own listener included).
func (db *DB) Kick(ctx context.Context) {
	if db.dialect != "postgres" {
		select {
		case db.kicks <- struct{}{}:
		default: // a kick is already waiting; one tick serves both
		}
		return
	}
	if _, err := db.write.ExecContext(ctx, `SELECT pg_notify(?, '')`, db.kickChannel); err != nil {
		// The leader's minutely tick does it anyway.
		slog.Warn("kick the scheduler leader", "err", err)
	}
}

// Kicks delivers the kicks of every portal on the database (this one's
// too) to the scheduler that leads.
func (db *DB) Kicks() <-chan struct{} { return db.kicks }

// Leadership is this portal's turn at running the scheduler.
type Leadership struct {
	// Lost is closed when the leadership ends without Release (the
	// connection holding the lock broke: another portal may lead now).
	Lost <-chan struct{}
	// Release gives the leadership up.
	Release func()
}

// Lead makes this portal the scheduler's leader if none is: on PostgreSQL
// it takes a session advisory lock on a connection of its own, which the
// server releases when that session ends — a dead portal's lock is freed
// when its connection closes (at once when the process dies; within about
// half a minute through TCP keepalives when its machine vanishes). On
// SQLite there is one portal and it always leads. ok is false when another
// How a leader watches its lock's connection, and how long a new leader
// waits before it acts (longer than an old leader takes to notice).
const (
	leaderPing        = time.Second
	leaderPingTimeout = 2 * time.Second
)

// LeaderTakeoverDelay is how long a portal that just took the scheduler
// lock waits before it schedules anything.
var LeaderTakeoverDelay = leaderPing + leaderPingTimeout + time.Second

// portal leads.
func (db *DB) Lead(ctx context.Context) (l *Leadership, ok bool, err error) {
	if db.dialect != "postgres" {
		return &Leadership{Lost: make(chan struct{}), Release: func() {}}, true, nil
	}
	cfg := db.pgConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// The server notices a vanished leader's silent connection quickly.
	cfg.RuntimeParams["tcp_keepalives_idle"] = "10"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "5"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("scheduler leader lock: %w", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, db.leaderKey).Scan(&got); err != nil || !got {
		conn.Close(context.Background())
		return nil, false, err
	}
	// The lock may have come free only because the old leader's session
	// was killed a moment ago: that leader stops at its next ping of the
	// lock's connection (every leaderPing, at most leaderPingTimeout
	// long). Acting before then would make two leaders.
	select {
	case <-ctx.Done():
		conn.Close(context.Background())
		return nil, false, ctx.Err()
	case <-time.After(LeaderTakeoverDelay):
	}
	lost, done := make(chan struct{}), make(chan struct{})
	watchCtx, stopWatching := context.WithCancel(context.Background())
	go func() {
		// A leader that cannot reach its session must stop leading: the
		// server may already have given the lock to another portal.
		defer close(done)
		t := time.NewTicker(leaderPing)
		defer t.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-t.C:
				pingCtx, cancel := context.WithTimeout(watchCtx, leaderPingTimeout)
				err := conn.Ping(pingCtx)
				cancel()
				if err != nil && watchCtx.Err() == nil {
					close(lost)
					return
				}
			}
		}
	}()
	release := func() {
		stopWatching()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, db.leaderKey)
		conn.Close(ctx)
	}
	return &Leadership{Lost: lost, Release: release}, true, nil
}
