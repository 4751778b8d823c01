package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"

	"gpuportal/plan"
)

// gpuLists keeps each pool's usable GPUs between ticks: the list changes
// only with the fleet (migration 0031's fleet_revision takes a new value at
// every such change), while the tick wants it most minutes; reading it was a scan of
// every GPU and its node.
type gpuLists struct {
	mu       sync.Mutex
	revision int64
	pools    map[plan.PoolKey][]plan.GPU
}

// fleetRevision reads the name of the fleet's current state (0 when the
// row is missing, which never matches a kept list).
func fleetRevision(ctx context.Context, q queryer) (int64, error) {
	var rev int64
	err := q.QueryRowContext(ctx, `SELECT revision FROM fleet_revision WHERE id = 1`).Scan(&rev)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read fleet revision: %w", err)
	}
	return rev, nil
}

// poolGPUs lists a pool's healthy GPUs on online nodes that do not drain,
// in node order, nobody's holder or reservation set. It reads the list
// again only when the fleet changed since it was kept, and keeps it only
// when the fleet did not change while it read (on PostgreSQL each
// statement may see a later commit).
func (db *DB) poolGPUs(ctx context.Context, q queryer, key plan.PoolKey) ([]plan.GPU, error) {
	before, err := fleetRevision(ctx, q)
	if err != nil {
		return nil, err
	}
	kept := &db.gpuLists
	kept.mu.Lock()
	list, ok := kept.pools[key]
	ok = ok && before != 0 && kept.revision == before
	kept.mu.Unlock()
	if ok {
		return slices.Clone(list), nil
	}
	list, err = scanAll(ctx, q, func(r *sql.Rows, g *plan.GPU) error { return r.Scan(&g.UUID, &g.Node) }, `SELECT g.uuid, g.node_id FROM gpus g JOIN nodes n ON n.id = g.node_id
		WHERE g.model_id = ? AND n.region_id = ? AND g.healthy = 1 AND n.online = 1 AND n.drain = 0 ORDER BY g.node_id, g.idx`, key.Model, key.Region)
	if err != nil {
		return nil, err
	}
	after, err := fleetRevision(ctx, q)
	if err != nil {
		return nil, err
	}
	if after == before && before != 0 {
		kept.mu.Lock()
		if kept.revision != before || kept.pools == nil {
			kept.revision, kept.pools = before, map[plan.PoolKey][]plan.GPU{}
		}
		kept.pools[key] = slices.Clone(list)
		kept.mu.Unlock()
	}
	return list, nil
}
