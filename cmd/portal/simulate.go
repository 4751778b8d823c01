package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"gpuportal"
	"gpuportal/simulate"
)

// runSimulate is `portal simulate`: demand from a scenario replayed
// through the real planner on a throwaway store, and the report (its last
// line JSON).
func runSimulate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("portal simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenario := fs.String("scenario", "demo", "demo, peak, or a scenario JSON file (see README: Simulating a policy change)")
	days := fs.Int("days", 7, fmt.Sprintf("days to simulate (1 to %d)", simulate.MaxDays))
	policies := fs.String("policies", "", "a policies JSON file (the GET /admin/policies document) to run under; default: the defaults")
	seed := fs.Uint64("seed", 0, "the random seed (default: the scenario's)")
	scale := fs.Int("scale", 1, "multiply the scenario's fleet and demand (e.g. 20 for a 1,000-GPU fleet from demo)")
	victims := fs.String("victims", "", "whom the scheduler interrupts: work_lost (the least work since checkpoints) or youngest (default: the scenario's, else work_lost)")
	timezone := fs.String("timezone", envOr(getenv, "PORTAL_TIMEZONE", "Asia/Shanghai"), "site time zone (env PORTAL_TIMEZONE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := simulate.LoadScenario(*scenario)
	if err != nil {
		return cliError(err)
	}
	s = s.Scale(*scale)
	if *seed != 0 {
		s.Seed = *seed
	}
	if *victims != "" {
		s.Victims = *victims
		if err := s.Validate(); err != nil {
			return cliError(err)
		}
	}
	loc, err := time.LoadLocation(*timezone)
	if err != nil {
		return fmt.Errorf("--timezone: %w", err)
	}
	opt := simulate.Options{Scenario: s, Days: *days, Location: loc}
	if *policies != "" {
		p, err := readPolicies(*policies)
		if err != nil {
			return err
		}
		opt.Policies = &p
	}
	started := time.Now()
	report, err := simulate.Run(ctx, opt)
	if err != nil {
		return cliError(err)
	}
	fmt.Fprintf(stderr, "simulated %d days of %d GPUs in %.1f s\n", report.Days, report.GPUs, time.Since(started).Seconds())
	return report.Write(stdout)
}

// readPolicies reads a policies document (the simulation validates it as
// PUT /admin/policies does).
func readPolicies(path string) (gpuportal.Policies, error) {
	p := gpuportal.PoliciesToDecode()
	data, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("--policies: %w", err)
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return p, fmt.Errorf("--policies %s: %w", path, err)
	}
	return p, nil
}
