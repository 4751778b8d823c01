// Package storetest opens real, migrated databases for tests: a SQLite file
// in t.TempDir() (never a pooled :memory:).
package storetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"

	"golang.org/x/crypto/bcrypt"
)

func init() {
	// Cheap password hashes: tests log in hundreds of times under -race.
	gpuportal.PasswordCost = bcrypt.MinCost
}

// Epoch is where test clocks start: Monday 2026-11-30 00:00 UTC
// (08:00 in Asia/Shanghai).
var Epoch = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// Open returns a migrated database in a temporary directory, closed when the
// test ends, with a manual business clock at Epoch.
func Open(tb testing.TB) (*store.DB, *gpuportal.ManualClock) {
	tb.Helper()
	clock := gpuportal.NewManualClock(Epoch)
	db, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "portal.db"), clock)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return db, clock
}

// MustCreateUser creates a customer (or admin) for a test.
func MustCreateUser(tb testing.TB, db *store.DB, email, role string) *gpuportal.User {
	tb.Helper()
	u, err := db.CreateUser(context.Background(), gpuportal.SignUp{Email: email, Password: "correct-horse-battery", Name: "Test " + email}, role, "")
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// Password is the password MustCreateUser gives every user.
const Password = "correct-horse-battery"
