package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
	"gpuportal/plan"
)

// loadIdle reads the instances launched with idle stop that run and are
// not told to stop, and whether each is in use now: a GPU of it above 0 %
// utilisation in the nodes' latest telemetry, or an interactive session
// (SSH, the web terminal) open. The planner follows them (plan.idleStops).
func (db *DB) loadIdle(ctx context.Context, q queryer, _ time.Time, s *plan.Snapshot) error {
	var err error
	s.Idle, err = scanAll(ctx, q, func(r *sql.Rows, i *plan.IdleInstance) error {
		var since int64
		err := r.Scan(&i.ID, &i.UserID, &i.Node, &i.Pool.Model, &i.Pool.Region, &i.Kind, &i.Count, &i.Minutes, &since, &i.InUse)
		if since > 0 {
			i.IdleSince = fromUnix(since)
		}
		return err
	}, `SELECT id, user_id, node_id, model_id, region_id, kind, count, idle_stop_minutes, coalesce(idle_since, 0),
			EXISTS (SELECT 1 FROM instance_gpus ig JOIN gpus g ON g.uuid = ig.gpu_uuid WHERE ig.instance_id = instances.id AND g.utilization_percent > 0)
			OR EXISTS (SELECT 1 FROM sessions s WHERE s.instance_id = instances.id AND s.closed_at IS NULL AND s.connected_at IS NOT NULL AND s.seen_at >= ?)
		FROM `+db.indexed("instances", "instances_idle_watch")+`
		WHERE idle_stop_minutes IS NOT NULL AND status = 'running' AND stop_requested_at IS NULL ORDER BY id`,
		unix(db.Wall.Now().Add(-gpuportal.SessionStaleAfter)))
	return err
}

// idle applies the planner's idle-stop decisions: each mark, and each
// stop — as its owner would stop it, the owner told why. Each holds only
// while the instance still runs untold (the plan's earlier steps may
// have stopped it this tick).
func (a *applier) idle(ctx context.Context, decisions plan.Decisions) error {
	for _, m := range decisions.IdleMarks {
		var since any
		if !m.Since.IsZero() {
			since = unix(m.Since)
		}
		if _, err := a.each(ctx, a.aboutInstance(gpuportal.StepIdleStop, m.InstanceID), func() error {
			_, err := a.tx.ExecContext(ctx, `UPDATE instances SET idle_since = ? WHERE id = ? AND status = 'running' AND stop_requested_at IS NULL`, since, m.InstanceID)
			return err
		}); err != nil {
			return err
		}
	}
	for _, i := range decisions.IdleStops {
		if _, err := a.each(ctx, a.aboutInstance(gpuportal.StepIdleStop, i.ID), func() error { return a.stopIdle(ctx, i) }); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) stopIdle(ctx context.Context, i plan.IdleInstance) error {
	reason := fmt.Sprintf("stopped after %d minutes with its GPUs idle (idle stop)", i.Minutes)
	res, err := a.tx.ExecContext(ctx, `UPDATE instances SET stop_requested_at = ?, stop_reason = ? WHERE id = ? AND status = 'running' AND stop_requested_at IS NULL`,
		unix(a.now), reason, i.ID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	if err := bumpNode(ctx, a.tx, i.Node); err != nil {
		return err
	}
	a.nodes = append(a.nodes, i.Node)
	return a.db.notify(ctx, a.tx, i.UserID, gpuportal.NoteIdleStopped, gpuportal.NoteParams{InstanceID: i.ID, Model: i.Pool.Model, Region: i.Pool.Region,
		Count: i.Count, Kind: string(i.Kind), Missing: i.Minutes})
}

// indexed names a table for a query that must read it through a partial
// index: SQLite, without statistics, prefers a full index of the column
// the query also names (instances' status) and reads every live instance.
func (db *DB) indexed(table, index string) string {
	if db.dialect == "sqlite" {
		return table + " INDEXED BY " + index
	}
	return table
}

// indexedAs is indexed for a table named with an alias (SQLite wants the
// alias before INDEXED BY).
func (db *DB) indexedAs(table, alias, index string) string {
	if db.dialect == "sqlite" {
		return table + " " + alias + " INDEXED BY " + index
	}
	return table + " " + alias
}
