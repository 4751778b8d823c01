package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gpuportal"
	"gpuportal/plan"
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
	start, _ := gpuportal.BudgetMonth(now, db.Location)
	return start
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

// loadBudgets reads the customers with a monthly budget and the team
// members with a monthly spend limit, with what each spent this month
// (site time): the planner tells them of each level reached
// (plan.budgets).
func (db *DB) loadBudgets(ctx context.Context, q queryer, now time.Time, s *plan.Snapshot) error {
	start := db.monthStart(now)
	budgets, err := scanAll(ctx, q, func(r *sql.Rows, w *plan.BudgetWatch) error { return r.Scan(&w.UserID, &w.Monthly, &w.Noticed) },
		`SELECT id, monthly_budget_fen, budget_noticed FROM users WHERE monthly_budget_fen > 0 AND disabled_at IS NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("budgets: %w", err)
	}
	for k := range budgets {
		if budgets[k].Spent, err = db.spentSince(ctx, q, budgets[k].UserID, start); err != nil {
			return err
		}
	}
	type limited struct {
		plan.LimitWatch
		account int64
	}
	limits, err := scanAll(ctx, q, func(r *sql.Rows, l *limited) error {
		return r.Scan(&l.TeamID, &l.account, &l.Member, &l.TeamName, &l.Email, &l.Noticed, &l.Limit)
	}, `SELECT t.id, t.account_id, m.user_id, t.name, u.email, m.limit_noticed, m.monthly_spend_limit_fen FROM team_members m
		JOIN teams t ON t.id = m.team_id JOIN users u ON u.id = m.user_id WHERE m.monthly_spend_limit_fen > 0 AND t.deleted_at IS NULL ORDER BY t.id, m.user_id`)
	if err != nil {
		return fmt.Errorf("member limits: %w", err)
	}
	spent := map[int64]map[int64]gpuportal.Fen{} // by team, by member
	for _, l := range limits {
		if spent[l.TeamID] == nil {
			if spent[l.TeamID], err = db.memberSpend(ctx, q, l.account, 0, start); err != nil {
				return err
			}
		}
		l.Spent = spent[l.TeamID][l.Member]
		s.Limits = append(s.Limits, l.LimitWatch)
	}
	s.Budgets = budgets
	return nil
}

// budgets sends the planner's budget and member-limit notices, each
// remembered so that its level is told once a month.
func (a *applier) budgets(ctx context.Context, decisions plan.Decisions) error {
	for _, n := range decisions.BudgetNotices {
		d := decision{step: gpuportal.StepBudgets, subject: fmt.Sprintf("user %d", n.UserID), userID: n.UserID}
		if _, err := a.each(ctx, d, func() error {
			if _, err := a.tx.ExecContext(ctx, `UPDATE users SET budget_noticed = ? WHERE id = ?`, n.Noticed, n.UserID); err != nil {
				return err
			}
			return a.db.notify(ctx, a.tx, n.UserID, gpuportal.NoteBudgetReached, gpuportal.NoteParams{Budget: &n.Budget})
		}); err != nil {
			return err
		}
	}
	for _, n := range decisions.LimitNotices {
		d := decision{step: gpuportal.StepBudgets, subject: fmt.Sprintf("team %d member %d", n.Watch.TeamID, n.Watch.Member), userID: n.Watch.Member}
		if _, err := a.each(ctx, d, func() error { return a.limitNotice(ctx, n) }); err != nil {
			return err
		}
	}
	return nil
}

// limitNotice tells a team member that a level of their limit is spent,
// and the team's other owners too when it is all of it.
func (a *applier) limitNotice(ctx context.Context, n plan.LimitNotice) error {
	w := n.Watch
	if _, err := a.tx.ExecContext(ctx, `UPDATE team_members SET limit_noticed = ? WHERE team_id = ? AND user_id = ?`, n.Noticed, w.TeamID, w.Member); err != nil {
		return err
	}
	people := []int64{w.Member}
	if n.TellOwners {
		owners, err := scanAll(ctx, a.tx, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
			`SELECT user_id FROM team_members WHERE team_id = ? AND role = 'owner' AND user_id <> ? ORDER BY user_id`, w.TeamID, w.Member)
		if err != nil {
			return err
		}
		people = append(people, owners...)
	}
	p := gpuportal.NoteParams{Budget: &n.Budget, Team: w.TeamName, Member: w.Email}
	for _, person := range people {
		if err := a.db.notifyOne(ctx, a.tx, person, gpuportal.NoteMemberLimit, p); err != nil {
			return err
		}
	}
	return nil
}
