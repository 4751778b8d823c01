package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"gpuportal"
)

// AddNode inserts a node with its GPUs (the demo and tests; agents register
// through the agent API) and updates the bookable capacity.
func (db *DB) AddNode(ctx context.Context, n gpuportal.Node) error {
	return db.inTx(ctx, "add node", func(tx *sql.Tx) error {
		online := n.State != gpuportal.NodeOffline
		drain := n.State == gpuportal.NodeDraining
		if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, hostname, region_id, online, drain, last_heartbeat_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			n.ID, n.Hostname, n.Region, online, drain, unix(db.now()), unix(db.now())); err != nil {
			return fmt.Errorf("insert node %s: %w", n.ID, err)
		}
		for _, g := range n.GPUs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO gpus (uuid, node_id, idx, model_id, name, healthy, memory_total_mib) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				g.UUID, n.ID, g.Index, g.Model, g.Name, g.Healthy, g.MemoryTotalMiB); err != nil {
				return fmt.Errorf("insert gpu %s: %w", g.UUID, err)
			}
		}
		return recomputeCapacity(ctx, tx)
	})
}

// SetGPUHealth marks a GPU healthy or not and updates the capacity.
func (db *DB) SetGPUHealth(ctx context.Context, uuid string, healthy bool) error {
	return db.inTx(ctx, "set GPU health", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE gpus SET healthy = ? WHERE uuid = ?`, healthy, uuid)
		if err != nil {
			return named("update gpus", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "GPU %s not found.", uuid)
		}
		return recomputeCapacity(ctx, tx)
	})
}

// recomputeCapacity rebuilds the capacity table from the fleet. It runs in
// the transaction of every fleet change (rare next to availability reads).
func recomputeCapacity(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM capacity`); err != nil {
		return fmt.Errorf("recompute capacity: %w", err)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO capacity (model_id, region_id, healthy_gpus)
		SELECT g.model_id, n.region_id, count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id
		WHERE g.healthy = 1 AND n.online = 1 AND n.drain = 0
		GROUP BY g.model_id, n.region_id`)
	if err != nil {
		return fmt.Errorf("recompute capacity: %w", err)
	}
	return nil
}

// HealthyGPUs returns the healthy GPUs of a model in a region on online,
// non-draining nodes.
func (db *DB) HealthyGPUs(ctx context.Context, model, region string) (int, error) {
	return db.healthyGPUs(ctx, db.read, model, region)
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (db *DB) healthyGPUs(ctx context.Context, q queryer, model, region string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT healthy_gpus FROM capacity WHERE model_id = ? AND region_id = ?`, model, region).Scan(&n)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read capacity: %w", err)
	}
	return n, nil
}

// NodeCount returns how many nodes the fleet has.
func (db *DB) NodeCount(ctx context.Context) (int, error) {
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM nodes`).Scan(&n)
	return n, err
}

// FleetPart is a group of nodes alike: that many nodes with that many
// healthy GPUs of a model in a region.
type FleetPart struct {
	Model, Region string
	Nodes         int
	GPUsPerNode   int
}

// FleetShape describes the fleet in service now (healthy GPUs on online,
// non-draining nodes) as groups of alike nodes: what the admin's what-if
// simulates.
func (db *DB) FleetShape(ctx context.Context) ([]FleetPart, error) {
	type nodeGPUs struct {
		model, region, node string
		gpus                int
	}
	nodes, err := scanAll(ctx, db.read, func(r *sql.Rows, n *nodeGPUs) error { return r.Scan(&n.model, &n.region, &n.node, &n.gpus) },
		`SELECT g.model_id, n.region_id, n.id, count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id
		WHERE g.healthy = 1 AND n.online = 1 AND n.drain = 0 GROUP BY g.model_id, n.region_id, n.id ORDER BY g.model_id, n.region_id, n.id`)
	if err != nil {
		return nil, fmt.Errorf("fleet shape: %w", err)
	}
	var out []FleetPart
	for _, n := range nodes {
		k := slices.IndexFunc(out, func(p FleetPart) bool { return p.Model == n.model && p.Region == n.region && p.GPUsPerNode == n.gpus })
		if k < 0 {
			out = append(out, FleetPart{Model: n.model, Region: n.region, GPUsPerNode: n.gpus})
			k = len(out) - 1
		}
		out[k].Nodes++
	}
	return out, nil
}
