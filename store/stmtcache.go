package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"

	"modernc.org/sqlite"
)

// Statement cache (SQLite). SQLite parses every statement before it runs
// it, and the portal asks the same few hundred questions over and over:
// parsing was a sixth of a booking's CPU and a fifth of a scheduler tick's.
// So each SQLite connection keeps the statements it has run prepared,
// keyed by their text, and runs them again without parsing. Every query
// of the store benefits, in and out of transactions, with no caller
// having to ask. (pgx does the same on PostgreSQL by itself.)
//
// A statement whose rows are still being read is not shared: a second run
// of the same text meanwhile gets a statement of its own, as it would
// without the cache. Scripts (text with a ';') are never cached.

// sqliteDriver is the name openSQLite opens: modernc's driver with the
// cache in front of each connection.
const sqliteDriver = "sqlite-stmtcache"

// stmtCacheSize bounds the statements one connection keeps; once full the
// idle ones are let go (text built per call, such as an IN list of varying
// length, must not grow the cache for ever).
const stmtCacheSize = 512

func init() {
	sql.Register(sqliteDriver, cachingDriver{&sqlite.Driver{}})
}

type cachingDriver struct{ driver.Driver }

func (d cachingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return &cachingConn{sqliteConn: c.(sqliteConn), stmts: map[string]*cachedStmt{}}, nil
}

// sqliteConn is what database/sql uses of modernc's connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// preparedStmt is what a modernc statement offers.
type preparedStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type cachedStmt struct {
	stmt preparedStmt
	busy bool // its rows are open
}

// cachingConn is one SQLite connection with its statements. database/sql
// uses a connection from one goroutine at a time, so it needs no lock.
type cachingConn struct {
	sqliteConn
	stmts map[string]*cachedStmt
}

// take returns the cached statement for query, preparing it the first
// time; nil when query is not to be cached or its statement is in use.
func (c *cachingConn) take(ctx context.Context, query string) (*cachedStmt, error) {
	if s, ok := c.stmts[query]; ok {
		if s.busy {
			return nil, nil
		}
		return s, nil
	}
	if strings.Contains(query, ";") {
		return nil, nil
	}
	if len(c.stmts) >= stmtCacheSize {
		c.letGoIdle()
	}
	ds, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s := &cachedStmt{stmt: ds.(preparedStmt)}
	c.stmts[query] = s
	return s, nil
}

func (c *cachingConn) letGoIdle() {
	for q, s := range c.stmts {
		if !s.busy {
			s.stmt.Close()
			delete(c.stmts, q)
		}
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	return s.stmt.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	s.busy = true
	return &cachedRows{Rows: rows, stmt: s}, nil
}

func (c *cachingConn) Close() error {
	for q, s := range c.stmts {
		s.stmt.Close()
		delete(c.stmts, q)
	}
	return c.sqliteConn.Close()
}

// cachedRows frees its statement for the next run when closed.
type cachedRows struct {
	driver.Rows
	stmt *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.stmt.busy = false
	return err
}
