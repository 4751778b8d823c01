package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gpuportal"
)

// Labels on instances, reservations and jobs: a table of (kind, id, key,
// value), so a list filters by label with an index, in either engine.

const (
	labelInstance    = "instance"
	labelReservation = "reservation"
	labelJob         = "job"
)

// saveLabels writes an object's labels as it is created.
func saveLabels(ctx context.Context, tx *sql.Tx, kind string, id int64, labels gpuportal.Labels) error {
	for k, v := range labels {
		if _, err := tx.ExecContext(ctx, `INSERT INTO object_labels (kind, object_id, key, value) VALUES (?, ?, ?, ?)`, kind, id, k, v); err != nil {
			return fmt.Errorf("labels of %s %d: %w", kind, id, err)
		}
	}
	return nil
}

// copyLabels gives an object another's labels (a job's task its job's).
func copyLabels(ctx context.Context, tx *sql.Tx, fromKind string, fromID int64, toKind string, toID int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO object_labels (kind, object_id, key, value) SELECT ?, ?, key, value FROM object_labels WHERE kind = ? AND object_id = ?`,
		toKind, toID, fromKind, fromID)
	if err != nil {
		return fmt.Errorf("labels of %s %d: %w", toKind, toID, err)
	}
	return nil
}

// labelsOf reads the labels of objects of a kind, by id.
func labelsOf(ctx context.Context, q queryer, kind string, ids []int64) (map[int64]gpuportal.Labels, error) {
	out := map[int64]gpuportal.Labels{}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		args := []any{kind}
		for _, id := range chunk {
			args = append(args, id)
		}
		rows, err := q.QueryContext(ctx, `SELECT object_id, key, value FROM object_labels WHERE kind = ? AND object_id IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("labels: %w", err)
		}
		for rows.Next() {
			var id int64
			var k, v string
			if err := rows.Scan(&id, &k, &v); err != nil {
				rows.Close()
				return nil, err
			}
			if out[id] == nil {
				out[id] = gpuportal.Labels{}
			}
			out[id][k] = v
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// attachLabels reads the labels of a list of objects of a kind and gives
// each its own.
func attachLabels[T any](ctx context.Context, q queryer, kind string, list []*T, id func(*T) int64, set func(*T, gpuportal.Labels)) error {
	ids := make([]int64, len(list))
	for k, o := range list {
		ids[k] = id(o)
	}
	m, err := labelsOf(ctx, q, kind, ids)
	for _, o := range list {
		set(o, m[id(o)])
	}
	return err
}

func instanceLabels(ctx context.Context, q queryer, list []*gpuportal.Instance) error {
	return attachLabels(ctx, q, labelInstance, list, func(i *gpuportal.Instance) int64 { return i.ID },
		func(i *gpuportal.Instance, l gpuportal.Labels) { i.Labels = l })
}

func reservationLabels(ctx context.Context, q queryer, list []*gpuportal.Reservation) error {
	return attachLabels(ctx, q, labelReservation, list, func(r *gpuportal.Reservation) int64 { return r.ID },
		func(r *gpuportal.Reservation, l gpuportal.Labels) { r.Labels = l })
}

func jobLabels(ctx context.Context, q queryer, list []*gpuportal.Job) error {
	return attachLabels(ctx, q, labelJob, list, func(j *gpuportal.Job) int64 { return j.ID },
		func(j *gpuportal.Job, l gpuportal.Labels) { j.Labels = l })
}
