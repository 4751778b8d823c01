package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gpuportal"
)

// A scratch store lives in memory: what its writer commits its readers
// see, two scratch stores do not share a row, nothing is written to disk,
// and it is gone once closed.
func TestScratchStoreIsInMemoryAndItsOwn(t *testing.T) {
	ctx := context.Background()
	clock := gpuportal.NewManualClock(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	open := func() *DB {
		db, err := OpenScratch(ctx, clock)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return db
	}
	a := open()
	nameOfA := fmt.Sprintf("/gpuportal-scratch-%d", scratchStores.Load())
	b := open()
	defer b.Close()
	if _, err := a.CreateLoginlessUser(ctx, "only-in-a@example.com", "A", gpuportal.RoleCustomer); err != nil {
		t.Fatal(err)
	}
	countUsers := func(db *DB) (n int) {
		if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE email = 'only-in-a@example.com'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if countUsers(a) != 1 {
		t.Fatal("a scratch store's readers do not see what its writer committed")
	}
	if countUsers(b) != 0 {
		t.Fatal("two scratch stores share rows")
	}
	if files, _ := filepath.Glob("/gpuportal-scratch-*"); len(files) != 0 {
		t.Fatalf("a scratch store wrote files: %v", files)
	}
	if wd, err := os.Getwd(); err == nil {
		if files, _ := filepath.Glob(filepath.Join(wd, "*gpuportal-scratch-*")); len(files) != 0 {
			t.Fatalf("a scratch store wrote files: %v", files)
		}
	}
	a.Close()
	// Opened again by its name once closed, a's database is a new, empty
	// one: its memory went with its last connection.
	again, err := openSQLite(ctx, nameOfA, clock, true)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	var tables int
	if err := again.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("a closed scratch store's %d tables outlive it (%v)", tables, err)
	}
}
