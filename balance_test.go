package gpuportal

import (
	"testing"
	"time"
)

func TestTopUpNeeded(t *testing.T) {
	for _, c := range []struct{ price, available, want Fen }{
		{10000, 20000, 0},     // covered
		{10000, 10000, 0},     // exactly
		{10000, 4000, 6000},   // the difference
		{10000, 0, 10000},     // nothing available
		{10000, -1000, 11000}, // below zero: the debt too
		{0, -1000, 1000},      // even a free thing needs the debt paid
	} {
		if got := TopUpNeeded(c.price, c.available); got != c.want {
			t.Errorf("TopUpNeeded(%d, %d) = %d, want %d", c.price, c.available, got, c.want)
		}
	}
}

func TestBalanceRunsOut(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name                  string
		balance, held, credit Fen
		burn                  Fen
		want                  time.Time // zero: never (nothing burns)
		warned                bool      // runs out within LowBalanceWarning
	}{
		{"nothing burns", 10000, 0, 0, 0, time.Time{}, false},
		{"an hour at ¥24", 2400, 0, 0, 2400, now.Add(time.Hour), false},
		{"held and credit count", 2400, 1200, 1200, 2400, now.Add(time.Hour), false},
		{"twenty minutes", 800, 0, 0, 2400, now.Add(20 * time.Minute), true},
		{"at zero now", 0, 100, 0, 2400, now, true},
		// ¥10,000,000 at ¥2.40 an hour lasts 475 years, past what a
		// Duration holds: it once wrapped to 1733 and the account was
		// warned every tick.
		{"a lab's credit at one cheap GPU", MaxCredit, 0, 0, 240, now.Add(longestRunOut).Truncate(time.Minute), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := NewBalance(c.balance, c.held, c.credit, c.burn, now)
			switch {
			case c.want.IsZero() && b.RunsOutAt != nil:
				t.Fatalf("runs out at %s, want never", b.RunsOutAt)
			case !c.want.IsZero() && (b.RunsOutAt == nil || !b.RunsOutAt.Equal(c.want)):
				t.Fatalf("runs out at %v, want %s", b.RunsOutAt, c.want)
			}
			if got := b.RunsOutWithin(LowBalanceWarning, now); got != c.warned {
				t.Errorf("runs out within the warning: %v, want %v", got, c.warned)
			}
		})
	}
}
