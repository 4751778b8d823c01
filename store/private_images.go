package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// Private images: a customer imports a docker save / OCI archive from one
// of their volumes (ImportImage); one node of the volume's region copies
// it into the region's image root, checks it and loads it, and reports
// (RecordImageReports). A ready image runs wherever a catalog image does
// in its region, loaded by each node from the image root when first used,
// and is billed per started GiB-hour at the volume price (billImages).

// imageDeletionNotice is how long the region's nodes are told to remove
// a deleted image's copies (each does so once; a node away longer keeps
// an unused copy until its image storage is cleaned).
const imageDeletionNotice = 30 * time.Minute

const privateImageColumns = `id, name, region_id, status, error, size_bytes, ref_token`

func scanPrivateImage(row interface{ Scan(...any) error }) (gpuportal.Image, error) {
	var n int64
	var token string
	im := gpuportal.Image{Owner: "me"}
	if err := row.Scan(&n, &im.Name, &im.Region, &im.Status, &im.Error, &im.SizeBytes, &token); err != nil {
		return im, err
	}
	im.ID, im.Reference = gpuportal.PrivateImageID(n), gpuportal.PrivateImageReference(n, token)
	return im, nil
}

// newImageToken is a private image's own tag (PrivateImageReference).
func newImageToken() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ImagesFor lists the catalog (ready, in the admins' order) and then the
// user's own images, newest first.
func (db *DB) ImagesFor(ctx context.Context, user *gpuportal.User) ([]gpuportal.Image, error) {
	out, err := listImages(ctx, db.read)
	if err != nil {
		return nil, err
	}
	own, err := scanAll(ctx, db.read, func(r *sql.Rows, im *gpuportal.Image) error {
		var err error
		*im, err = scanPrivateImage(r)
		return err
	}, `SELECT `+privateImageColumns+` FROM private_images WHERE user_id = ? AND deleted_at IS NULL ORDER BY id DESC`, user.ID)
	if err != nil {
		return nil, fmt.Errorf("list private images: %w", err)
	}
	return append(out, own...), nil
}

// PrivateImage is one of the user's own images (404 for anyone else's).
func (db *DB) PrivateImage(ctx context.Context, user *gpuportal.User, id string) (*gpuportal.Image, error) {
	return privateImageFor(ctx, db.read, user.ID, id)
}

func privateImageFor(ctx context.Context, q queryer, userID int64, id string) (*gpuportal.Image, error) {
	n, ok := gpuportal.ParsePrivateImageID(id)
	if !ok {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Image %q not found.", id)
	}
	im, err := scanPrivateImage(q.QueryRowContext(ctx, `SELECT `+privateImageColumns+` FROM private_images WHERE id = ? AND user_id = ? AND deleted_at IS NULL`, n, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Image %q not found.", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read image %s: %w", id, err)
	}
	return &im, nil
}

// ImportImage starts a private image from an archive in one of the
// user's volumes: saving, on a node of the volume's region that then
// copies, checks and loads it. Another's volume is 404; a bad path 400.
func (db *DB) ImportImage(ctx context.Context, user *gpuportal.User, req gpuportal.ImageImport) (*gpuportal.Image, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var id int64
	var node string
	err := db.inTx(ctx, "import image", func(tx *sql.Tx) error {
		v, err := volumeFor(ctx, tx, user.ID, req.VolumeID)
		if err != nil {
			return err
		}
		if node, err = db.volumeTarget(ctx, tx, user, v.ID); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `INSERT INTO private_images (user_id, name, region_id, volume_id, path, node_id, created_at, ref_token, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			user.ID, req.Name, v.Region, v.ID, req.Path, node, unix(db.now()), newImageToken(), user.MemberID()).Scan(&id); err != nil {
			return fmt.Errorf("insert image: %w", err)
		}
		return bumpNode(ctx, tx, node)
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, node)
	return db.PrivateImage(ctx, user, gpuportal.PrivateImageID(id))
}

// SaveInstanceImage makes a private image of an instance's disk: while
// it runs (on its node), or stopped with its disk kept (on a node of its
// region, which mounts the disk for the while). 409 without a disk to
// save, or while another save of it runs; another's instance is 404.
func (db *DB) SaveInstanceImage(ctx context.Context, user *gpuportal.User, instanceID int64, req gpuportal.ImageSave) (*gpuportal.Image, error) {
	name := strings.TrimSpace(req.Name)
	if name == "" || len(name) > 100 {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "name", "The image name must be 1 to 100 characters.")
	}
	var id int64
	var node string
	err := db.inTx(ctx, "save instance image", func(tx *sql.Tx) error {
		i, err := instanceFor(ctx, tx, user, instanceID)
		if err != nil {
			return err
		}
		if i.UserID != user.ID {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only the instance's owner saves it as an image.")
		}
		if err := mayChangeInstance(user, i); err != nil {
			return err
		}
		running := i.Status == gpuportal.InstanceRunning || i.Status == gpuportal.InstanceInterrupting
		switch {
		case i.Disk == nil:
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d has no disk to save.", i.ID)
		case running && (i.Disk.Enforced == nil || !*i.Disk.Enforced):
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d's node gives it no disk of its own (a read-only image): there is nothing of it to save.", i.ID)
		case !running && !i.Disk.Kept:
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d is %s without a kept disk: there is nothing of it to save.", i.ID, i.Status)
		}
		if saving, err := savingImageOf(ctx, tx, i.ID); err != nil {
			return err
		} else if saving {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d is being saved as an image already; wait for that one.", i.ID)
		}
		node = i.Node
		if !running {
			if err := tx.QueryRowContext(ctx, `SELECT id FROM nodes WHERE region_id = ? AND online = 1 AND token_revoked_at IS NULL ORDER BY id LIMIT 1`, i.Region).Scan(&node); errors.Is(err, sql.ErrNoRows) {
				return gpuportal.Errorf(gpuportal.EUNAVAILABLE, "No node of region %s is online to read the disk; try again shortly.", i.Region)
			} else if err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, `INSERT INTO private_images (user_id, name, region_id, instance_id, node_id, created_at, ref_token, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			user.ID, name, i.Region, i.ID, node, unix(db.now()), newImageToken(), user.MemberID()).Scan(&id); err != nil {
			return fmt.Errorf("insert image: %w", err)
		}
		return bumpNode(ctx, tx, node)
	})
	if err != nil {
		return nil, err
	}
	db.wake(ctx, node)
	return db.PrivateImage(ctx, user, gpuportal.PrivateImageID(id))
}

// savingImageOf says whether an image of instance id is being saved (its
// disk is being read: it neither starts nor goes meanwhile).
func savingImageOf(ctx context.Context, q queryer, id int64) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM private_images WHERE instance_id = ? AND status = 'saving' AND deleted_at IS NULL`, id).Scan(&n)
	return n > 0, err
}

// DeletePrivateImage deletes one of the user's images: refused (409)
// while an instance runs it, a job that names it has tasks to run or a
// reservation's launch names it. The region's nodes remove their copies.
func (db *DB) DeletePrivateImage(ctx context.Context, user *gpuportal.User, id string) error {
	var node string
	err := db.inTx(ctx, "delete image", func(tx *sql.Tx) error {
		im, err := privateImageFor(ctx, tx, user.ID, id)
		if err != nil {
			return err
		}
		var uses int
		if err := tx.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM instances WHERE user_id = ? AND image = ? AND status IN ('pending', 'running', 'interrupting')) +
			(SELECT count(*) FROM jobs WHERE user_id = ? AND image = ? AND status IN ('queued', 'running')) +
			(SELECT count(*) FROM reservations WHERE user_id = ? AND status IN ('confirmed', 'active') AND launch_json LIKE ?)`,
			user.ID, im.Reference, user.ID, im.Reference, user.ID, `%"image":"`+im.ID+`"%`).Scan(&uses); err != nil {
			return fmt.Errorf("look for the image's uses: %w", err)
		}
		if uses > 0 {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Image %s is in use (%d instances, jobs or reservation launches); stop or change them first.", im.ID, uses)
		}
		n, _ := gpuportal.ParsePrivateImageID(im.ID)
		if err := tx.QueryRowContext(ctx, `UPDATE private_images SET deleted_at = ?, billed_until = NULL WHERE id = ? RETURNING node_id`, unix(db.now()), n).Scan(&node); err != nil {
			return fmt.Errorf("delete image: %w", err)
		}
		return bumpNode(ctx, tx, node)
	})
	if err == nil {
		db.wake(ctx, node)
	}
	return err
}

// ImageOrders is what node is to do about private images: the imports it
// was given that it has not reported, and the images of its region
// deleted lately (whose copies it removes).
func (db *DB) ImageOrders(ctx context.Context, node string) ([]gpuportal.ImageImportOrder, []int64, error) {
	imports, err := scanAll(ctx, db.read, func(r *sql.Rows, o *gpuportal.ImageImportOrder) error {
		var token string
		if err := r.Scan(&o.ImageID, &o.VolumeID, &o.Path, &o.InstanceID, &o.BaseImage, &o.DiskGiB, &token); err != nil {
			return err
		}
		o.Reference = gpuportal.PrivateImageReference(o.ImageID, token)
		return nil
	}, `SELECT p.id, coalesce(p.volume_id, 0), p.path, coalesce(p.instance_id, 0), coalesce(i.image, ''), coalesce(i.disk_gib, 0), p.ref_token
		FROM private_images p LEFT JOIN instances i ON i.id = p.instance_id
		WHERE p.node_id = ? AND p.status = 'saving' AND p.deleted_at IS NULL ORDER BY p.id`, node)
	if err != nil {
		return nil, nil, fmt.Errorf("image imports: %w", err)
	}
	for k := range imports {
		imports[k].MaxBytes = gpuportal.MaxImageArchiveBytes
	}
	deleted, err := scanAll(ctx, db.read, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT p.id FROM private_images p JOIN nodes n ON n.region_id = p.region_id WHERE n.id = ? AND p.deleted_at IS NOT NULL AND p.deleted_at >= ? ORDER BY p.id`,
		node, unix(db.now().Add(-imageDeletionNotice)))
	if err != nil {
		return nil, nil, fmt.Errorf("deleted images: %w", err)
	}
	return imports, deleted, nil
}

// RecordImageReports applies what node says of the imports it was given:
// ready (its billing starts) or failed with the reason. A report of an
// import given to another node, or already settled, changes nothing.
func (db *DB) RecordImageReports(ctx context.Context, node string, reports []gpuportal.ImageReport) error {
	if len(reports) == 0 {
		return nil
	}
	return db.inTx(ctx, "record image reports", func(tx *sql.Tx) error {
		now := db.now()
		for _, r := range reports {
			switch r.Status {
			case gpuportal.ImageReady:
				if _, err := tx.ExecContext(ctx, `UPDATE private_images SET status = 'ready', size_bytes = ?, ready_at = ?, billed_until = ?
					WHERE id = ? AND node_id = ? AND status = 'saving' AND deleted_at IS NULL`, max(r.SizeBytes, 0), unix(now), unix(now), r.ImageID, node); err != nil {
					return fmt.Errorf("image %d ready: %w", r.ImageID, err)
				}
			case gpuportal.ImageFailed:
				msg := r.Error
				if len(msg) > 500 {
					msg = msg[:500]
				}
				if _, err := tx.ExecContext(ctx, `UPDATE private_images SET status = 'failed', error = ? WHERE id = ? AND node_id = ? AND status = 'saving'`,
					msg, r.ImageID, node); err != nil {
					return fmt.Errorf("image %d failed: %w", r.ImageID, err)
				}
			}
		}
		return nil
	})
}

// billImages charges every ready image's started hours, per GiB of its
// archive (rounded up), at the volume price.
func (db *DB) billImages(ctx context.Context, tx *sql.Tx, now time.Time) error {
	policies, err := db.policies(ctx, tx)
	if err != nil {
		return err
	}
	price := gpuportal.Fen(policies.Global.VolumePricePerGiBMonthFen)
	type due struct {
		id, user, size, billedUntil, carry int64
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, d *due) error {
		return r.Scan(&d.id, &d.user, &d.size, &d.billedUntil, &d.carry)
	}, `SELECT id, user_id, size_bytes, billed_until, carry FROM private_images WHERE billed_until IS NOT NULL AND billed_until <= ? ORDER BY id`, unix(now))
	if err != nil {
		return fmt.Errorf("images due: %w", err)
	}
	for _, d := range list {
		gib := int((d.size + 1<<30 - 1) >> 30)
		from := fromUnix(d.billedUntil)
		hours := gpuportal.VolumeHoursDue(from, now)
		cost, carry := gpuportal.VolumeHoursCost(gib, price, d.carry, hours)
		if _, err := tx.ExecContext(ctx, `UPDATE private_images SET billed_until = ?, carry = ? WHERE id = ?`, unix(from.Add(time.Duration(hours)*time.Hour)), carry, d.id); err != nil {
			return fmt.Errorf("bill image %d: %w", d.id, err)
		}
		if cost == 0 {
			continue
		}
		e := ledgerPost{userID: d.user, at: from, kind: gpuportal.LedgerImage, amount: cost,
			desc: gpuportal.PrivateImageID(d.id)} // the title says what it is, in the reader's language
		if err := db.postLedger(ctx, tx, e); err != nil {
			return err
		}
	}
	return nil
}
