package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// CopyAll moves an installation: it copies every row of src into dst, a
// new database at the same schema version (portal migrate-data copies a
// SQLite installation into PostgreSQL). The copy is one transaction on dst:
// it lands whole or not at all. It refuses a dst that already holds
// accounts, so it can never mix two installations. It returns the rows
// copied per table.
func CopyAll(ctx context.Context, src, dst *DB) (map[string]int64, error) {
	for _, db := range []*DB{src, dst} {
		if err := db.CheckSchema(ctx); err != nil {
			return nil, err
		}
	}
	var users int
	if err := dst.read.QueryRowContext(ctx, `SELECT count(*) FROM users`).Scan(&users); err != nil {
		return nil, err
	}
	if users > 0 {
		return nil, fmt.Errorf("the target database already has %d accounts: migrate-data only fills a new database", users)
	}
	tables, err := src.tablesInCopyOrder(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	copied := map[string]int64{}
	err = dst.inTx(ctx, "copy all", func(tx *sql.Tx) error {
		// The migrations seed the catalog and a default policy; the
		// installation's own rows replace them.
		for _, t := range slices.Backward(tables) {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+t); err != nil {
				return fmt.Errorf("empty %s: %w", t, err)
			}
		}
		for _, t := range tables {
			n, err := copyTable(ctx, src, tx, t)
			if err != nil {
				return fmt.Errorf("copy %s: %w", t, err)
			}
			copied[t] = n
		}
		if dst.dialect == "postgres" {
			return resetIdentities(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return copied, nil
}

// tablesInCopyOrder lists src's tables (but schema_migrations, which each
// database keeps for itself) so that a table comes after the tables its
// foreign keys reference.
func (db *DB) tablesInCopyOrder(ctx context.Context) ([]string, error) {
	if db.dialect != "sqlite" {
		return nil, fmt.Errorf("copying from %s is not supported; copy from SQLite", db.dialect)
	}
	names, err := db.tableNames(ctx)
	if err != nil {
		return nil, err
	}
	refs := map[string][]string{}
	for _, t := range names {
		ids, err := scanColumn[string](db.read.QueryContext(ctx, `SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)`, t))
		if err != nil {
			return nil, err
		}
		refs[t] = ids
	}
	var order []string
	placed := map[string]bool{"schema_migrations": true}
	var place func(t string, path []string) error
	place = func(t string, path []string) error {
		if placed[t] {
			return nil
		}
		if slices.Contains(path, t) {
			return fmt.Errorf("foreign keys form a cycle: %s", strings.Join(append(path, t), " → "))
		}
		for _, r := range refs[t] {
			if r != t {
				if err := place(r, append(path, t)); err != nil {
					return err
				}
			}
		}
		placed[t] = true
		order = append(order, t)
		return nil
	}
	for _, t := range names {
		if err := place(t, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// copyTable copies one table's rows into tx in multi-row INSERTs.
func copyTable(ctx context.Context, src *DB, tx *sql.Tx, table string) (int64, error) {
	rows, err := src.read.QueryContext(ctx, `SELECT * FROM `+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	// PostgreSQL takes at most 65,535 parameters a statement.
	perInsert := max(1, 30000/len(cols))
	rowMarks := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	head := `INSERT INTO ` + table + ` (` + strings.Join(cols, ", ") + `) VALUES `
	var batch []any
	var n int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		k := len(batch) / len(cols)
		_, err := tx.ExecContext(ctx, head+strings.TrimSuffix(strings.Repeat(rowMarks+", ", k), ", "), batch...)
		batch = batch[:0]
		return err
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		batch = append(batch, vals...)
		n++
		if len(batch)/len(cols) == perInsert {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	return n, flush()
}

// resetIdentities moves every identity key's sequence (each is a table's
// id) past the ids copied in, so new rows do not collide with them.
func resetIdentities(ctx context.Context, tx *sql.Tx) error {
	tables, err := scanColumn[string](tx.QueryContext(ctx, `SELECT table_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND is_identity = 'YES' AND column_name = 'id'`))
	if err != nil {
		return err
	}
	for _, t := range tables {
		_, err := tx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence(?, 'id'), (SELECT max(id) FROM `+t+`))
			WHERE EXISTS (SELECT 1 FROM `+t+`)`, t)
		if err != nil {
			return fmt.Errorf("identity of %s: %w", t, err)
		}
	}
	return nil
}
