package store

import (
	"context"
	"strings"

	"gpuportal"
)

// listQuery is the WHERE clause of one of the lists users read
// (instances, reservations, jobs, waitlist entries), built from what the
// user may see (Miniflux's EntryQueryBuilder): every list starts with
// visibleTo, so none can forget the owner, and pages through the same
// code. Teams make the rule richer; it changes here.
type listQuery struct {
	table string
	where []string
	args  []any
}

// visibleTo starts a list of table's rows the user may see: their own,
// or everybody's for an admin.
func visibleTo(user *gpuportal.User, table string) *listQuery {
	q := &listQuery{table: table, where: []string{"1 = 1"}}
	if !user.IsAdmin() {
		q.and("user_id = ?", user.ID)
	}
	return q
}

// and narrows the list.
func (q *listQuery) and(cond string, args ...any) *listQuery {
	q.where = append(q.where, cond)
	q.args = append(q.args, args...)
	return q
}

// ofUser narrows it to one user's rows (an admin's view of a customer);
// 0 leaves it as it is.
func (q *listQuery) ofUser(userID int64) *listQuery {
	if userID != 0 {
		q.and("user_id = ?", userID)
	}
	return q
}

// labelled narrows it to rows with every label of f (kind: the rows'
// kind of object).
func (q *listQuery) labelled(kind string, f gpuportal.LabelFilter) *listQuery {
	for _, m := range f {
		q.and("id IN (SELECT object_id FROM object_labels WHERE kind = ? AND key = ? AND value = ?)", kind, m.Key, m.Value)
	}
	return q
}

func (q *listQuery) whereSQL() string { return strings.Join(q.where, " AND ") }

// page counts the whole list when p asks (p.Total) and returns the query
// of p's rows of it, columns and order given, with its arguments.
func (q *listQuery) page(ctx context.Context, db *DB, p Page, columns, order string) (string, []any, error) {
	if err := db.count(ctx, p, q.table, q.whereSQL(), q.args...); err != nil {
		return "", nil, err
	}
	query := `SELECT ` + columns + ` FROM ` + q.table + ` WHERE ` + q.whereSQL() + ` ORDER BY ` + order + ` LIMIT ? OFFSET ?`
	args := append(append([]any{}, q.args...), p.Limit, max(p.Offset, 0))
	return query, args, nil
}
