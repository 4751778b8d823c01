package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

// stopIdle keeps the books of idle stop at each tick: an instance
// launched with idle_stop_minutes whose GPUs all read 0 % utilisation (the
// nodes' latest telemetry) is idle from the first tick that sees it so,
// busy again at the first that does not; once idle for its minutes it is
// stopped like its owner would stop it, and the owner is told why. An
// open interactive session (SSH, the web terminal) counts as use too.
func (db *DB) stopIdle(ctx context.Context, tx *sql.Tx, now time.Time, nodes *[]string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE `+db.indexed("instances", "instances_idle_watch")+` SET idle_since = CASE
			WHEN EXISTS (SELECT 1 FROM instance_gpus ig JOIN gpus g ON g.uuid = ig.gpu_uuid WHERE ig.instance_id = instances.id AND g.utilization_percent > 0) THEN NULL
			WHEN EXISTS (SELECT 1 FROM sessions s WHERE s.instance_id = instances.id AND s.closed_at IS NULL AND s.connected_at IS NOT NULL AND s.seen_at >= ?) THEN NULL
			ELSE coalesce(idle_since, ?) END
		WHERE idle_stop_minutes IS NOT NULL AND status = 'running' AND stop_requested_at IS NULL`, unix(db.Wall.Now().Add(-gpuportal.SessionStaleAfter)), unix(now)); err != nil {
		return fmt.Errorf("track idle instances: %w", err)
	}
	type idle struct {
		id, user int64
		node     string
		minutes  int
		since    int64
		count    int
		model    string
		region   string
		kind     string
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, i *idle) error {
		return r.Scan(&i.id, &i.user, &i.node, &i.minutes, &i.since, &i.count, &i.model, &i.region, &i.kind)
	}, `SELECT id, user_id, node_id, idle_stop_minutes, idle_since, count, model_id, region_id, kind FROM `+db.indexed("instances", "instances_idle_watch")+`
		WHERE idle_stop_minutes IS NOT NULL AND idle_since IS NOT NULL AND status = 'running' AND stop_requested_at IS NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("idle instances: %w", err)
	}
	for _, i := range list {
		if !gpuportal.IdleStopDue(fromUnix(i.since), i.minutes, now) {
			continue
		}
		reason := fmt.Sprintf("stopped after %d minutes with its GPUs idle (idle stop)", i.minutes)
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET stop_requested_at = ?, stop_reason = ? WHERE id = ?`, unix(now), reason, i.id); err != nil {
			return err
		}
		if err := bumpNode(ctx, tx, i.node); err != nil {
			return err
		}
		*nodes = append(*nodes, i.node)
		if err := db.notify(ctx, tx, i.user, gpuportal.NoteIdleStopped, gpuportal.NoteParams{InstanceID: i.id, Model: i.model, Region: i.region, Count: i.count,
			Kind: i.kind, Missing: i.minutes}); err != nil {
			return err
		}
	}
	return nil
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
