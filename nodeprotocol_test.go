package gpuportal

import (
	"strings"
	"testing"
	"time"
)

// Which report moves an instance in which status where (the node
// protocol's one transition rule).
func TestReportTransition(t *testing.T) {
	for _, c := range []struct {
		status InstanceStatus
		state  WorkloadState
		want   ReportStep
	}{
		{InstancePending, WorkloadRunning, ReportStarted},
		{InstanceRunning, WorkloadRunning, ReportNoMove},
		{InstanceInterrupting, WorkloadRunning, ReportNoMove},
		{InstancePending, WorkloadExited, ReportEnded},
		{InstanceRunning, WorkloadExited, ReportEnded},
		{InstanceInterrupting, WorkloadExited, ReportEnded},
		{InstanceStopped, WorkloadExited, ReportNoMove},
		{InstanceInterrupted, WorkloadRunning, ReportNoMove},
		{InstanceFailed, WorkloadExited, ReportNoMove},
	} {
		if got := ReportTransition(c.status, WorkloadStatus{State: c.state}); got != c.want {
			t.Errorf("%s reported %s: %v, want %v", c.status, c.state, got, c.want)
		}
	}
}

// A report that repeats what the portal keeps changes nothing (and needs
// no write); each thing a report can bring changes something.
func TestReportChanges(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	yes := true
	drillAt := at.Add(-time.Minute)
	running := Instance{Status: InstanceRunning, LogTail: "epoch 3", Disk: &InstanceDisk{UsedBytes: 10, Enforced: &yes},
		Drill: &Drill{WallAt: drillAt}}
	same := WorkloadStatus{State: WorkloadRunning, LogTail: "epoch 3", Disk: &WorkloadDisk{UsedBytes: 10, Enforced: true}, CheckpointAt: &at}
	if ReportChanges(&running, same, CheckpointStamp(at)) {
		t.Error("a repeated report changes something")
	}
	four := 4.0
	long := strings.Repeat("x", LogTailBytes+10)
	kept := running
	kept.LogTail = LogTailOf(long)
	if r := same; true {
		r.LogTail = long
		if ReportChanges(&kept, r, CheckpointStamp(at)) {
			t.Error("a long output already kept (its tail) changes something")
		}
	}
	later := at.Add(time.Minute)
	interrupting := running
	interrupting.Status = InstanceInterrupting
	for name, c := range map[string]struct {
		i *Instance
		r WorkloadStatus
	}{
		"it started":           {&Instance{Status: InstancePending}, WorkloadStatus{State: WorkloadRunning}},
		"it ended":             {&running, WorkloadStatus{State: WorkloadExited}},
		"new output":           {&running, WorkloadStatus{State: WorkloadRunning, LogTail: "epoch 4"}},
		"the disk filled":      {&running, WorkloadStatus{State: WorkloadRunning, Disk: &WorkloadDisk{UsedBytes: 11, Enforced: true}}},
		"a new checkpoint":     {&running, WorkloadStatus{State: WorkloadRunning, CheckpointAt: &later}},
		"ready after a notice": {&interrupting, WorkloadStatus{State: WorkloadRunning, ReadyAt: &later}},
		"ready in its drill":   {&running, WorkloadStatus{State: WorkloadRunning, DrillID: drillAt.Unix(), DrillReadyAfterSeconds: &four}},
	} {
		if !ReportChanges(c.i, c.r, CheckpointStamp(at)) {
			t.Errorf("%s: no change seen", name)
		}
	}
	if ReportChanges(&running, WorkloadStatus{State: WorkloadRunning, DrillID: drillAt.Unix() - 3600, DrillReadyAfterSeconds: &four}, "") {
		t.Error("a ready of another drill changes something")
	}
}

// A GPU an ended instance left busy is free once healthy with its memory
// back to an idle GPU's.
func TestGPUFreeAfterInstance(t *testing.T) {
	for _, c := range []struct {
		healthy bool
		mem     int
		want    bool
	}{{true, 0, true}, {true, IdleGPUMemoryMiB, true}, {true, IdleGPUMemoryMiB + 1, false}, {false, 0, false}} {
		if got := GPUFreeAfterInstance(c.healthy, c.mem); got != c.want {
			t.Errorf("healthy %v, %d MiB: %v", c.healthy, c.mem, got)
		}
	}
}
