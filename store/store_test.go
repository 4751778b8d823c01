package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"gpuportal"
	"gpuportal/migrations"
	"gpuportal/store"
	"gpuportal/store/storetest"

	_ "modernc.org/sqlite"
)

func TestMigrateEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, storetest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if empty, err := db.IsEmpty(ctx); err != nil || !empty {
		t.Fatalf("IsEmpty = %v, %v; want true", empty, err)
	}
	if err := db.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaOutdated) {
		t.Fatalf("CheckSchema on empty db = %v; want ErrSchemaOutdated", err)
	}
	all, _ := migrations.For(storetest.Engine())
	n, err := db.Migrate(ctx)
	if err != nil || n != len(all) {
		t.Fatalf("Migrate = %d, %v; want %d", n, err, len(all))
	}
	if err := db.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema after migrate: %v", err)
	}
	models, err := db.Models(ctx)
	if err != nil || len(models) != 2 || models[0].ID != "a100-80g" || models[0].ListPrice != 800 || models[1].ListPrice != 2000 {
		t.Fatalf("seeded models = %+v, %v", models, err)
	}
}

func TestMigrateExistingDatabaseKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := storetest.DSN(t)
	db, err := store.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	u := storetest.MustCreateUser(t, db, "keep@example.com", gpuportal.RoleCustomer)
	db.Close()

	db, err = store.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.Migrate(ctx); err != nil || n != 0 {
		t.Fatalf("second Migrate = %d, %v; want 0 applied", n, err)
	}
	got, err := db.UserByEmail(ctx, "keep@example.com")
	if err != nil || got.ID != u.ID {
		t.Fatalf("user after re-migrate = %+v, %v", got, err)
	}
}

// A database whose schema is older than the build is refused until it is
// migrated, and migrating it keeps what was there.
func TestOldSchemaRefusedUntilMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := storetest.DSN(t)
	driver := map[string]string{"sqlite": "sqlite", "postgres": "pgx"}[storetest.Engine()]
	raw, err := sql.Open(driver, path)
	if err != nil {
		t.Fatal(err)
	}
	// An installation at version 0 of the tracking table with data of its own.
	for _, stmt := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		`CREATE TABLE operator_notes (note TEXT)`,
		`INSERT INTO operator_notes VALUES ('keep me')`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db, err := store.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if empty, _ := db.IsEmpty(ctx); empty {
		t.Fatal("IsEmpty = true for a database with tables")
	}
	if err := db.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaOutdated) {
		t.Fatalf("CheckSchema = %v; want ErrSchemaOutdated", err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestUsersAndTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	alice := storetest.MustCreateUser(t, db, "Alice@Example.com ", gpuportal.RoleCustomer)
	if alice.Email != "alice@example.com" || alice.Role != gpuportal.RoleCustomer {
		t.Fatalf("alice = %+v", alice)
	}
	_, err := db.CreateUser(ctx, gpuportal.SignUp{Email: "alice@example.com", Password: "another-password", Name: "A2"}, gpuportal.RoleCustomer, "")
	if gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("duplicate email: %v; want conflict", err)
	}
	if _, err := db.Authenticate(ctx, "alice@example.com", "wrong-password!"); gpuportal.ErrorCode(err) != gpuportal.EUNAUTHORIZED {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := db.Authenticate(ctx, "nobody@example.com", storetest.Password); gpuportal.ErrorCode(err) != gpuportal.EUNAUTHORIZED {
		t.Fatalf("unknown email: %v", err)
	}
	if u, err := db.Authenticate(ctx, "ALICE@example.com", storetest.Password); err != nil || u.ID != alice.ID {
		t.Fatalf("right password: %v, %v", u, err)
	}

	bob := storetest.MustCreateUser(t, db, "bob@example.com", gpuportal.RoleCustomer)
	tok, secret, err := db.CreateAPIToken(ctx, alice.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if u, err := db.UserByAPIToken(ctx, secret); err != nil || u.ID != alice.ID {
		t.Fatalf("token owner = %v, %v", u, err)
	}
	if err := db.RevokeAPIToken(ctx, bob.ID, tok.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("bob revoking alice's token: %v; want not_found", err)
	}
	if list, _ := db.APITokens(ctx, bob.ID); len(list) != 0 {
		t.Fatalf("bob sees tokens %+v", list)
	}
	if err := db.RevokeAPIToken(ctx, alice.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UserByAPIToken(ctx, secret); gpuportal.ErrorCode(err) != gpuportal.EUNAUTHORIZED {
		t.Fatalf("revoked token: %v; want unauthorized", err)
	}
}

func TestSetListPriceIsAdminOnlyAndAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	admin := storetest.MustCreateUser(t, db, "admin@example.com", gpuportal.RoleAdmin)
	cust := storetest.MustCreateUser(t, db, "c@example.com", gpuportal.RoleCustomer)
	if _, err := db.SetListPrice(ctx, cust, "a100-80g", 900); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Fatalf("customer: %v", err)
	}
	for _, bad := range []gpuportal.Fen{0, -1, gpuportal.MaxListPrice + 1} {
		if _, err := db.SetListPrice(ctx, admin, "a100-80g", bad); gpuportal.ErrorCode(err) != gpuportal.EINVALID {
			t.Fatalf("price %d: %v", bad, err)
		}
	}
	if _, err := db.SetListPrice(ctx, admin, "nope", 900); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("unknown model: %v", err)
	}
	m, err := db.SetListPrice(ctx, admin, "a100-80g", 950)
	if err != nil || m.ListPrice != 950 {
		t.Fatalf("set price = %+v, %v", m, err)
	}
}

// The conformance runs really are on the engine they say.
func TestEngineOfThisRun(t *testing.T) {
	t.Parallel()
	db, _ := storetest.Open(t)
	if db.Dialect() != storetest.Engine() {
		t.Fatalf("Dialect = %q in the %s run", db.Dialect(), storetest.Engine())
	}
}
