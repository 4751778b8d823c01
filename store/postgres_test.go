package store_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"gpuportal/store"
	"gpuportal/store/storetest"
)

// openPair opens two handles on one new PostgreSQL schema, as two portals.
func openPair(t *testing.T) (*store.DB, *store.DB) {
	t.Helper()
	if storetest.Engine() != "postgres" {
		t.Skip("a PostgreSQL test: it runs in the PostgreSQL run of this package")
	}
	dsn := storetest.PostgresDSN(t)
	ctx := context.Background()
	var dbs [2]*store.DB
	for i := range dbs {
		db, err := store.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	if _, err := dbs[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return dbs[0], dbs[1]
}

// One portal leads the scheduler at a time; when it lets go (or its
// session ends), another can lead.
func TestSchedulerLeadershipIsExclusive(t *testing.T) {
	t.Parallel()
	a, b := openPair(t)
	ctx := context.Background()
	lead, ok, err := a.Lead(ctx)
	if err != nil || !ok {
		t.Fatalf("first Lead = %v, %v", ok, err)
	}
	if _, ok, err := b.Lead(ctx); err != nil || ok {
		t.Fatalf("second portal leads too: %v, %v", ok, err)
	}
	lead.Release()
	lead, ok, err = b.Lead(ctx)
	if err != nil || !ok {
		t.Fatalf("Lead after release = %v, %v", ok, err)
	}
	defer lead.Release()
	select {
	case <-lead.Lost:
		t.Fatal("a held leadership reported lost")
	default:
	}
}

// Wake-ups and kicks sent through one portal reach the others' waiters.
func TestWakeupsAndKicksCrossPortals(t *testing.T) {
	t.Parallel()
	a, b := openPair(t)
	ctx := context.Background()
	woken, stop := b.Wakeups.Wait("node-7")
	defer stop()
	other, stopOther := b.Wakeups.Wait("node-8")
	defer stopOther()
	a.Wake(ctx, "node-7")
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the other portal's waiter was not woken")
	}
	select {
	case <-other:
		t.Fatal("a waiter on another node was woken")
	case <-time.After(100 * time.Millisecond):
	}
	a.Kick(ctx)
	select {
	case <-b.Kicks():
	case <-time.After(5 * time.Second):
		t.Fatal("the kick did not reach the other portal")
	}
}

// (issue 22, item 23) When the leader's session is killed, the lock is
// free at once; the portal that takes it acts only once the old leader has
// surely noticed and stopped: never two leaders at a time.
func TestNewLeaderWaitsForTheOldOneToStop(t *testing.T) {
	t.Parallel()
	a, b := openPair(t)
	ctx := context.Background()
	old, ok, err := a.Lead(ctx)
	if err != nil || !ok {
		t.Fatalf("first Lead = %v, %v", ok, err)
	}
	defer old.Release()
	killer, err := sql.Open("pgx", os.Getenv("PORTAL_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close()
	key := a.LeaderKey()
	var n int
	if err := killer.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = $1 AND objid = $2 AND objsubid = 1`, uint32(uint64(key)>>32), uint32(uint64(key))).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate the leader's session: %d, %v", n, err)
	}
	var lead *store.Leadership
	for lead == nil {
		l, ok, err := b.Lead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			lead = l
		}
	}
	defer lead.Release()
	select {
	case <-old.Lost:
	default:
		t.Fatal("the new leader acts while the old one still believes it leads")
	}
}
