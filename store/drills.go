package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

// Drill starts a rehearsal interruption on the user's own running spot
// instance: its workload gets the real notice (metadata, the notice's
// length) but no SIGTERM; it is withdrawn when the workload reports ready
// or when the notice runs out, and the result is kept on the instance.
// Free, at most once an hour per instance (429), never in the rates.
func (db *DB) Drill(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Instance, error) {
	var node string
	err := db.inTx(ctx, "drill", func(tx *sql.Tx) error {
		i, err := instanceFor(ctx, tx, user, id)
		if err != nil {
			return named("read instance", err)
		}
		if err := mayChangeInstance(user, i); err != nil {
			return err
		}
		if i.UserID != user.ID || i.Kind != gpuportal.KindSpot || i.Status != gpuportal.InstanceRunning || i.Node == "" {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "A drill runs on your own running spot instance (instance %d is a %s instance, %s).", i.ID, i.Kind, i.Status)
		}
		wall := db.Wall.Now()
		if i.Drill != nil {
			i.Drill.Settle(wall)
			if i.Drill.Result == gpuportal.DrillRunning {
				return gpuportal.Errorf(gpuportal.ECONFLICT, "A drill is under way on instance %d.", i.ID)
			}
			if next := i.Drill.WallAt.Add(gpuportal.DrillEvery); wall.Before(next) {
				return gpuportal.Errorf(gpuportal.ERATELIMITED, "One drill an hour per instance: the next one on instance %d can start in %d minutes.", i.ID, int(next.Sub(wall).Minutes())+1)
			}
		}
		asked, err := askedNotice(ctx, tx, i.ID)
		if err != nil {
			return named("asked notice", err)
		}
		policies, err := db.policies(ctx, tx)
		if err != nil {
			return named("read policies", err)
		}
		notice := policies.For(i.Model).NoticeFor(asked)
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET drill_started_at = ?, drill_wall_at = ?, drill_seconds = ?, drill_ready_after = NULL WHERE id = ?`,
			unix(db.now()), wall.Unix(), notice, i.ID); err != nil {
			return fmt.Errorf("start drill: %w", err)
		}
		node = i.Node
		return bumpNode(ctx, tx, i.Node)
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, node)
	return db.Instance(ctx, user, id)
}

// askedNotice is the notice an instance's launch asked for, in seconds (0:
// none, the policy's; see gpuportal.Policy.NoticeFor).
func askedNotice(ctx context.Context, q queryer, id int64) (int, error) {
	var asked sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT notice_seconds FROM instances WHERE id = ?`, id).Scan(&asked); err != nil {
		return 0, fmt.Errorf("asked notice of instance %d: %w", id, err)
	}
	return int(asked.Int64), nil
}

// drillNotice is the notice a running drill gives an agent: the time left
// in real time, or nil once it ran out or the workload was ready.
func drillNotice(i *gpuportal.Instance, wallNow time.Time) *gpuportal.Interruption {
	d := i.Drill
	if d == nil || i.Status != gpuportal.InstanceRunning {
		return nil
	}
	d.Settle(wallNow)
	if d.Result != gpuportal.DrillRunning {
		return nil
	}
	left := d.WallAt.Add(time.Duration(d.Seconds) * time.Second).Sub(wallNow)
	return &gpuportal.Interruption{Action: gpuportal.NoticeTerminate, DeadlineInSeconds: max(0, left.Seconds()), Reason: gpuportal.ReasonDrill, Drill: true, DrillID: d.WallAt.Unix()}
}

// recordDrillReady keeps how long after a drill's notice the workload
// reported ready (the agent measures it in its own clock).
func recordDrillReady(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, r gpuportal.WorkloadStatus) error {
	if !gpuportal.DrillReadyReported(i, r) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE instances SET drill_ready_after = ? WHERE id = ? AND drill_ready_after IS NULL`, *r.DrillReadyAfterSeconds, i.ID); err != nil {
		return fmt.Errorf("record the drill of instance %d: %w", i.ID, err)
	}
	return nil
}
