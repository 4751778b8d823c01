package gpuportal

import "testing"

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
