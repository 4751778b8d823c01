package gpuportal

import "testing"

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
