package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuportal"
)

// Volumes: a customer's disk in a region (gpuportal.Volume). The files
// live on the region's shared storage, which the portal does not mount:
// it reaches them through an agent of the region (sessions of kind
// volume). Billing and retention run in the tick (billVolumes).

const volumeColumns = `v.id, v.user_id, v.name, v.region_id, v.size_gib, v.used_bytes, v.used_at, v.created_at, v.suspended_at,
	v.created_by, (SELECT t.id FROM teams t WHERE t.account_id = v.user_id) AS team_id`

func scanVolume(row interface{ Scan(...any) error }) (*gpuportal.Volume, error) {
	var v gpuportal.Volume
	var usedAt, suspended sql.NullInt64
	var created int64
	if err := row.Scan(&v.ID, &v.UserID, &v.Name, &v.Region, &v.SizeGiB, &v.UsedBytes, &usedAt, &created, &suspended, &v.CreatedBy, &v.TeamID); err != nil {
		return nil, err
	}
	v.CreatedAt = fromUnix(created)
	v.UsedAt, v.SuspendedAt = fromNullUnix(usedAt), fromNullUnix(suspended)
	if v.SuspendedAt != nil {
		at := v.SuspendedAt.Add(gpuportal.VolumeRetention)
		v.DeleteAfter = &at
	}
	v.MountedBy = []int64{}
	return &v, nil
}

// fillVolumes adds what a reader sees of each volume beside its row: the
// instances mounting it, its status, its price now and whether its
// region's storage enforces sizes.
func (db *DB) fillVolumes(ctx context.Context, q queryer, list []*gpuportal.Volume) error {
	if len(list) == 0 {
		return nil
	}
	policies, err := db.policies(ctx, q)
	if err != nil {
		return err
	}
	byID := map[int64]*gpuportal.Volume{}
	args := make([]any, 0, len(list))
	for _, v := range list {
		byID[v.ID] = v
		args = append(args, v.ID)
	}
	type mount struct{ volume, instance int64 }
	mounts, err := scanAll(ctx, q, func(r *sql.Rows, m *mount) error { return r.Scan(&m.volume, &m.instance) },
		`SELECT iv.volume_id, iv.instance_id FROM instance_volumes iv JOIN instances i ON i.id = iv.instance_id
		WHERE i.status IN ('pending', 'running', 'interrupting') AND iv.volume_id IN (?`+strings.Repeat(", ?", len(args)-1)+`) ORDER BY iv.instance_id`, args...)
	if err != nil {
		return fmt.Errorf("volume mounts: %w", err)
	}
	for _, m := range mounts {
		byID[m.volume].MountedBy = append(byID[m.volume].MountedBy, m.instance)
	}
	notes := map[string]regionStorage{}
	for _, v := range list {
		st, ok := notes[v.Region]
		if !ok {
			if st, err = db.regionStorage(ctx, q, v.Region); err != nil {
				return err
			}
			notes[v.Region] = st
		}
		v.Enforced, v.EnforceNote = st.enforced, st.note
		v.CostPerHour = gpuportal.VolumeCostPerHour(v.SizeGiB, gpuportal.Fen(policies.Global.VolumePricePerGiBMonthFen))
		switch {
		case v.SuspendedAt != nil:
			v.Status = gpuportal.VolumeSuspended
		case len(v.MountedBy) > 0:
			v.Status = gpuportal.VolumeInUse
		default:
			v.Status = gpuportal.VolumeAvailable
		}
	}
	return nil
}

type regionStorage struct {
	enforced bool
	note     string
}

// regionStorage is what the region's online agents said of their volume
// root: sizes are enforced only where every one of them enforces them.
func (db *DB) regionStorage(ctx context.Context, q queryer, region string) (regionStorage, error) {
	var st regionStorage
	var n, enforced int
	var note sql.NullString
	err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(volume_enforced), 0), max(volume_note) FROM nodes WHERE region_id = ? AND online = 1`, region).Scan(&n, &enforced, &note)
	if err != nil {
		return st, fmt.Errorf("region storage: %w", err)
	}
	st.enforced = n > 0 && enforced == n
	st.note = note.String
	return st, nil
}

// Volumes lists the user's volumes, by name.
func (db *DB) Volumes(ctx context.Context, user *gpuportal.User) ([]gpuportal.Volume, error) {
	list, err := scanAll(ctx, db.read, func(r *sql.Rows, v **gpuportal.Volume) error {
		var err error
		*v, err = scanVolume(r)
		return err
	}, `SELECT `+volumeColumns+` FROM volumes v WHERE v.user_id = ? AND v.deleted_at IS NULL ORDER BY v.name`, user.ID)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	if err := db.fillVolumes(ctx, db.read, list); err != nil {
		return nil, err
	}
	out := make([]gpuportal.Volume, 0, len(list))
	for _, v := range list {
		out = append(out, *v)
	}
	return out, nil
}

// Volume is one of the user's volumes (another's reads as not found).
func (db *DB) Volume(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Volume, error) {
	v, err := volumeFor(ctx, db.read, user.ID, id)
	if err != nil {
		return nil, err
	}
	return v, db.fillVolumes(ctx, db.read, []*gpuportal.Volume{v})
}

func volumeFor(ctx context.Context, q queryer, userID, id int64) (*gpuportal.Volume, error) {
	v, err := scanVolume(q.QueryRowContext(ctx, `SELECT `+volumeColumns+` FROM volumes v WHERE v.id = ? AND v.user_id = ? AND v.deleted_at IS NULL`, id, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Volume %d not found.", id)
	} else if err != nil {
		return nil, fmt.Errorf("volume %d: %w", id, err)
	}
	return v, nil
}

// volumeQuota is the user's quota of volume GiB and what they hold now
// (but volume except, when it grows).
func (db *DB) volumeQuota(ctx context.Context, tx *sql.Tx, userID, except int64) (quota, held int, err error) {
	q, err := db.quotasOf(ctx, tx, userID)
	if err != nil {
		return 0, 0, err
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(size_gib), 0) FROM volumes WHERE user_id = ? AND deleted_at IS NULL AND id <> ?`, userID, except).Scan(&held); err != nil {
		return 0, 0, fmt.Errorf("volumes held: %w", err)
	}
	return *q.MaxVolumeGiB, held, nil
}

// CreateVolume makes a volume of the user's in a region; its first hour is
// charged at once (402 when the balance cannot pay it).
func (db *DB) CreateVolume(ctx context.Context, user *gpuportal.User, req gpuportal.VolumeRequest) (*gpuportal.Volume, error) {
	var id int64
	err := db.inTx(ctx, "create volume", func(tx *sql.Tx) error {
		if err := db.lockAccount(ctx, tx, user.ID); err != nil {
			return named("lock account", err)
		}
		quota, held, err := db.volumeQuota(ctx, tx, user.ID, 0)
		if err != nil {
			return named("volume quota", err)
		}
		if err := req.Validate(quota, held); err != nil {
			return err
		}
		if _, err := db.Region(ctx, req.Region); err != nil {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "region", "Unknown region %q.", req.Region)
		}
		var taken bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM volumes WHERE user_id = ? AND name = ? AND deleted_at IS NULL)`, user.ID, req.Name).Scan(&taken); err != nil {
			return named("read volumes", err)
		}
		if taken {
			return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "name", "You have a volume named %s already.", req.Name)
		}
		now := db.now()
		// A volume draws on the balance from its first hour: an account
		// with nothing available makes none.
		b, err := db.balanceIn(ctx, tx, user.ID, now)
		if err != nil {
			return named("read balance", err)
		}
		if b.Available <= 0 {
			return insufficient(1, b.Available)
		}
		if err := tx.QueryRowContext(ctx, `INSERT INTO volumes (user_id, name, region_id, size_gib, created_at, billed_until, created_by) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			user.ID, req.Name, req.Region, req.SizeGiB, unix(now), unix(now), user.MemberID()).Scan(&id); err != nil {
			return fmt.Errorf("insert volume: %w", err)
		}
		policies, err := db.policies(ctx, tx)
		if err != nil {
			return named("read policies", err)
		}
		return db.chargeVolumeHours(ctx, tx, id, user.ID, req.Name, req.SizeGiB, 0, now, 1, gpuportal.Fen(policies.Global.VolumePricePerGiBMonthFen), true)
	})
	if err != nil {
		return nil, err
	}
	return db.Volume(ctx, user, id)
}

// chargeVolumeHours charges hours started hours of a volume from
// billedUntil on and moves its billed_until past them. strict: refuse
// (insufficient_funds) rather than take the balance below what is
// available (a new volume); the tick's hourly charges draw the balance as
// a running instance does.
func (db *DB) chargeVolumeHours(ctx context.Context, tx *sql.Tx, id, userID int64, name string, sizeGiB int, carry int64, billedUntil time.Time, hours int, price gpuportal.Fen, strict bool) error {
	total, carry := gpuportal.VolumeHoursCost(sizeGiB, price, carry, hours)
	until := billedUntil.Add(time.Duration(hours) * time.Hour)
	if _, err := tx.ExecContext(ctx, `UPDATE volumes SET billed_until = ?, carry = ? WHERE id = ?`, unix(until), carry, id); err != nil {
		return fmt.Errorf("bill volume %d: %w", id, err)
	}
	if total == 0 {
		return nil
	}
	e := ledgerPost{userID: userID, at: billedUntil, kind: gpuportal.LedgerVolume, amount: total, volumeID: &id,
		desc: fmt.Sprintf("Volume %s (#%d), %d GiB, %d h", name, id, sizeGiB, hours)}
	if strict {
		return db.charge(ctx, tx, e)
	}
	return db.postLedger(ctx, tx, e)
}

// ResizeVolume grows a volume (never shrinks it) within the quota.
func (db *DB) ResizeVolume(ctx context.Context, user *gpuportal.User, id int64, sizeGiB int) (*gpuportal.Volume, error) {
	err := db.inTx(ctx, "resize volume", func(tx *sql.Tx) error {
		if err := db.lockAccount(ctx, tx, user.ID); err != nil {
			return named("lock account", err)
		}
		v, err := volumeFor(ctx, tx, user.ID, id)
		if err != nil {
			return named("read volume", err)
		}
		if sizeGiB < v.SizeGiB {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "size_gib", "A volume grows but never shrinks: it is %d GiB.", v.SizeGiB)
		}
		quota, held, err := db.volumeQuota(ctx, tx, user.ID, id)
		if err != nil {
			return named("volume quota", err)
		}
		if err := gpuportal.ValidateVolumeSize(sizeGiB, quota, held); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE volumes SET size_gib = ? WHERE id = ?`, sizeGiB, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.Volume(ctx, user, id)
}

// DeleteVolume deletes a volume that nothing uses: no instance that has
// not ended mounts it and no unfinished job names it (409 otherwise). Its
// files are removed by the region's agents (AgentDesired.DeleteVolumes).
func (db *DB) DeleteVolume(ctx context.Context, user *gpuportal.User, id int64) error {
	return db.inTx(ctx, "delete volume", func(tx *sql.Tx) error {
		v, err := volumeFor(ctx, tx, user.ID, id)
		if err != nil {
			return named("read volume", err)
		}
		if err := db.fillVolumes(ctx, tx, []*gpuportal.Volume{v}); err != nil {
			return err
		}
		if len(v.MountedBy) > 0 {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Volume %s is mounted by instance %d; stop it first.", v.Name, v.MountedBy[0])
		}
		var job sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT min(id) FROM jobs WHERE user_id = ? AND status IN ('queued', 'running') AND volumes LIKE ?`,
			user.ID, fmt.Sprintf(`%%"id":%d,%%`, id)).Scan(&job); err != nil {
			return err
		}
		if job.Valid {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Volume %s is used by job %d; cancel it or let it finish first.", v.Name, job.Int64)
		}
		_, err = tx.ExecContext(ctx, `UPDATE volumes SET deleted_at = ? WHERE id = ?`, unix(db.now()), id)
		return err
	})
}

// resolvedMount is a mount checked against the store.
type resolvedMount struct {
	volume gpuportal.Volume
	path   string
}

// resolveMounts checks the volumes a launch in region names: the user's
// own, in that region, not suspended, each once and at distinct paths.
func (db *DB) resolveMounts(ctx context.Context, q queryer, userID int64, region string, mounts []gpuportal.VolumeMount) ([]resolvedMount, error) {
	if len(mounts) > gpuportal.MaxVolumesPerLaunch {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "volumes", "A launch mounts at most %d volumes.", gpuportal.MaxVolumesPerLaunch)
	}
	var out []resolvedMount
	seen, paths := map[int64]bool{}, map[string]bool{}
	for k, m := range mounts {
		field := fmt.Sprintf("volumes[%d]", k)
		v, err := volumeFor(ctx, q, userID, m.ID)
		if err != nil {
			return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, field+".id", "Volume %d is not one of yours.", m.ID)
		}
		if v.Region != region {
			return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, field+".id", "Volume %s is in region %s; this launch runs in %s.", v.Name, v.Region, region)
		}
		if v.SuspendedAt != nil {
			return nil, gpuportal.FieldErrorf(gpuportal.EFUNDS, field+".id", "Volume %s is suspended until your balance is topped up.", v.Name)
		}
		p, err := gpuportal.ResolveMountPath(m.MountPath, v.Name, field+".mount_path")
		if err != nil {
			return nil, err
		}
		if seen[v.ID] || paths[p] {
			return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, field, "Each volume is mounted once, each at a path of its own.")
		}
		seen[v.ID], paths[p] = true, true
		out = append(out, resolvedMount{volume: *v, path: p})
	}
	return out, nil
}

// mountVolumes records an instance's volumes (checked by resolveMounts).
func (db *DB) mountVolumes(ctx context.Context, tx *sql.Tx, instanceID int64, mounts []resolvedMount) error {
	for _, m := range mounts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO instance_volumes (instance_id, volume_id, mount_path) VALUES (?, ?, ?)`, instanceID, m.volume.ID, m.path); err != nil {
			return fmt.Errorf("mount volume %d: %w", m.volume.ID, err)
		}
	}
	return nil
}

// mountsJSON is how a job keeps the volumes its tasks mount.
func mountsJSON(mounts []resolvedMount) string {
	if len(mounts) == 0 {
		return ""
	}
	list := make([]gpuportal.VolumeMount, len(mounts))
	for k, m := range mounts {
		list[k] = gpuportal.VolumeMount{ID: m.volume.ID, MountPath: m.path}
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// instanceVolumes fills each instance's Volumes.
func (db *DB) instanceVolumes(ctx context.Context, q queryer, list []*gpuportal.Instance) error {
	if len(list) == 0 {
		return nil
	}
	byID := map[int64]*gpuportal.Instance{}
	args := make([]any, 0, len(list))
	for _, i := range list {
		byID[i.ID] = i
		args = append(args, i.ID)
	}
	type row struct {
		instance int64
		m        gpuportal.InstanceVolume
	}
	rows, err := scanAll(ctx, q, func(r *sql.Rows, x *row) error {
		return r.Scan(&x.instance, &x.m.ID, &x.m.Name, &x.m.MountPath, &x.m.SizeGiB)
	},
		`SELECT iv.instance_id, iv.volume_id, v.name, iv.mount_path, v.size_gib FROM instance_volumes iv JOIN volumes v ON v.id = iv.volume_id
		WHERE iv.instance_id IN (?`+strings.Repeat(", ?", len(args)-1)+`) ORDER BY iv.instance_id, iv.mount_path`, args...)
	if err != nil {
		return fmt.Errorf("instance volumes: %w", err)
	}
	for _, x := range rows {
		i := byID[x.instance]
		i.Volumes = append(i.Volumes, x.m)
	}
	return nil
}

// volumeTarget is the node a session into one of the user's volumes goes
// through: an online agent of its region — the one that serves the volume
// now, if one does (its sessions share one account of what the volume
// holds, so writers in parallel cannot pass its size together), else the
// one with the fewest open sessions.
func (db *DB) volumeTarget(ctx context.Context, tx *sql.Tx, user *gpuportal.User, volumeID int64) (string, error) {
	v, err := volumeFor(ctx, tx, user.ID, volumeID)
	if err != nil {
		return "", err
	}
	var node string
	err = tx.QueryRowContext(ctx, `SELECT n.id FROM nodes n WHERE n.region_id = ? AND n.online = 1 AND n.token_revoked_at IS NULL
		ORDER BY (SELECT count(*) FROM sessions s WHERE s.node_id = n.id AND s.volume_id = ? AND s.closed_at IS NULL AND s.seen_at >= ?) DESC,
		(SELECT count(*) FROM sessions s WHERE s.node_id = n.id AND s.closed_at IS NULL), n.id LIMIT 1`,
		v.Region, v.ID, unix(db.Wall.Now().Add(-gpuportal.SessionStaleAfter))).Scan(&node)
	if errors.Is(err, sql.ErrNoRows) {
		return "", gpuportal.Errorf(gpuportal.EUNAVAILABLE, "No node of region %s is online to reach volume %s; try again shortly.", v.Region, v.Name)
	}
	return node, err
}

// VolumeSessionUser authorises SFTP into a volume (volume-<id>@ on the
// gateway): the key must be one its owner registered, the account active.
// Every refusal reads the same to the client.
func (db *DB) VolumeSessionUser(ctx context.Context, volumeID int64, fingerprint string) (*gpuportal.User, error) {
	var userID int64
	err := db.read.QueryRowContext(ctx, `SELECT v.user_id FROM volumes v
		JOIN ssh_keys k ON k.user_id = v.user_id AND k.fingerprint = ?
		JOIN users u ON u.id = v.user_id AND u.disabled_at IS NULL
		WHERE v.id = ? AND v.deleted_at IS NULL`, fingerprint, volumeID).Scan(&userID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Volume %d not found.", volumeID)
	} else if err != nil {
		return nil, fmt.Errorf("volume session key: %w", err)
	}
	return db.UserByID(ctx, userID)
}

// volumeRemovalWindow is how long after a volume's deletion every
// heartbeat answer of its region's nodes names it for removal: a node that
// heartbeats in that time removes the files at once, one that does not
// (offline, say) learns of it from its next measurement instead.
const volumeRemovalWindow = 2 * time.Minute

// VolumesToRemove is what a heartbeat's answer names for removal
// (AgentDesired.DeleteVolumes): the volumes the node's report, when it
// carries one (kept, RecordVolumeReport), still holds though they were
// deleted, and its region's volumes deleted in the last
// volumeRemovalWindow. Removing a volume the node never held is a no-op
// on the agent.
func (db *DB) VolumesToRemove(ctx context.Context, node string, rep *gpuportal.VolumeReport) ([]int64, error) {
	var reported []int64
	if rep != nil {
		var err error
		if reported, err = db.RecordVolumeReport(ctx, node, *rep); err != nil {
			return nil, err
		}
	}
	recent, err := scanAll(ctx, db.read, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT v.id FROM volumes v JOIN nodes n ON n.region_id = v.region_id
		WHERE n.id = ? AND v.deleted_at IS NOT NULL AND v.deleted_at >= ? ORDER BY v.id`, node, unix(db.now().Add(-volumeRemovalWindow)))
	if err != nil {
		return nil, fmt.Errorf("recently deleted volumes: %w", err)
	}
	for _, id := range recent {
		if !slices.Contains(reported, id) {
			reported = append(reported, id)
		}
	}
	return reported, nil
}

// RecordVolumeReport keeps what a node's agent measured of its volume
// root, and returns the volumes it still holds that were deleted (the
// agent removes their files).
func (db *DB) RecordVolumeReport(ctx context.Context, node string, rep gpuportal.VolumeReport) ([]int64, error) {
	var deleted []int64
	err := db.inTx(ctx, "record volume report", func(tx *sql.Tx) error {
		var region string
		if err := tx.QueryRowContext(ctx, `SELECT region_id FROM nodes WHERE id = ?`, node).Scan(&region); err != nil {
			return fmt.Errorf("node region: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE nodes SET volume_enforced = ?, volume_note = ? WHERE id = ?`, rep.Enforced, rep.Note, node); err != nil {
			return named("update nodes", err)
		}
		now := db.Wall.Now()
		for _, u := range rep.Usage {
			var gone sql.NullInt64
			err := tx.QueryRowContext(ctx, `SELECT deleted_at FROM volumes WHERE id = ? AND region_id = ?`, u.ID, region).Scan(&gone)
			if errors.Is(err, sql.ErrNoRows) {
				continue // not a volume of this region: never touched
			} else if err != nil {
				return err
			}
			if gone.Valid {
				deleted = append(deleted, u.ID)
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE volumes SET used_bytes = ?, used_at = ? WHERE id = ?`, u.UsedBytes, unix(now), u.ID); err != nil {
				return named("update volumes", err)
			}
		}
		return nil
	})
	return deleted, err
}

// billVolumes charges every live volume's hours started by now, suspends
// the volumes of owners whose balance ran out (telling them the day they
// will be deleted), warns VolumeWarnBefore that day, deletes them then,
// and lifts the suspension of owners who topped up.
func (db *DB) billVolumes(ctx context.Context, tx *sql.Tx, now time.Time) error {
	policies, err := db.policies(ctx, tx)
	if err != nil {
		return err
	}
	price := gpuportal.Fen(policies.Global.VolumePricePerGiBMonthFen)
	type due struct {
		id, user    int64
		name        string
		size        int
		carry       int64
		billedUntil int64
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, d *due) error {
		return r.Scan(&d.id, &d.user, &d.name, &d.size, &d.carry, &d.billedUntil)
	}, `SELECT id, user_id, name, size_gib, carry, billed_until FROM volumes WHERE deleted_at IS NULL AND suspended_at IS NULL AND billed_until <= ? ORDER BY id`, unix(now))
	if err != nil {
		return fmt.Errorf("volumes due: %w", err)
	}
	owners := map[int64]bool{}
	for _, d := range list {
		hours := gpuportal.VolumeHoursDue(fromUnix(d.billedUntil), now)
		if err := db.chargeVolumeHours(ctx, tx, d.id, d.user, d.name, d.size, d.carry, fromUnix(d.billedUntil), hours, price, false); err != nil {
			return err
		}
		owners[d.user] = true
	}
	// Owners whose balance ran out: their volumes are suspended, kept
	// VolumeRetention, and no longer billed.
	for user := range owners {
		var spendable gpuportal.Fen
		if err := tx.QueryRowContext(ctx, `SELECT balance_fen + credit_limit_fen FROM accounts WHERE user_id = ?`, user).Scan(&spendable); err != nil {
			return err
		}
		if spendable > 0 {
			continue
		}
		names, err := scanAll(ctx, tx, func(r *sql.Rows, n *string) error { return r.Scan(n) },
			`UPDATE volumes SET suspended_at = ? WHERE user_id = ? AND deleted_at IS NULL AND suspended_at IS NULL RETURNING name`, unix(now), user)
		if err != nil {
			return fmt.Errorf("suspend volumes: %w", err)
		}
		if len(names) > 0 {
			if err := db.notify(ctx, tx, user, gpuportal.NoteVolumesSuspended, gpuportal.NoteParams{VolumeNames: strings.Join(names, ", "), Deadline: now.Add(gpuportal.VolumeRetention)}); err != nil {
				return err
			}
		}
	}
	// Suspended volumes: lifted once the balance pays what they owe,
	// warned, deleted.
	type suspended struct {
		id, user    int64
		name        string
		at          int64
		warned      bool
		size        int
		carry       int64
		billedUntil int64
	}
	susp, err := scanAll(ctx, tx, func(r *sql.Rows, s *suspended) error {
		return r.Scan(&s.id, &s.user, &s.name, &s.at, &s.warned, &s.size, &s.carry, &s.billedUntil)
	}, `SELECT id, user_id, name, suspended_at, warned_at IS NOT NULL, size_gib, carry, billed_until FROM volumes
		WHERE deleted_at IS NULL AND suspended_at IS NOT NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("suspended volumes: %w", err)
	}
	for _, s := range susp {
		// A suspended volume was kept all along: its hours since it was
		// last paid (its arrears) are owed. It is lifted only when the
		// balance pays them, which it then does; a top-up that does not
		// cover them (a fen) lifts nothing, so the 15 days keep counting
		// from the first unpaid hour.
		hours := gpuportal.VolumeHoursDue(fromUnix(s.billedUntil), now)
		arrears, _ := gpuportal.VolumeHoursCost(s.size, price, s.carry, hours)
		var spendable gpuportal.Fen
		if err := tx.QueryRowContext(ctx, `SELECT balance_fen + credit_limit_fen FROM accounts WHERE user_id = ?`, s.user).Scan(&spendable); err != nil {
			return err
		}
		if spendable > 0 && spendable >= arrears {
			if err := db.chargeVolumeHours(ctx, tx, s.id, s.user, s.name, s.size, s.carry, fromUnix(s.billedUntil), hours, price, false); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE volumes SET suspended_at = NULL, warned_at = NULL WHERE id = ?`, s.id); err != nil {
				return err
			}
			continue
		}
		deleteNow, warnNow := gpuportal.VolumeDeletion(fromUnix(s.at), now, s.warned)
		p := gpuportal.NoteParams{VolumeNames: s.name, Deadline: fromUnix(s.at).Add(gpuportal.VolumeRetention)}
		switch {
		case deleteNow:
			if _, err := tx.ExecContext(ctx, `UPDATE volumes SET deleted_at = ? WHERE id = ?`, unix(now), s.id); err != nil {
				return err
			}
			if err := db.notify(ctx, tx, s.user, gpuportal.NoteVolumeDeleted, p); err != nil {
				return err
			}
		case warnNow:
			if _, err := tx.ExecContext(ctx, `UPDATE volumes SET warned_at = ? WHERE id = ?`, unix(now), s.id); err != nil {
				return err
			}
			if err := db.notify(ctx, tx, s.user, gpuportal.NoteVolumeDeleteSoon, p); err != nil {
				return err
			}
		}
	}
	return nil
}
