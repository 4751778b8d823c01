package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

func openCached(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open(sqliteDriver, "file:"+filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one connection: every statement meets the same cache
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t (v) VALUES ('a'), ('b'), ('c')`); err != nil {
		t.Fatal(err)
	}
	return db
}

// A statement whose rows are still open is not reset under them by a
// second run of the same text.
func TestStmtCacheSameQueryWhileRowsAreOpen(t *testing.T) {
	ctx := context.Background()
	db := openCached(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = `SELECT id, v FROM t WHERE id >= ? ORDER BY id`
	outer, err := tx.QueryContext(ctx, q, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for outer.Next() {
		var id int
		var v string
		if err := outer.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.QueryContext(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for inner.Next() {
			n++
		}
		inner.Close()
		got = append(got, fmt.Sprintf("%s:%d", v, n))
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if want := "[a:3 b:2 c:1]"; fmt.Sprint(got) != want {
		t.Fatalf("outer rows with the same query run inside: %v, want %s", got, want)
	}
}

// The cache is used again and again (writes and reads agree), lets idle
// statements go when full, and scripts run as scripts.
func TestStmtCacheReuseBoundAndScripts(t *testing.T) {
	ctx := context.Background()
	db := openCached(t)
	for k := range 3 * stmtCacheSize {
		// distinct texts, as an IN list of varying length would make
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`UPDATE t SET v = ? WHERE id = %d`, k%3+1), fmt.Sprint(k)); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		if _, err := db.ExecContext(ctx, `UPDATE t SET v = v || '!' WHERE id = ?`, 1); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var cached int
	if err := conn.Raw(func(c any) error { cached = len(c.(*cachingConn).stmts); return nil }); err != nil {
		t.Fatal(err)
	}
	if cached > stmtCacheSize {
		t.Errorf("%d statements cached, at most %d", cached, stmtCacheSize)
	}
	var v string
	if err := conn.QueryRowContext(ctx, `SELECT v FROM t WHERE id = ?`, 1).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(3*stmtCacheSize-3) + "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; v != want {
		t.Errorf("v = %q, want %q", v, want)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO t (v) VALUES ('d'); INSERT INTO t (v) VALUES ('e')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("after a two-statement script: %d rows (%v), want 5", n, err)
	}
}
