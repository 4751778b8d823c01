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

func instanceLabels(ctx context.Context, q queryer, list []*gpuportal.Instance) error {
	ids := make([]int64, len(list))
	for k, i := range list {
		ids[k] = i.ID
	}
	m, err := labelsOf(ctx, q, labelInstance, ids)
	for _, i := range list {
		i.Labels = m[i.ID]
	}
	return err
}

func reservationLabels(ctx context.Context, q queryer, list []*gpuportal.Reservation) error {
	ids := make([]int64, len(list))
	for k, r := range list {
		ids[k] = r.ID
	}
	m, err := labelsOf(ctx, q, labelReservation, ids)
	for _, r := range list {
		r.Labels = m[r.ID]
	}
	return err
}

func jobLabels(ctx context.Context, q queryer, list []*gpuportal.Job) error {
	ids := make([]int64, len(list))
	for k, j := range list {
		ids[k] = j.ID
	}
	m, err := labelsOf(ctx, q, labelJob, ids)
	for _, j := range list {
		j.Labels = m[j.ID]
	}
	return err
}
