package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"gpuportal"
)

// When the database cannot be written — SQLite's disk is full or failing,
// PostgreSQL is out of space — a request gets a clear 503 (nothing was
// changed; it can be tried again), never "500 Internal error.", and
// /healthz fails until a write succeeds again.

// errWritesFailing is the answer to a write the database refused for
// want of space.
var errWritesFailing = gpuportal.Errorf(gpuportal.EUNAVAILABLE, "The portal cannot save changes right now: its database disk is full or failing. Nothing was changed; please try again in a few minutes.")

// SQLite's primary result codes for a disk that is full or failing.
const (
	sqliteIOErr = 10
	sqliteFull  = 13
)

// storageFailure reports whether err is the database saying it cannot
// write for want of space (or a failing disk).
func storageFailure(err error) bool {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff { // extended codes keep the primary one in the low byte
		case sqliteFull, sqliteIOErr:
			return true
		}
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "53100" || pgErr.Code == "53200" || pgErr.Code == "58030") // disk_full, out_of_memory, io_error
}

// noteWrite records how a write transaction ended: a storage failure
// becomes errWritesFailing and marks writes as failing; a success clears
// the mark.
func (db *DB) noteWrite(err error) error {
	switch {
	case err == nil:
		db.writesFailing.Store(false)
	case storageFailure(err):
		db.writesFailing.Store(true)
		return fmt.Errorf("%w (%s)", errWritesFailing, err.Error())
	}
	return err
}

// WritesHealthy reports whether the database takes writes. While the last
// write failed for want of space it tries one small write (so it notices
// when space is back), and answers from that.
func (db *DB) WritesHealthy(ctx context.Context) bool {
	if !db.writesFailing.Load() {
		return true
	}
	err := db.noteWrite(db.probeWrite(ctx))
	return err == nil
}

func (db *DB) probeWrite(ctx context.Context) error {
	_, err := db.write.ExecContext(ctx, `INSERT INTO settings (key, value) VALUES ('health_probe', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
		strconv.FormatInt(db.Wall.Now().UnixNano(), 10))
	return err
}
