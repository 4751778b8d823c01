package gpuportal

import (
	"testing"
	"time"
)

func TestBudgetLevel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		monthly, spent Fen
		level, percent int
	}{
		{0, 1_000_00, 0, 0},      // no budget, never told
		{1000_00, 0, 0, 0},       // nothing spent
		{1000_00, 799_99, 0, 79}, // just under 80 %
		{1000_00, 800_00, 80, 80},
		{1000_00, 999_99, 80, 99},
		{1000_00, 1000_00, 100, 100},
		{1000_00, 2500_00, 100, 250},
		{1000_00, -50_00, 0, 0}, // refunds beyond charges
	} {
		b := NewBudget(tt.monthly, tt.spent)
		if b.Level() != tt.level || b.Percent != tt.percent {
			t.Errorf("budget %s, spent %s: level %d, %d %%; want %d, %d %%", tt.monthly, tt.spent, b.Level(), b.Percent, tt.level, tt.percent)
		}
	}
	for _, bad := range []Fen{-1, MaxCredit + 1} {
		if ValidateBudget(bad) == nil {
			t.Errorf("budget %d accepted", bad)
		}
	}
}

func TestBudgetNoticeDue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		noticed, month string
		level          int
		due            bool
	}{
		{"", "2026-12", 80, true},
		{"", "2026-12", 0, false},            // nothing reached
		{"2026-12:80", "2026-12", 80, false}, // told this month
		{"2026-12:80", "2026-12", 100, true}, // a higher level
		{"2026-12:100", "2026-12", 80, false},
		{"2026-11:100", "2026-12", 80, true}, // last month's
		{BudgetNoticed("2026-12", 100), "2026-12", 100, false},
	} {
		if got := BudgetNoticeDue(tt.noticed, tt.month, tt.level); got != tt.due {
			t.Errorf("BudgetNoticeDue(%q, %q, %d) = %v, want %v", tt.noticed, tt.month, tt.level, got, tt.due)
		}
	}
	shanghai := time.FixedZone("CST", 8*3600)
	// 2026-11-30 20:00 UTC is already December in Shanghai.
	start, month := BudgetMonth(time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC), shanghai)
	if month != "2026-12" || !start.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, shanghai)) {
		t.Errorf("BudgetMonth = %v %q", start, month)
	}
	if _, month := BudgetMonth(time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC), nil); month != "2026-11" {
		t.Errorf("BudgetMonth in UTC = %q", month)
	}
}
