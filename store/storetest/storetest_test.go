package storetest_test

import (
	"os"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// Both passes, the PostgreSQL one in a process of its own: the tests below
// hold on either engine.
func TestMain(m *testing.M) { storetest.Main(m) }

// Each Open is a database of its own, every migration applied, whatever
// the databases opened before it did: tests copy one migrated template
// instead of migrating each.
func TestOpenGivesEachTestAFreshMigratedDatabase(t *testing.T) {
	t.Parallel()
	first, _ := storetest.Open(t)
	storetest.MustCreateUser(t, first, "alice@example.com", gpuportal.RoleCustomer)
	storetest.AddFleet(t, first, "a", "cd-1", "a100-80g", 1, 8)

	second, _ := storetest.Open(t)
	have, want, err := second.SchemaVersion(t.Context())
	if err != nil || have != want || have == 0 {
		t.Fatalf("a new database is at schema %d of %d (%v)", have, want, err)
	}
	if _, err := second.UserByEmail(t.Context(), "alice@example.com"); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("another test's user is in a new database: %v", err)
	}
	if nodes, err := second.Nodes(t.Context()); err != nil || len(nodes) != 0 {
		t.Fatalf("a new database has %d nodes (%v)", len(nodes), err)
	}
	// The first is untouched by the second's opening.
	if _, err := first.UserByEmail(t.Context(), "alice@example.com"); err != nil {
		t.Fatalf("the first database lost its user: %v", err)
	}
}

// Each pass opens databases of its engine; the process Main starts for
// the PostgreSQL pass (told by the variable it sets) runs that pass.
func TestEachPassIsOnItsEngine(t *testing.T) {
	t.Parallel()
	db, _ := storetest.Open(t)
	if db.Dialect() != storetest.Engine() {
		t.Fatalf("the %s pass opened a %s database", storetest.Engine(), db.Dialect())
	}
	if os.Getenv("STORETEST_PASS") == "postgres" && storetest.Engine() != "postgres" {
		t.Fatalf("the PostgreSQL pass's process runs the %s pass", storetest.Engine())
	}
}
