package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// apiCall sends a JSON request with a bearer token and returns the status
// and body.
func apiCall(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// logIn returns an API token for a login.
func logIn(t *testing.T, url, email, password string) string {
	t.Helper()
	st, body := apiCall(t, "POST", url+"/api/v1/auth/tokens", "", `{"email":"`+email+`","password":"`+password+`","name":"test"}`)
	if st != http.StatusCreated {
		t.Fatalf("log in %s: %d %s", email, st, body)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(body), &tok); err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// rowCounts counts every table's rows in a database.
func rowCounts(t *testing.T, driver, dsn string) map[string]int64 {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	list := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if driver == "pgx" {
		list = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`
	}
	rows, err := db.Query(list)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	counts := map[string]int64{}
	for _, table := range tables {
		if table == "schema_migrations" {
			continue
		}
		var n int64
		if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		counts[table] = n
	}
	return counts
}

// An installation on SQLite (accounts, a fleet, 30 days of demo history,
// bookings, a waitlist entry) moves to PostgreSQL whole: every row of every
// table; logins, bookings and session keys work there; new ids follow the
// copied ones; and a second copy into the now-used database is refused.
func TestMigrateDataFromSQLiteToPostgres(t *testing.T) {
	pg := storetest.PostgresDSN(t)
	ctx := context.Background()
	lite := filepath.Join(t.TempDir(), "portal.db")

	src, err := store.Open(ctx, lite, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	alice := storetest.MustCreateUser(t, src, "alice@example.com", gpuportal.RoleCustomer)
	bob := storetest.MustCreateUser(t, src, "bob@example.com", gpuportal.RoleCustomer)
	storetest.AddFleet(t, src, "a", "cd-1", "a100-80g", 2, 8)
	if err := src.SeedDemoHistory(ctx, []*gpuportal.User{alice, bob}, time.Now()); err != nil {
		t.Fatal(err)
	}
	src.Close()

	url, _, stop := runPortal(t, []string{"--db", lite}, nil)
	token := logIn(t, url, "alice@example.com", storetest.Password)
	start := time.Now().UTC().Truncate(time.Hour).Add(72 * time.Hour)
	window := `"model":"a100-80g","region":"cd-1","start":"` + start.Format(time.RFC3339) + `","end":"` + start.Add(4*time.Hour).Format(time.RFC3339) + `"`
	if st, body := apiCall(t, "POST", url+"/api/v1/reservations", token, `{"count":16,`+window+`}`); st != http.StatusCreated {
		t.Fatalf("book on SQLite: %d %s", st, body)
	}
	if st, body := apiCall(t, "POST", url+"/api/v1/waitlist", token, `{"count":2,"auto_book":false,`+window+`}`); st != http.StatusCreated {
		t.Fatalf("join the waitlist on SQLite: %d %s", st, body)
	}
	_, before := apiCall(t, "GET", url+"/api/v1/reservations", token, "")
	stop()

	var out bytes.Buffer
	if err := run(ctx, []string{"migrate-data", "--from", lite, "--to", pg}, env(nil), &out, io.Discard); err != nil {
		t.Fatalf("migrate-data: %v\n%s", err, out.String())
	}
	t.Logf("migrate-data:\n%s", out.String())
	if !strings.Contains(out.String(), "copied") {
		t.Fatalf("migrate-data printed %q", out.String())
	}
	want, got := rowCounts(t, "sqlite", lite), rowCounts(t, "pgx", pg)
	if len(want) < 20 {
		t.Fatalf("only %d tables in the source", len(want))
	}
	for table, n := range want {
		if got[table] != n {
			t.Errorf("%s: %d rows in PostgreSQL, %d in SQLite", table, got[table], n)
		}
	}
	if want["spot_runs"] == 0 || want["reservations"] == 0 || want["ledger_entries"] == 0 {
		t.Fatalf("the demo history is missing from the source: %v", want)
	}

	// The same installation, served from PostgreSQL.
	url, _ = startPortal(t, []string{"--db", pg}, nil)
	// The API token made on SQLite is valid on PostgreSQL.
	if _, after := apiCall(t, "GET", url+"/api/v1/reservations", token, ""); after != before {
		t.Fatalf("reservations differ after the move:\nSQLite:     %s\nPostgreSQL: %s", before, after)
	}
	// The hours booked on SQLite are full on PostgreSQL too.
	if st, body := apiCall(t, "POST", url+"/api/v1/reservations", token, `{"count":1,`+window+`}`); st != http.StatusConflict {
		t.Fatalf("overbooking after the move: %d %s", st, body)
	}
	token = logIn(t, url, "bob@example.com", storetest.Password)
	later := strings.ReplaceAll(window, start.Format(time.RFC3339), start.Add(24*time.Hour).Format(time.RFC3339))
	later = strings.Replace(later, start.Add(4*time.Hour).Format(time.RFC3339), start.Add(28*time.Hour).Format(time.RFC3339), 1)
	st, body := apiCall(t, "POST", url+"/api/v1/reservations", token, `{"count":4,`+later+`}`)
	if st != http.StatusCreated {
		t.Fatalf("book on PostgreSQL: %d %s", st, body)
	}
	var r struct{ ID int64 }
	json.Unmarshal([]byte(body), &r)
	if r.ID <= want["reservations"] {
		t.Fatalf("new reservation id %d does not follow the %d copied", r.ID, want["reservations"])
	}

	// A database with accounts is never filled again.
	err = run(ctx, []string{"migrate-data", "--from", lite, "--to", pg}, env(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "already has") {
		t.Fatalf("second migrate-data: %v", err)
	}
	if n := rowCounts(t, "pgx", pg)["reservations"]; n != want["reservations"]+1 {
		t.Fatalf("reservations after the refused copy: %d, want %d", n, want["reservations"]+1)
	}
	for _, args := range [][]string{{"--from", lite, "--to", lite}, {"--from", pg, "--to", pg}, {"--from", filepath.Join(t.TempDir(), "missing.db"), "--to", pg}} {
		if err := run(ctx, append([]string{"migrate-data"}, args...), env(nil), io.Discard, io.Discard); err == nil {
			t.Errorf("migrate-data %v succeeded", args)
		}
	}
}
