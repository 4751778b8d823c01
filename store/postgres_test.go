package store_test

import (
	"context"
	"testing"
	"time"

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
