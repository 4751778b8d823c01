package store

import (
	"context"
	"fmt"
)

// Page is one page of a list, as every list of the API takes it: Limit
// rows from Offset on. Total, when set, receives how many rows the whole
// list has (the page aside), for the API's X-Total-Count.
type Page struct {
	Limit  int
	Offset int
	Total  *int
}

// count fills p.Total (when asked) with the rows of table matching where.
func (db *DB) count(ctx context.Context, p Page, table, where string, args ...any) error {
	if p.Total == nil {
		return nil
	}
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM `+table+` WHERE `+where, args...).Scan(p.Total); err != nil {
		return fmt.Errorf("count %s: %w", table, err)
	}
	return nil
}
