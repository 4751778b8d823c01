package gpuportal

import (
	"testing"
	"time"
)

func TestBilling(t *testing.T) {
	s := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name                     string
		d                        time.Duration
		kind                     InstanceKind
		interrupted, userStopped bool
		want                     int
	}{
		{"per started minute", 90 * time.Second, KindSpot, false, true, 2},
		{"exact minutes", 3 * time.Minute, KindSpot, false, true, 3},
		{"interrupted spot: not the minute of the interruption", 150 * time.Second, KindSpot, true, false, 2},
		{"on-demand stopped early: the minimum", 10 * time.Minute, KindOnDemand, false, true, 60},
		{"on-demand past the minimum", 61*time.Minute + time.Second, KindOnDemand, false, true, 62},
		{"on-demand that exits by itself: no minimum", 10 * time.Minute, KindOnDemand, false, false, 10},
	} {
		if got := BillableMinutes(s, s.Add(tt.d), tt.kind, tt.interrupted, tt.userStopped, 60); got != tt.want {
			t.Errorf("%s: %d minutes; want %d", tt.name, got, tt.want)
		}
	}
	if c := RunCost(240, 2, 90); c != 720 { // ¥2.40 × 2 GPUs × 1.5 h
		t.Errorf("RunCost = %d; want 720", c)
	}
	if c := RunCost(800, 1, 1); c != 13 { // 13.33 rounds down
		t.Errorf("RunCost = %d; want 13", c)
	}
}

func TestWorkloadOutcome(t *testing.T) {
	code := func(n int) *int { return &n }
	job := int64(4)
	for _, tc := range []struct {
		name      string
		inst      Instance
		stopAsked bool
		report    WorkloadStatus
		want      InstanceStatus
	}{
		{"exit 0", Instance{Status: InstanceRunning}, false, WorkloadStatus{ExitCode: code(0)}, InstanceStopped},
		{"exit 1", Instance{Status: InstanceRunning}, false, WorkloadStatus{ExitCode: code(1)}, InstanceFailed},
		{"runtime error", Instance{Status: InstancePending}, false, WorkloadStatus{Error: "image not found"}, InstanceFailed},
		{"stopped by its owner", Instance{Status: InstanceRunning}, true, WorkloadStatus{ExitCode: code(143), Signal: "SIGTERM"}, InstanceStopped},
		{"interrupted", Instance{Status: InstanceInterrupting}, false, WorkloadStatus{ExitCode: code(143), Signal: "SIGTERM"}, InstanceInterrupted},
		{"interrupted spot that exited 0", Instance{Status: InstanceInterrupting}, false, WorkloadStatus{ExitCode: code(0)}, InstanceInterrupted},
		{"job task done during its notice", Instance{Status: InstanceInterrupting, JobID: &job}, false, WorkloadStatus{ExitCode: code(0)}, InstanceStopped},
		{"job task killed at its deadline", Instance{Status: InstanceInterrupting, JobID: &job}, false, WorkloadStatus{ExitCode: code(0), Signal: "SIGKILL"}, InstanceInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WorkloadOutcome(&tc.inst, tc.stopAsked, tc.report); got != tc.want {
				t.Fatalf("outcome = %q, want %q", got, tc.want)
			}
		})
	}
}

// A run's ledger line says the minimum it was billed up to, and the
// ledger's pages find it again (to say it in the reader's language).
func TestRunLedgerLineKeepsTheMinimum(t *testing.T) {
	if got := MinimumOfRunLine(RunLedgerLine(7, KindOnDemand, 2, "a100-80g", 60, 60)); got != 60 {
		t.Errorf("a line with the minimum: %d", got)
	}
	for _, line := range []string{RunLedgerLine(7, KindSpot, 2, "a100-80g", 12, 0), "Instance #7 (on_demand, 1 × x): 3 min (x-min minimum)", ""} {
		if got := MinimumOfRunLine(line); got != 0 {
			t.Errorf("%q: minimum %d", line, got)
		}
	}
}
