package gpuportal

import (
	"testing"
	"time"
)

// The extend form offers what the balance pays for, thinned past half a
// day, and says what the first unpaid step would cost.
func TestExtensionChoices(t *testing.T) {
	var ext Extension
	start := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for h := 1; h <= 332; h++ {
		ext.Options = append(ext.Options, ExtensionOption{Hours: h, End: start.Add(time.Duration(h) * time.Hour), Price: Fen(h * 1000)})
	}
	choices, next := ext.Choices(Fen(100 * 1000))
	var hours []int
	for _, c := range choices {
		hours = append(hours, c.Hours)
	}
	want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 18, 24, 30, 36, 42, 48, 72, 96, 100}
	if len(hours) != len(want) {
		t.Fatalf("choices %v, want %v", hours, want)
	}
	for k := range want {
		if hours[k] != want[k] {
			t.Fatalf("choices %v, want %v", hours, want)
		}
	}
	if next == nil || next.Hours != 101 {
		t.Errorf("the first unpaid option: %+v", next)
	}
	if choices, next := ext.Choices(500); len(choices) != 0 || next == nil || next.Hours != 1 {
		t.Errorf("a balance that pays for nothing: %v %+v", choices, next)
	}
	if _, next := ext.Choices(Fen(1_000_000)); next != nil {
		t.Errorf("a balance that pays for everything: %+v", next)
	}
}
