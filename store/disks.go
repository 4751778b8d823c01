package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

// An instance's disk is its writable root filesystem, sized at launch
// (disk_gib). The agent measures it with each heartbeat (recordDisk); the
// part beyond the policy's free GiB is billed per started hour at the
// volume price while it runs (billDisks), as a volume's size is.

// recordDisk keeps what the agent last said of a running workload's disk,
// writing only when it changed.
func recordDisk(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, d *gpuportal.WorkloadDisk) error {
	if !gpuportal.DiskReportChanges(i.Disk, d) {
		return nil
	}
	enforced := 0
	if d.Enforced {
		enforced = 1
	}
	// A node that gives no disk of its own keeps nothing either — but a
	// stop already asked for decides what is kept.
	_, err := tx.ExecContext(ctx, `UPDATE instances SET disk_used_bytes = ?, disk_enforced = ?, disk_note = ?,
		disk_kept = CASE WHEN ? = 0 AND stop_requested_at IS NULL THEN 0 ELSE disk_kept END WHERE id = ?`,
		d.UsedBytes, enforced, d.Note, enforced, i.ID)
	return err
}

// startDiskBilling starts the clock of a disk with a paid part when its
// instance starts running: its first hour is due at once (the next tick).
func (db *DB) startDiskBilling(ctx context.Context, tx *sql.Tx, i *gpuportal.Instance, now time.Time) error {
	if i.Disk == nil {
		return nil
	}
	policies, err := db.policies(ctx, tx)
	if err != nil {
		return err
	}
	if policies.Global.BilledDiskGiB(i.Disk.SizeGiB) == 0 {
		return nil
	}
	// A kept disk started again is already on the clock.
	_, err = tx.ExecContext(ctx, `UPDATE instances SET disk_billed_until = coalesce(disk_billed_until, ?) WHERE id = ?`, unix(now), i.ID)
	return err
}

// billDisks charges the started hours of every disk with a paid part: up
// to now while its instance runs, up to its end once it ended (then its
// clock stops) — or, for a disk kept past its end, its whole size up to
// now while it is kept. Charges go on the ledger as the instance's disk.
func (db *DB) billDisks(ctx context.Context, tx *sql.Tx, now time.Time) error {
	policies, err := db.policies(ctx, tx)
	if err != nil {
		return err
	}
	type due struct {
		id, user, billedUntil, carry int64
		size                         int
		ended                        sql.NullInt64
		kept                         bool
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, d *due) error {
		return r.Scan(&d.id, &d.user, &d.size, &d.billedUntil, &d.carry, &d.ended, &d.kept)
	}, `SELECT id, user_id, disk_gib, disk_billed_until, disk_carry, ended_at, disk_kept <> 0 AND disk_released_at IS NULL FROM instances
		WHERE disk_billed_until IS NOT NULL AND disk_billed_until <= ? AND disk_suspended_at IS NULL ORDER BY id`, unix(now))
	if err != nil {
		return fmt.Errorf("disks due: %w", err)
	}
	price := gpuportal.Fen(policies.Global.VolumePricePerGiBMonthFen)
	for _, d := range list {
		from := fromUnix(d.billedUntil)
		until, done := now, false
		billed := policies.Global.BilledDiskGiB(d.size)
		if d.ended.Valid && d.kept {
			billed = d.size // kept: all of it, while it is
		} else if d.ended.Valid {
			// The hours started before the end (an end on the hour
			// starts none).
			until, done = fromUnix(d.ended.Int64).Add(-time.Nanosecond), true
		}
		hours := 0
		if !until.Before(from) {
			hours = gpuportal.VolumeHoursDue(from, until)
		}
		cost, carry := gpuportal.VolumeHoursCost(billed, price, d.carry, hours)
		next := sql.NullInt64{Int64: unix(from.Add(time.Duration(hours) * time.Hour)), Valid: !done}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET disk_billed_until = ?, disk_carry = ? WHERE id = ?`, next, carry, d.id); err != nil {
			return fmt.Errorf("bill the disk of instance %d: %w", d.id, err)
		}
		if cost == 0 {
			continue
		}
		id := d.id
		e := ledgerPost{userID: d.user, at: from, kind: gpuportal.LedgerDisk, amount: cost, instanceID: &id,
			desc: fmt.Sprintf("Disk of instance #%d, %d GiB (%d GiB beyond the free part), %d h", d.id, d.size, billed, hours)}
		if err := db.postLedger(ctx, tx, e); err != nil {
			return err
		}
	}
	return db.keptDisksAtZeroBalance(ctx, tx, now, price)
}

// keptDisksAtZeroBalance holds kept disks to the volumes' rule: an owner
// whose balance ran out has them suspended (unbilled, told at once),
// kept VolumeRetention from then and released at its end (told
// VolumeWarnBefore). Paying their arrears (the hours since they were last
// paid) lifts the suspension; a top-up that does not cover them lifts
// nothing, so the days keep counting from the first unpaid one.
func (db *DB) keptDisksAtZeroBalance(ctx context.Context, tx *sql.Tx, now time.Time, price gpuportal.Fen) error {
	type kept struct {
		id, user, billedUntil, carry int64
		size                         int
		suspended                    sql.NullInt64
		warned                       bool
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, k *kept) error {
		return r.Scan(&k.id, &k.user, &k.size, &k.billedUntil, &k.carry, &k.suspended, &k.warned)
	}, `SELECT i.id, i.user_id, i.disk_gib, i.disk_billed_until, i.disk_carry, i.disk_suspended_at, i.disk_warned_at IS NOT NULL FROM `+db.indexedAs("instances", "i", "instances_kept_disks")+`
		JOIN accounts a ON a.user_id = i.user_id
		WHERE i.disk_kept <> 0 AND i.disk_released_at IS NULL AND i.ended_at IS NOT NULL AND i.disk_billed_until IS NOT NULL
		AND (i.disk_suspended_at IS NOT NULL OR a.balance_fen + a.credit_limit_fen <= 0) ORDER BY i.id`)
	if err != nil {
		return fmt.Errorf("kept disks at zero balance: %w", err)
	}
	for _, k := range list {
		p := gpuportal.NoteParams{InstanceID: k.id}
		if !k.suspended.Valid {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET disk_suspended_at = ? WHERE id = ?`, unix(now), k.id); err != nil {
				return err
			}
			p.Deadline = now.Add(gpuportal.VolumeRetention)
			if err := db.notify(ctx, tx, k.user, gpuportal.NoteDiskSuspended, p); err != nil {
				return err
			}
			continue
		}
		hours := gpuportal.VolumeHoursDue(fromUnix(k.billedUntil), now)
		arrears, carry := gpuportal.VolumeHoursCost(k.size, price, k.carry, hours)
		var spendable gpuportal.Fen
		if err := tx.QueryRowContext(ctx, `SELECT balance_fen + credit_limit_fen FROM accounts WHERE user_id = ?`, k.user).Scan(&spendable); err != nil {
			return err
		}
		if spendable > 0 && spendable >= arrears {
			until := fromUnix(k.billedUntil).Add(time.Duration(hours) * time.Hour)
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET disk_suspended_at = NULL, disk_warned_at = NULL, disk_billed_until = ?, disk_carry = ? WHERE id = ?`,
				unix(until), carry, k.id); err != nil {
				return err
			}
			if arrears > 0 {
				id := k.id
				if err := db.postLedger(ctx, tx, ledgerPost{userID: k.user, at: fromUnix(k.billedUntil), kind: gpuportal.LedgerDisk, amount: arrears, instanceID: &id,
					desc: fmt.Sprintf("Disk of instance #%d, %d GiB kept while suspended, %d h", k.id, k.size, hours)}); err != nil {
					return err
				}
			}
			continue
		}
		releaseNow, warnNow := gpuportal.VolumeDeletion(fromUnix(k.suspended.Int64), now, k.warned)
		p.Deadline = fromUnix(k.suspended.Int64).Add(gpuportal.VolumeRetention)
		switch {
		case releaseNow:
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET disk_kept = 0, disk_released_at = ?, disk_billed_until = NULL WHERE id = ?`, unix(now), k.id); err != nil {
				return err
			}
			if err := db.notify(ctx, tx, k.user, gpuportal.NoteDiskReleased, p); err != nil {
				return err
			}
		case warnNow:
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET disk_warned_at = ? WHERE id = ?`, unix(now), k.id); err != nil {
				return err
			}
			if err := db.notify(ctx, tx, k.user, gpuportal.NoteDiskReleaseSoon, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// diskSuspended says whether instance id's kept disk is suspended (its
// owner's balance ran out): it neither starts nor is resumed until paid.
func diskSuspended(ctx context.Context, q queryer, id int64) (bool, error) {
	var suspended bool
	err := q.QueryRowContext(ctx, `SELECT disk_suspended_at IS NOT NULL FROM instances WHERE id = ?`, id).Scan(&suspended)
	return suspended, err
}
