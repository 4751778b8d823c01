package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Setting returns a site setting, or "" and false when unset.
func (db *DB) Setting(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := db.write.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	} else if err != nil {
		return "", false, fmt.Errorf("read setting %s: %w", key, err)
	}
	return v, true, nil
}

// SettingOrInit returns a setting, first storing init() as its value when it
// is unset. Concurrent callers (several portals) all get the same value.
func (db *DB) SettingOrInit(ctx context.Context, key string, init func() string) (string, error) {
	if _, err := db.write.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, key, init()); err != nil {
		return "", fmt.Errorf("init setting %s: %w", key, err)
	}
	v, _, err := db.Setting(ctx, key)
	return v, err
}
