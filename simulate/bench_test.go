package simulate

import (
	"context"
	"testing"
)

func BenchmarkPeakWeek(b *testing.B) {
	for b.Loop() {
		if _, err := Run(context.Background(), Options{Scenario: Builtin["peak"], Days: 7, Dir: b.TempDir()}); err != nil {
			b.Fatal(err)
		}
	}
}
