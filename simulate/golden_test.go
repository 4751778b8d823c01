package simulate

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json with this code's reports")

// The report for a fixed seed is the one the simulator gave before it was
// made faster: work on its speed (or the store's) must not change what
// the what-if tells an admin. A change that means to change the report
// rewrites the files with -update and says why in its commit. The
// 960-GPU day is DESIGN §7's benchmark fleet (BenchmarkThirtyDaysOf1000GPUs),
// where the store's shortcuts for a large fleet (the GPU lists kept
// between ticks) are exercised. That day takes a minute under the race
// detector (a third of this package's time there) and a sixth of it
// without, so make test runs it in a second, plain pass of its own.
func TestReportForAFixedSeedIsUnchanged(t *testing.T) {
	for _, c := range []struct {
		name     string
		scenario Scenario
		big      bool
	}{
		{"demo", Builtin["demo"], false},
		{"peak", Builtin["peak"], false},
		{"demo-x20", Builtin["demo"].Scale(20), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.big && raceDetector {
				t.Skip("the 960-GPU day runs without -race (make test's second pass)")
			}
			got := reportJSON(t, run(t, c.scenario, 1, nil)) + "\n"
			path := filepath.Join("testdata", c.name+"-1-day.golden.json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
				t.Errorf("%s, one day, seed %d: the report changed\n got: %s\nwant: %s", c.name, c.scenario.Seed, got, want)
			}
		})
	}
}
