// Package storetest opens real, migrated databases for tests: a SQLite file
// in t.TempDir() (never a pooled :memory:).
package storetest

import (
	"context"
	"fmt"
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

// Shanghai is the default site time zone.
var Shanghai, _ = time.LoadLocation("Asia/Shanghai")

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
	db.Location = Shanghai
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

// AddFleet adds nodes × perNode healthy GPUs of a model in a region, with
// node ids "<prefix>-1", "<prefix>-2", … and returns the nodes.
func AddFleet(tb testing.TB, db *store.DB, prefix, region, model string, nodes, perNode int) []gpuportal.Node {
	tb.Helper()
	var out []gpuportal.Node
	for i := 1; i <= nodes; i++ {
		n := gpuportal.Node{ID: fmt.Sprintf("%s-%d", prefix, i), Hostname: fmt.Sprintf("%s-%d.example", prefix, i), Region: region, State: gpuportal.NodeOnline}
		for j := 0; j < perNode; j++ {
			n.GPUs = append(n.GPUs, gpuportal.GPU{UUID: fmt.Sprintf("GPU-%s-%d-%d", prefix, i, j), Index: j, Model: model, Name: model, Healthy: true, MemoryTotalMiB: 81920})
		}
		if err := db.AddNode(context.Background(), n); err != nil {
			tb.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}
