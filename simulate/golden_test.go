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
// between ticks) are exercised (18 s under the race detector).
func TestReportForAFixedSeedIsUnchanged(t *testing.T) {
	for _, c := range []struct {
		name     string
		scenario Scenario
	}{
		{"demo", Builtin["demo"]},
		{"peak", Builtin["peak"]},
		{"demo-x20", Builtin["demo"].Scale(20)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
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
