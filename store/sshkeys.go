package store

import (
	"context"
	"database/sql"
	"fmt"

	"gpuportal"
)

// AddSSHKey keeps a public key of the user's (gpuportal.ParseSSHKey
// checks it); the same key twice is 409, more than MaxSSHKeysPerUser 422.
func (db *DB) AddSSHKey(ctx context.Context, user *gpuportal.User, name, line string) (*gpuportal.SSHKey, error) {
	k, err := gpuportal.ParseSSHKey(name, line)
	if err != nil {
		return nil, err
	}
	k.UserID, k.CreatedAt = user.ID, db.now()
	err = db.inTx(ctx, "add SSH key", func(tx *sql.Tx) error {
		var n, same int
		if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(CASE WHEN fingerprint = ? THEN 1 ELSE 0 END), 0) FROM ssh_keys WHERE user_id = ?`, k.Fingerprint, user.ID).Scan(&n, &same); err != nil {
			return fmt.Errorf("count SSH keys: %w", err)
		}
		if same > 0 {
			return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "public_key", "You added this key already (%s).", k.Fingerprint)
		}
		if n >= gpuportal.MaxSSHKeysPerUser {
			return gpuportal.FieldErrorf(gpuportal.EPOLICY, "public_key", "At most %d SSH keys per account; delete one you no longer use.", gpuportal.MaxSSHKeysPerUser)
		}
		return tx.QueryRowContext(ctx, `INSERT INTO ssh_keys (user_id, name, key_type, public_key, fingerprint, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			user.ID, k.Name, k.Type, k.PublicKey, k.Fingerprint, unix(k.CreatedAt)).Scan(&k.ID)
	})
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// SSHKeys lists the user's keys, oldest first.
func (db *DB) SSHKeys(ctx context.Context, user *gpuportal.User) ([]gpuportal.SSHKey, error) {
	out, err := scanAll(ctx, db.read, func(r *sql.Rows, k *gpuportal.SSHKey) error {
		var created int64
		err := r.Scan(&k.ID, &k.UserID, &k.Name, &k.Type, &k.PublicKey, &k.Fingerprint, &created)
		k.CreatedAt = fromUnix(created)
		return err
	}, `SELECT id, user_id, name, key_type, public_key, fingerprint, created_at FROM ssh_keys WHERE user_id = ? ORDER BY id`, user.ID)
	if err != nil {
		return nil, fmt.Errorf("list SSH keys: %w", err)
	}
	if out == nil {
		out = []gpuportal.SSHKey{}
	}
	return out, nil
}

// DeleteSSHKey removes one of the user's keys; another's is not_found.
func (db *DB) DeleteSSHKey(ctx context.Context, user *gpuportal.User, id int64) error {
	return db.inTx(ctx, "delete SSH key", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ssh_keys WHERE id = ? AND user_id = ?`, id, user.ID)
		if err != nil {
			return fmt.Errorf("delete SSH key: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "SSH key %d not found.", id)
		}
		return nil
	})
}
