package store

import (
	"context"
	"database/sql"
	"fmt"

	"gpuportal"
)

// LaunchOnReservation runs a command on all the free GPUs of the user's
// active reservation: one reserved instance per node, each on that node's
// GPUs of the reservation that no instance of it holds ("Launch on this
// reservation"). 409 when every GPU already runs something.
func (db *DB) LaunchOnReservation(ctx context.Context, user *gpuportal.User, reservationID int64, spec gpuportal.LaunchSpec) ([]gpuportal.Instance, error) {
	if id := spec.ResumeInstanceID; id != nil && *id <= 0 {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "resume_instance_id", "Name the stopped instance to resume by its id.")
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := gpuportal.ValidateDiskShape(spec.DiskGiB, "disk_gib"); err != nil {
		return nil, err
	}
	var ids []int64
	err := db.inTx(ctx, "launch on reservation", func(tx *sql.Tx) error {
		r, err := reservationFor(ctx, tx, user, reservationID)
		if err != nil {
			return named("read reservation", err)
		}
		if r.UserID != user.ID {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only the reservation's owner runs work on it.")
		}
		if r.Status != gpuportal.ReservationActive {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Reservation %d is %s; work runs on it while it is active.", r.ID, r.Status)
		}
		if spec.ResumeInstanceID != nil {
			ids, err = db.resumeOnReservation(ctx, tx, r, *spec.ResumeInstanceID)
		} else {
			ids, err = db.launchOnReservation(ctx, tx, r, spec)
		}
		if err == nil && len(ids) == 0 {
			err = gpuportal.Errorf(gpuportal.ECONFLICT, "Every GPU of reservation %d already runs an instance of it; stop one first.", r.ID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	db.Kick(ctx) // place them now
	out := make([]gpuportal.Instance, 0, len(ids))
	for _, id := range ids {
		i, err := db.Instance(ctx, user, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *i)
	}
	return out, nil
}

// launchOnReservation inserts, for each node holding GPUs of the active
// reservation r, a reserved instance of spec on those of them its
// instances do not already use. It returns the new instances.
func (db *DB) launchOnReservation(ctx context.Context, tx *sql.Tx, r *gpuportal.Reservation, spec gpuportal.LaunchSpec) ([]int64, error) {
	image, err := imageForLaunch(ctx, tx, r.UserID, r.Region, spec.Image)
	if err != nil {
		return nil, err
	}
	type nodeGPUs struct {
		node string
		free int
	}
	free, err := scanAll(ctx, tx, func(rows *sql.Rows, n *nodeGPUs) error { return rows.Scan(&n.node, &n.free) },
		`SELECT g.node_id, count(*) FROM reservation_gpus rg JOIN gpus g ON g.uuid = rg.gpu_uuid
		WHERE rg.reservation_id = ? AND NOT EXISTS (
			SELECT 1 FROM instance_gpus ig JOIN instances i ON i.id = ig.instance_id WHERE ig.gpu_uuid = rg.gpu_uuid AND i.reservation_id = rg.reservation_id)
		GROUP BY g.node_id ORDER BY g.node_id`, r.ID)
	if err != nil {
		return nil, fmt.Errorf("free GPUs of reservation %d: %w", r.ID, err)
	}
	// Pending instances of the reservation (not placed yet) count against
	// its GPUs too.
	var pending int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(count), 0) FROM instances WHERE reservation_id = ? AND status = 'pending' AND node_id IS NULL`, r.ID).Scan(&pending); err != nil {
		return nil, err
	}
	mounts, err := db.resolveMounts(ctx, tx, r.UserID, r.Region, spec.Volumes)
	if err != nil {
		return nil, err
	}
	policies, err := db.policies(ctx, tx)
	if err != nil {
		return nil, err
	}
	disk, err := diskOf(spec.DiskGiB, policies.For(r.Model), "launch.disk_gib")
	if err != nil {
		return nil, err
	}
	now := db.now()
	var ids []int64
	for _, n := range free {
		count := n.free
		if pending > 0 {
			taken := min(pending, count)
			count, pending = count-taken, pending-taken
		}
		if count == 0 {
			continue
		}
		req := gpuportal.LaunchRequest{Kind: gpuportal.KindReserved, Model: r.Model, Region: r.Region, Count: count, Command: spec.Command, ReservationID: &r.ID, DiskGiB: disk}
		id, err := insertInstance(ctx, tx, r.UserID, r.CreatedBy, req, sql.NullInt64{Int64: r.ID, Valid: true}, 0, image.Reference, now)
		if err != nil {
			return nil, err
		}
		if err := db.mountVolumes(ctx, tx, id, mounts); err != nil {
			return nil, err
		}
		// Its instances carry the reservation's labels.
		if err := copyLabels(ctx, tx, labelReservation, r.ID, labelInstance, id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// startLaunch runs a reservation's own launch spec at its start (the
// tick that activates it) and tells its owner. It is a decision of its
// own (StepLaunch): when it fails, its owner is told why.
func (a *applier) startLaunch(ctx context.Context, reservationID int64) error {
	r, err := reservationFor(ctx, a.tx, nil, reservationID)
	if err != nil || r.Launch == nil {
		return err
	}
	// A disabled account runs nothing (its launch specs were cleared when
	// it was closed down; this holds for any set since).
	var disabled bool
	if err := a.tx.QueryRowContext(ctx, `SELECT disabled_at IS NOT NULL FROM users WHERE id = ?`, r.UserID).Scan(&disabled); err != nil || disabled {
		return err
	}
	// A launch that cannot run (the image left the catalog, a volume is
	// suspended) fails this decision alone: the reservation has started,
	// and its owner is told why and launches by hand (decisions.go).
	var ids []int64
	if r.Launch.ResumeInstanceID != nil {
		ids, err = a.db.resumeOnReservation(ctx, a.tx, r, *r.Launch.ResumeInstanceID)
	} else {
		ids, err = a.db.launchOnReservation(ctx, a.tx, r, *r.Launch)
	}
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	a.launched += len(ids)
	return a.db.notify(ctx, a.tx, r.UserID, gpuportal.NoteReservationLaunched, gpuportal.NoteParams{ReservationID: r.ID, Model: r.Model, Region: r.Region,
		Count: r.Count, Start: r.Start, End: r.End})
}

// canResume checks that reservation r (model, region, count, owner) may
// resume instance id at its start: the owner's, stopped with its disk
// kept (and not suspended or being saved), of the same model and region,
// on no more GPUs than the reservation has. field names the request's
// field in the error.
func canResume(ctx context.Context, q queryer, userID int64, model, region string, count int, id int64, field string) (*gpuportal.Instance, error) {
	i, err := instanceFor(ctx, q, &gpuportal.User{ID: userID}, id)
	if err != nil {
		return nil, gpuportal.FieldErrorf(gpuportal.ENOTFOUND, field, "Instance %d is not one of yours.", id)
	}
	if err := gpuportal.CanStart(i); err != nil {
		return nil, gpuportal.FieldErrorf(gpuportal.ECONFLICT, field, "Instance %d cannot be resumed: %s", id, gpuportal.ErrorMessage(err))
	}
	if i.Model != model || i.Region != region {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "Instance %d runs %s in %s; the booking is for %s in %s.", id, i.Model, i.Region, model, region)
	}
	if i.Count > count {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "Instance %d runs on %d GPUs; the booking has %d.", id, i.Count, count)
	}
	if suspended, err := diskSuspended(ctx, q, id); err != nil {
		return nil, err
	} else if suspended {
		return nil, gpuportal.FieldErrorf(gpuportal.EFUNDS, field, "The kept disk of instance %d is suspended since your balance ran out: top up what it owes first.", id)
	}
	if saving, err := savingImageOf(ctx, q, id); err != nil {
		return nil, err
	} else if saving {
		return nil, gpuportal.FieldErrorf(gpuportal.ECONFLICT, field, "Instance %d is being saved as an image; resume it once that is done.", id)
	}
	return i, nil
}

// resumeOnReservation starts the reservation's stopped instance on its
// GPUs at its start (book your resume): a reserved instance of it, a new
// attempt that mounts its kept disk. When the instance was started,
// released or deleted meanwhile, the decision fails and the owner is told
// why; the GPUs stay theirs.
func (db *DB) resumeOnReservation(ctx context.Context, tx *sql.Tx, r *gpuportal.Reservation, id int64) ([]int64, error) {
	i, err := canResume(ctx, tx, r.UserID, r.Model, r.Region, r.Count, id, "launch.resume_instance_id")
	if err != nil {
		return nil, err
	}
	// One last run in no-GPU mode takes all the reservation's GPUs.
	if _, err := tx.ExecContext(ctx, `UPDATE instances SET kind = 'reserved', reservation_id = ?, status = 'pending', price_fen = 0, auto_restart = 0, idle_stop_minutes = NULL,
		count = CASE WHEN count = 0 THEN ? ELSE count END,
		node_id = NULL, started_at = NULL, ended_at = NULL, exit_code = NULL, error = '', stop_requested_at = NULL, notice_at = NULL, notice_wall_at = NULL,
		deadline_at = NULL, interrupt_reason = NULL, ready_at = NULL, stop_reason = NULL, idle_since = NULL, minimum_applied_minutes = NULL WHERE id = ?`, r.ID, r.Count, i.ID); err != nil {
		return nil, fmt.Errorf("resume instance %d: %w", i.ID, err)
	}
	return []int64{i.ID}, nil
}
