package store

import (
	"context"
	"encoding/json"
	"fmt"
	"gpuportal"
	"strings"
)

// The audit log's types are the root package's.
type (
	AuditEntry  = gpuportal.AuditEntry
	AuditFilter = gpuportal.AuditFilter
)

// Audit lists audit entries, newest first.
func (db *DB) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 200
	}
	where, args := []string{"1 = 1"}, []any{}
	if f.Action != "" {
		where, args = append(where, "a.action LIKE ? ESCAPE '\\'"), append(args, likePrefix(f.Action))
	}
	if f.Subject != "" {
		where, args = append(where, "a.subject LIKE ? ESCAPE '\\'"), append(args, likePrefix(f.Subject))
	}
	if f.TeamID != 0 {
		where, args = append(where, "a.team_id = ?"), append(args, f.TeamID)
	}
	if f.Actor != "" {
		where, args = append(where, "u.email = ?"), append(args, strings.ToLower(strings.TrimSpace(f.Actor)))
	}
	if f.Total != nil {
		if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id WHERE `+strings.Join(where, " AND "), args...).Scan(f.Total); err != nil {
			return nil, fmt.Errorf("count audit log: %w", err)
		}
	}
	rows, err := db.read.QueryContext(ctx, `SELECT a.id, a.at, a.actor_id, coalesce(u.email, 'system'), a.action, a.subject, a.old_value, a.new_value
		FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id WHERE `+strings.Join(where, " AND ")+` ORDER BY a.id DESC LIMIT ? OFFSET ?`, append(args, f.Limit, max(0, f.Offset))...)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var e AuditEntry
		var at int64
		var actor *int64
		var oldV, newV string
		if err := rows.Scan(&e.ID, &at, &actor, &e.Actor, &e.Action, &e.Subject, &oldV, &newV); err != nil {
			return nil, err
		}
		e.At, e.ActorID = fromUnix(at), actor
		e.OldValue, e.NewValue = json.RawMessage(nonEmptyJSON(oldV)), json.RawMessage(nonEmptyJSON(newV))
		out = append(out, e)
	}
	return out, rows.Err()
}

func nonEmptyJSON(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

// likePrefix escapes a LIKE pattern and makes it a prefix match.
func likePrefix(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s) + "%"
}
