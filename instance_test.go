package gpuportal

import (
	"testing"
	"time"
)

func TestChooseVictims(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	spots := []SpotCandidate{
		{ID: 1, Count: 2, StartedAt: t0},
		{ID: 2, Count: 4, StartedAt: t0.Add(time.Hour)},
		{ID: 3, Count: 2, StartedAt: t0.Add(2 * time.Hour)},
		{ID: 4, Count: 1, StartedAt: t0.Add(3 * time.Hour)},
	}
	ids := func(v []SpotCandidate) []int64 {
		var out []int64
		for _, s := range v {
			out = append(out, s.ID)
		}
		return out
	}
	for _, tt := range []struct {
		need int
		want []int64
	}{
		{0, nil},
		{1, []int64{4}}, // any one instance covers: the youngest
		{3, []int64{2}}, // one 4-GPU instance instead of two 2-GPU ones
		{4, []int64{2}},
		{5, []int64{4, 2}}, // two instances, the youngest that still cover
		{6, []int64{3, 2}}, // the younger of the two 2-GPU instances
		{9, []int64{4, 3, 2, 1}},
	} {
		got := ChooseVictims(spots, tt.need)
		freed := 0
		for _, s := range got {
			freed += s.Count
		}
		if len(got) != len(tt.want) || (tt.need > 0 && freed < tt.need) {
			t.Errorf("need %d: got %v; want %v", tt.need, ids(got), tt.want)
			continue
		}
		for i := range got {
			if got[i].ID != tt.want[i] {
				t.Errorf("need %d: got %v; want %v", tt.need, ids(got), tt.want)
				break
			}
		}
	}
}

func TestPlacement(t *testing.T) {
	nodes := []FreeGPUs{{"a", []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"}}, {"b", []string{"b5", "b6", "b7"}}, {"c", []string{"c0", "c1"}}}
	if n, g, ok := PlaceOnOneNode(nodes, 2); !ok || n != "c" || len(g) != 2 {
		t.Errorf("2 GPUs → %s %v", n, g)
	}
	if n, _, ok := PlaceOnOneNode(nodes, 3); !ok || n != "b" {
		t.Errorf("3 GPUs → %s", n)
	}
	if n, _, ok := PlaceOnOneNode(nodes, 5); !ok || n != "a" {
		t.Errorf("5 GPUs → %s", n)
	}
	if _, _, ok := PlaceOnOneNode(nodes[1:], 4); ok {
		t.Error("4 GPUs placed on nodes with 3 and 2 free")
	}
	if g, ok := PackAcrossNodes(nodes, 8); !ok || g[0] != "a0" || g[7] != "a7" {
		t.Errorf("8 GPUs → %v (want all of node a)", g)
	}
	if g, ok := PackAcrossNodes(nodes, 10); !ok || len(g) != 10 || g[8] != "b5" {
		t.Errorf("10 GPUs → %v", g)
	}
	if _, ok := PackAcrossNodes(nodes, 14); ok {
		t.Error("14 GPUs out of 13")
	}
}

func TestBilling(t *testing.T) {
	s := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name                     string
		d                        time.Duration
		kind                     string
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
		want      string
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
