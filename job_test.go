package gpuportal

import (
	"testing"
	"time"
)

func TestJobTaskOutcome(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		interrupted, stopped, failed bool
		failures, max                int
		want                         TaskStatus
		wantFailures                 int
	}{
		{"exit 0", false, false, false, 0, 3, TaskSucceeded, 0},
		{"exit 0 after a failure", false, false, false, 1, 3, TaskSucceeded, 1},
		{"first failure", false, false, true, 0, 3, TaskQueued, 1},
		{"last failure", false, false, true, 2, 3, TaskFailed, 3},
		{"one attempt only", false, false, true, 0, 1, TaskFailed, 1},
		{"interrupted: not a failed attempt", true, false, false, 2, 3, TaskQueued, 2},
		{"interrupted with a failing exit code", true, false, true, 2, 3, TaskQueued, 2},
		{"stopped (job cancelled)", false, true, true, 0, 3, TaskCancelled, 0},
		{"stopped while interrupted", true, true, false, 0, 3, TaskCancelled, 0},
	} {
		got, failures := JobTaskOutcome(tc.interrupted, tc.stopped, tc.failed, tc.failures, tc.max)
		if got != tc.want || failures != tc.wantFailures {
			t.Errorf("%s: %s, %d failures; want %s, %d", tc.name, got, failures, tc.want, tc.wantFailures)
		}
	}
}

func TestJobStatusOf(t *testing.T) {
	for _, tc := range []struct {
		c                  TaskCounts
		cancelled, started bool
		want               JobStatus
	}{
		{TaskCounts{Total: 3, Queued: 3}, false, false, JobQueued},
		{TaskCounts{Total: 3, Queued: 2, Running: 1}, false, true, JobRunning},
		{TaskCounts{Total: 3, Queued: 1, Failed: 2}, false, true, JobRunning}, // the others still run to the end
		{TaskCounts{Total: 3, Succeeded: 3}, false, true, JobSucceeded},
		{TaskCounts{Total: 3, Succeeded: 2, Failed: 1}, false, true, JobFailed},
		{TaskCounts{Total: 3, Succeeded: 1, Cancelled: 2}, true, true, JobCancelled},
	} {
		if got := JobStatusOf(tc.c, tc.cancelled, tc.started); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.c, got, tc.want)
		}
	}
}

func TestJobETAAndSavings(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if JobETA(now, 0, 0, 10, 4) != nil {
		t.Error("an ETA before any task finished")
	}
	// 10 left, 4 at a time: 3 waves of 5 minutes.
	if got := JobETA(now, 5*time.Minute, 2, 10, 4); got == nil || !got.Equal(now.Add(15*time.Minute)) {
		t.Errorf("eta %v", got)
	}
	if JobETA(now, time.Minute, 5, 0, 4) != nil {
		t.Error("an ETA with nothing left")
	}
	j := Job{Cost: 2400, OnDemandCost: 12000}
	if saved, pct := j.Saved(); saved != 9600 || pct != 80 {
		t.Errorf("saved %d, %d %%", saved, pct)
	}
	if c := (TaskCounts{Total: 40, Succeeded: 10, Failed: 2, Running: 4}); c.Done() != 30 {
		t.Errorf("done %d %%", c.Done())
	}
}
