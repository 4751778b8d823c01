package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// Budgets: a customer sets a monthly budget; the tick tells them once a
// month at each of gpuportal.BudgetLevels of it. A budget stops nothing.

// spendKinds is the SQL list of the kinds a customer's spend counts
// (charges less refunds: gpuportal.RevenueKinds).
var spendKinds = "'" + strings.Join(gpuportal.RevenueKinds, "', '") + "'"

// SetBudget sets the user's own monthly budget (0: none). A new budget is
// told afresh: a level it has reached already is told at the next tick.
func (db *DB) SetBudget(ctx context.Context, user *gpuportal.User, monthly gpuportal.Fen) (gpuportal.Budget, error) {
	if err := gpuportal.ValidateBudget(monthly); err != nil {
		return gpuportal.Budget{}, err
	}
	err := db.inTx(ctx, "set budget", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE users SET monthly_budget_fen = ?, budget_noticed = '' WHERE id = ?`, monthly, user.ID)
		return err
	})
	if err != nil {
		return gpuportal.Budget{}, err
	}
	return db.Budget(ctx, user.ID)
}

// Budget is the user's monthly budget and this month's spend (site time).
func (db *DB) Budget(ctx context.Context, userID int64) (gpuportal.Budget, error) {
	var monthly gpuportal.Fen
	if err := db.read.QueryRowContext(ctx, `SELECT monthly_budget_fen FROM users WHERE id = ?`, userID).Scan(&monthly); err != nil {
		return gpuportal.Budget{}, fmt.Errorf("budget: %w", err)
	}
	spent, err := db.spentSince(ctx, db.read, userID, db.monthStart(db.now()))
	if err != nil {
		return gpuportal.Budget{}, err
	}
	return gpuportal.NewBudget(monthly, spent), nil
}

// monthStart is the first instant of now's month, site time.
func (db *DB) monthStart(now time.Time) time.Time {
	local := now.In(db.Location)
	return time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, db.Location)
}

func (db *DB) spentSince(ctx context.Context, q queryer, userID int64, from time.Time) (gpuportal.Fen, error) {
	var spent gpuportal.Fen
	err := q.QueryRowContext(ctx, `SELECT COALESCE(sum(amount_fen), 0) FROM ledger_entries WHERE user_id = ? AND at >= ? AND kind IN (`+spendKinds+`)`,
		userID, unix(from)).Scan(&spent)
	if err != nil {
		return 0, fmt.Errorf("spend: %w", err)
	}
	return spent, nil
}

// SpendByDay is what the user spent each day of [from, to) (site-time
// days, from's midnight on), every day listed, nothing spent or not.
func (db *DB) SpendByDay(ctx context.Context, userID int64, from, to time.Time) ([]gpuportal.DaySpend, error) {
	local := from.In(db.Location)
	first := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, db.Location)
	var days []gpuportal.DaySpend
	index := map[string]int{}
	for d := first; d.Before(to); d = d.AddDate(0, 0, 1) {
		index[d.Format(time.DateOnly)] = len(days)
		days = append(days, gpuportal.DaySpend{Date: d.Format(time.DateOnly)})
	}
	rows, err := db.read.QueryContext(ctx, `SELECT at, amount_fen FROM ledger_entries WHERE user_id = ? AND at >= ? AND at < ? AND kind IN (`+spendKinds+`)`,
		userID, unix(first), unix(to))
	if err != nil {
		return nil, fmt.Errorf("spend by day: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var at int64
		var amount gpuportal.Fen
		if err := rows.Scan(&at, &amount); err != nil {
			return nil, err
		}
		if k, ok := index[time.Unix(at, 0).In(db.Location).Format(time.DateOnly)]; ok {
			days[k].Spent += amount
		}
	}
	return days, rows.Err()
}

// budgetNotices tells each customer whose spend this month reached a
// level of their budget, once per level a month (budget_noticed keeps
// "2026-12:80"). The tick calls it.
func (db *DB) budgetNotices(ctx context.Context, tx *sql.Tx, now time.Time) error {
	type owner struct {
		id      int64
		monthly gpuportal.Fen
		noticed string
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, monthly_budget_fen, budget_noticed FROM users WHERE monthly_budget_fen > 0 AND disabled_at IS NULL`)
	if err != nil {
		return err
	}
	var owners []owner
	for rows.Next() {
		var o owner
		if err := rows.Scan(&o.id, &o.monthly, &o.noticed); err != nil {
			rows.Close()
			return err
		}
		owners = append(owners, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	start := db.monthStart(now)
	month := start.Format("2006-01")
	for _, o := range owners {
		spent, err := db.spentSince(ctx, tx, o.id, start)
		if err != nil {
			return err
		}
		b := gpuportal.NewBudget(o.monthly, spent)
		level := b.Level()
		if level == 0 || !budgetNoticeDue(o.noticed, month, level) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET budget_noticed = ? WHERE id = ?`, fmt.Sprintf("%s:%d", month, level), o.id); err != nil {
			return err
		}
		if err := db.notify(ctx, tx, o.id, gpuportal.NoteBudgetReached, gpuportal.NoteParams{Budget: &b}); err != nil {
			return err
		}
	}
	return db.memberLimitNotices(ctx, tx, now)
}

// memberLimitNotices tells each team member whose spend this month
// reached a level of the monthly limit their team gave them — and the
// team's owners when it is all of it — once per level a month.
func (db *DB) memberLimitNotices(ctx context.Context, tx *sql.Tx, now time.Time) error {
	type limited struct {
		team, account, member int64
		name, email, noticed  string
		limit                 gpuportal.Fen
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, l *limited) error {
		return r.Scan(&l.team, &l.account, &l.member, &l.name, &l.email, &l.noticed, &l.limit)
	}, `SELECT t.id, t.account_id, m.user_id, t.name, u.email, m.limit_noticed, m.monthly_spend_limit_fen FROM team_members m
		JOIN teams t ON t.id = m.team_id JOIN users u ON u.id = m.user_id WHERE m.monthly_spend_limit_fen > 0 AND t.deleted_at IS NULL ORDER BY t.id, m.user_id`)
	if err != nil {
		return fmt.Errorf("member limits: %w", err)
	}
	start := db.monthStart(now)
	month := start.Format("2006-01")
	spent := map[int64]map[int64]gpuportal.Fen{}
	for _, l := range list {
		if spent[l.team] == nil {
			if spent[l.team], err = db.memberSpend(ctx, tx, l.account, 0, start); err != nil {
				return err
			}
		}
		b := gpuportal.NewBudget(l.limit, spent[l.team][l.member])
		level := b.Level()
		if level == 0 || !budgetNoticeDue(l.noticed, month, level) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE team_members SET limit_noticed = ? WHERE team_id = ? AND user_id = ?`, fmt.Sprintf("%s:%d", month, level), l.team, l.member); err != nil {
			return err
		}
		p := gpuportal.NoteParams{Budget: &b, Team: l.name, Member: l.email}
		people := []int64{l.member}
		if level >= 100 {
			owners, err := scanAll(ctx, tx, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
				`SELECT user_id FROM team_members WHERE team_id = ? AND role = 'owner' AND user_id <> ? ORDER BY user_id`, l.team, l.member)
			if err != nil {
				return err
			}
			people = append(people, owners...)
		}
		for _, person := range people {
			if err := db.notifyOne(ctx, tx, person, gpuportal.NoteMemberLimit, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// budgetNoticeDue says whether a budget notice at level is still to be
// sent this month, given the last one sent ("2026-12:80", or "").
func budgetNoticeDue(noticed, month string, level int) bool {
	m, l, ok := strings.Cut(noticed, ":")
	if !ok || m != month {
		return true
	}
	var last int
	_, _ = fmt.Sscan(l, &last)
	return level > last
}
