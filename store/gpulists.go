package store

import (
	"context"
	"database/sql"
	"slices"

	"gpuportal/plan"
)

// poolGPUs lists a pool's healthy GPUs on online nodes that do not drain,
// in node order, nobody's holder or reservation set. The list changes
// only with the fleet (fleet_revision, migration 0031), while the tick
// wants it most minutes: it is kept between ticks (reading it was a scan
// of every GPU and its node). The caller gets a copy of its own.
func (db *DB) poolGPUs(ctx context.Context, q queryer, key plan.PoolKey) ([]plan.GPU, error) {
	list, err := db.gpuLists.read(ctx, q, "fleet_revision", key, func() ([]plan.GPU, error) {
		return scanAll(ctx, q, func(r *sql.Rows, g *plan.GPU) error { return r.Scan(&g.UUID, &g.Node) }, `SELECT g.uuid, g.node_id FROM gpus g JOIN nodes n ON n.id = g.node_id
			WHERE g.model_id = ? AND n.region_id = ? AND g.healthy = 1 AND n.online = 1 AND n.drain = 0 ORDER BY g.node_id, g.idx`, key.Model, key.Region)
	})
	return slices.Clone(list), err
}
