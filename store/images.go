package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gpuportal"
)

// Images lists the image catalog in the admins' order; the first is the
// default for launches that name none.
func (db *DB) Images(ctx context.Context) ([]gpuportal.Image, error) {
	return listImages(ctx, db.read)
}

func listImages(ctx context.Context, q queryer) ([]gpuportal.Image, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, name, reference, description, 'ready' FROM images ORDER BY position, id`)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	defer rows.Close()
	out := []gpuportal.Image{}
	for rows.Next() {
		var im gpuportal.Image
		if err := rows.Scan(&im.ID, &im.Name, &im.Reference, &im.Description, &im.Status); err != nil {
			return nil, err
		}
		out = append(out, im)
	}
	return out, rows.Err()
}

// imageForLaunch resolves a launch's image id: the named catalog image,
// the first when none is named (no image at all when the catalog is
// empty: the node's default runs it), or one of the user's own ready
// images of the launch's region ("img-<n>"; anyone else's is unknown).
func imageForLaunch(ctx context.Context, q queryer, userID int64, region, id string) (gpuportal.Image, error) {
	if _, ok := gpuportal.ParsePrivateImageID(id); ok {
		im, err := privateImageFor(ctx, q, userID, id)
		switch {
		case gpuportal.ErrorCode(err) == gpuportal.ENOTFOUND:
			return gpuportal.Image{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "image", "Unknown image %q; GET /api/v1/images lists them.", id)
		case err != nil:
			return gpuportal.Image{}, err
		case im.Region != region:
			return gpuportal.Image{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "image", "Image %s is kept in region %s; launch it there.", id, im.Region)
		case im.Status != gpuportal.ImageReady:
			return gpuportal.Image{}, gpuportal.FieldErrorf(gpuportal.ECONFLICT, "image", "Image %s is %s; it can be used once ready.", id, im.Status)
		}
		return *im, nil
	}
	if id == "" {
		images, err := listImages(ctx, q)
		if err != nil || len(images) == 0 {
			return gpuportal.Image{}, err
		}
		return images[0], nil
	}
	var im gpuportal.Image
	err := q.QueryRowContext(ctx, `SELECT id, name, reference, description FROM images WHERE id = ?`, id).Scan(&im.ID, &im.Name, &im.Reference, &im.Description)
	if errors.Is(err, sql.ErrNoRows) {
		return im, gpuportal.FieldErrorf(gpuportal.EINVALID, "image", "Unknown image %q; GET /api/v1/images lists them.", id)
	}
	return im, err
}

// AddImage puts an image at the end of the catalog. Audited.
func (db *DB) AddImage(ctx context.Context, actor *gpuportal.User, im gpuportal.Image) (*gpuportal.Image, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	if err := im.Validate(); err != nil {
		return nil, err
	}
	err := db.inTx(ctx, "add image", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM images WHERE id = ?`, im.ID).Scan(&n); err != nil {
			return fmt.Errorf("look for the id: %w", err)
		}
		if n > 0 {
			return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "id", "There is an image %q already.", im.ID)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO images (id, name, reference, description, position, created_at)
			VALUES (?, ?, ?, ?, (SELECT coalesce(max(position), 0) + 1 FROM images), ?)`, im.ID, im.Name, im.Reference, im.Description, unix(db.now())); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		return db.audit(ctx, tx, actor.ID, "image.add", "image/"+im.ID, nil, im)
	})
	if err != nil {
		return nil, err
	}
	im.Status = gpuportal.ImageReady
	return &im, nil
}

// DeleteImage takes an image out of the catalog; instances that run it
// keep running (they record its reference). Audited.
func (db *DB) DeleteImage(ctx context.Context, actor *gpuportal.User, id string) error {
	if !actor.IsAdmin() {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	return db.inTx(ctx, "delete image", func(tx *sql.Tx) error {
		var old gpuportal.Image
		err := tx.QueryRowContext(ctx, `SELECT id, name, reference, description FROM images WHERE id = ?`, id).Scan(&old.ID, &old.Name, &old.Reference, &old.Description)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Image %q not found.", id)
		} else if err != nil {
			return fmt.Errorf("read image: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM images WHERE id = ?`, id); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		return db.audit(ctx, tx, actor.ID, "image.delete", "image/"+id, old, nil)
	})
}
