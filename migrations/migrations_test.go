package migrations

import (
	"strings"
	"testing"
)

// The two editions describe one schema: the same numbered migrations, and
// no SQLite-only syntax in PostgreSQL's.
func TestEditionsMatch(t *testing.T) {
	lite, err := For("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := For("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if len(lite) != len(pg) {
		t.Fatalf("%d SQLite migrations, %d PostgreSQL ones", len(lite), len(pg))
	}
	for i := range lite {
		if lite[i].Name != pg[i].Name {
			t.Errorf("migration %d: %s (SQLite) vs %s (PostgreSQL)", i+1, lite[i].Name, pg[i].Name)
		}
		for _, sqliteOnly := range []string{"WITHOUT ROWID", "INTEGER PRIMARY KEY", "AUTOINCREMENT"} {
			if strings.Contains(pg[i].SQL, sqliteOnly) {
				t.Errorf("postgres/%s uses SQLite's %q", pg[i].Name, sqliteOnly)
			}
		}
	}
	if _, err := For("mysql"); err == nil {
		t.Error("For(mysql) found migrations")
	}
}
