package gpuportal

import (
	"fmt"
	"strings"
	"time"
)

// Budget is a customer's monthly budget and what they spent of it this
// month (site time): charges less refunds, the same kinds as revenue
// (RevenueKinds), never top-ups.
type Budget struct {
	Monthly Fen `json:"monthly_budget_fen"` // 0: no budget
	Spent   Fen `json:"spent_this_month_fen"`
	// Percent is the share of the budget spent (0 without a budget).
	Percent int `json:"percent"`
}

// BudgetLevels are the shares of a budget at which its owner is told,
// once each a month.
var BudgetLevels = []int{80, 100}

// NewBudget is a budget with its share spent worked out.
func NewBudget(monthly, spent Fen) Budget {
	b := Budget{Monthly: monthly, Spent: spent}
	if monthly > 0 && spent > 0 {
		b.Percent = int(int64(spent) * 100 / int64(monthly))
	}
	return b
}

// Level is the highest of BudgetLevels the spend has reached (0: none,
// or no budget).
func (b Budget) Level() int {
	level := 0
	for _, l := range BudgetLevels {
		if b.Monthly > 0 && int64(b.Spent)*100 >= int64(b.Monthly)*int64(l) {
			level = l
		}
	}
	return level
}

// ValidateBudget checks a monthly budget: 0 (none) up to MaxCredit.
func ValidateBudget(monthly Fen) error {
	if monthly < 0 || monthly > MaxCredit {
		return FieldErrorf(EINVALID, "monthly_budget_fen", "A monthly budget is from ¥0 (none) to %s.", MaxCredit.String())
	}
	return nil
}

// DaySpend is what a customer spent on one day (site time).
type DaySpend struct {
	Date  string `json:"date"` // 2026-12-01
	Spent Fen    `json:"spent_fen"`
}

// BudgetMonth is the month a spend at now counts in: its first instant,
// site time (loc; UTC when nil), and its name as budget notices remember
// it ("2026-12").
func BudgetMonth(now time.Time, loc *time.Location) (time.Time, string) {
	if loc == nil {
		loc = time.UTC
	}
	local := now.In(loc)
	start := time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, loc)
	return start, start.Format("2006-01")
}

// BudgetNoticeDue says whether a notice at level is still to be sent in
// month, given the last one sent (noticed: "2026-12:80", or ""): once per
// level a month, a higher level after a lower one, never a lower again.
func BudgetNoticeDue(noticed, month string, level int) bool {
	if level == 0 {
		return false
	}
	m, l, ok := strings.Cut(noticed, ":")
	if !ok || m != month {
		return true
	}
	var last int
	_, _ = fmt.Sscan(l, &last)
	return level > last
}

// BudgetNoticed is what a budget notice at level in month is remembered
// as (BudgetNoticeDue reads it).
func BudgetNoticed(month string, level int) string {
	return fmt.Sprintf("%s:%d", month, level)
}
