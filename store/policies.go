package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"gpuportal"
)

// Policies returns the policies document (the defaults until an admin
// saves one).
func (db *DB) Policies(ctx context.Context) (gpuportal.Policies, error) {
	return db.policies(ctx, db.read)
}

func (db *DB) policies(ctx context.Context, q queryer) (gpuportal.Policies, error) {
	var doc string
	err := q.QueryRowContext(ctx, `SELECT document FROM policies WHERE id = 1`).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return gpuportal.DefaultPolicies(), nil
	} else if err != nil {
		return gpuportal.Policies{}, fmt.Errorf("read policies: %w", err)
	}
	return decodePolicies(doc)
}

// lastPolicies is the policies document last decoded: every quote,
// launch, tick and billing step reads it, and it changes only when an
// admin saves a new one (decoding it each time was a twentieth of a
// simulated fleet's time).
var lastPolicies struct {
	sync.Mutex
	doc     string
	decoded gpuportal.Policies
	ok      bool
}

// decodePolicies reads the stored policies document; none stored yet
// (empty) means the defaults. The answer is the caller's own (a clone of
// the document last decoded, when it is the same).
func decodePolicies(doc string) (gpuportal.Policies, error) {
	lastPolicies.Lock()
	defer lastPolicies.Unlock()
	if lastPolicies.ok && lastPolicies.doc == doc {
		return lastPolicies.decoded.Clone(), nil
	}
	p := gpuportal.DefaultPolicies()
	if doc != "" {
		p = gpuportal.PoliciesToDecode()
		if err := json.Unmarshal([]byte(doc), &p); err != nil {
			return gpuportal.Policies{}, fmt.Errorf("decode policies: %w", err)
		}
		if p.Models == nil {
			p.Models = map[string]gpuportal.PolicyOverride{}
		}
	}
	lastPolicies.doc, lastPolicies.decoded, lastPolicies.ok = doc, p, true
	return p.Clone(), nil
}

// SetPolicies replaces the policies document (admin only). It is validated
// field by field; on any problem nothing is saved and every problem is
// returned. The change is audited old → new. New rules apply to new
// bookings; existing ones keep the price and tiers they were booked with.
func (db *DB) SetPolicies(ctx context.Context, actor *gpuportal.User, p gpuportal.Policies) error {
	if !actor.IsAdmin() {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins can change policies.")
	}
	if p.Models == nil {
		p.Models = map[string]gpuportal.PolicyOverride{}
	}
	if err := db.CheckPolicies(ctx, p); err != nil {
		return err
	}
	doc, err := json.Marshal(p)
	if err != nil {
		return err
	}
	// A policy change may free capacity for waiters (reservable share).
	return db.kickAfter(ctx, db.inTx(ctx, "set policies", func(tx *sql.Tx) error {
		old, err := db.policies(ctx, tx)
		if err != nil {
			return named("read policies", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO policies (id, document, updated_at, updated_by) VALUES (1, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET document = excluded.document, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
			string(doc), unix(db.now()), actor.ID); err != nil {
			return fmt.Errorf("save policies: %w", err)
		}
		return db.audit(ctx, tx, actor.ID, "policies.update", "policies", old, p)
	}))
}

// CheckPolicies validates a policies document against the catalog's
// models: every problem (gpuportal.ValidationErrors), or nil.
func (db *DB) CheckPolicies(ctx context.Context, p gpuportal.Policies) error {
	models, err := db.Models(ctx)
	if err != nil {
		return err
	}
	ids := make([]string, len(models))
	for i, m := range models {
		ids[i] = m.ID
	}
	if errs := p.Validate(ids); len(errs) > 0 {
		return gpuportal.ValidationErrors(errs)
	}
	return nil
}
