package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// kept holds what the store read of tables that change seldom, between
// ticks, under the name of the tables' state: a revision table that
// triggers renew at every change (fleet_revision, migration 0031;
// reservation_gpus_revision, 0051), so no write path can forget to. A
// value is kept only when the revision did not change while it was read
// (on PostgreSQL each statement may see a later commit), and handed out
// only at that revision. Revisions are random or from a sequence: a
// change rolled back never leaves its number to a later, other state.
type kept[K comparable, V any] struct {
	mu       sync.Mutex
	revision int64
	values   map[K]V
}

// read returns key's value at the revision now in table: the kept one, or
// what load reads (then kept). A kept value is shared: callers must not
// change it.
func (k *kept[K, V]) read(ctx context.Context, q queryer, table string, key K, load func() (V, error)) (V, error) {
	var zero V
	before, err := revisionOf(ctx, q, table)
	if err != nil {
		return zero, err
	}
	k.mu.Lock()
	v, ok := k.values[key]
	ok = ok && before != 0 && k.revision == before
	k.mu.Unlock()
	if ok {
		return v, nil
	}
	if v, err = load(); err != nil {
		return zero, err
	}
	after, err := revisionOf(ctx, q, table)
	if err != nil {
		return zero, err
	}
	if after == before && before != 0 {
		k.mu.Lock()
		if k.revision != before || k.values == nil {
			k.revision, k.values = before, map[K]V{}
		}
		k.values[key] = v
		k.mu.Unlock()
	}
	return v, nil
}

// revisionOf reads the name of the state a revision table keeps (0 when
// its row is missing, which never matches a kept value).
func revisionOf(ctx context.Context, q queryer, table string) (int64, error) {
	var rev int64
	err := q.QueryRowContext(ctx, `SELECT revision FROM `+table+` WHERE id = 1`).Scan(&rev)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", table, err)
	}
	return rev, nil
}
