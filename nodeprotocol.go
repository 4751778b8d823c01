package gpuportal

import "time"

// The node protocol's rules: when a node counts as gone, when a GPU is free
// after an instance, and what a workload report from a node changes. The
// store applies them; they are pure, so they are tested here as tables.

// MissedHeartbeatsOffline is how many heartbeats in a row a node may miss
// (at its own heartbeat interval) before it is taken offline.
const MissedHeartbeatsOffline = 3

// IdleGPUMemoryMiB is the most memory an idle GPU reports in use (the
// driver's own); above it, something still runs on the GPU.
const IdleGPUMemoryMiB = 64

// GPUFreeAfterInstance reports whether a GPU an ended instance left busy
// is free again, as its node reports it: healthy, its memory back to what
// an idle GPU holds.
func GPUFreeAfterInstance(healthy bool, memoryUsedMiB int) bool {
	return healthy && memoryUsedMiB <= IdleGPUMemoryMiB
}

// LogTailBytes is how much of a workload's output the portal keeps.
const LogTailBytes = 4096

// LogTailOf is the end of a report's output as the portal keeps it.
func LogTailOf(s string) string {
	if len(s) > LogTailBytes {
		return s[len(s)-LogTailBytes:]
	}
	return s
}

// ReportStep is which status move a workload report makes an instance take.
type ReportStep int

const (
	ReportNoMove  ReportStep = iota // nothing to move (a repeat, or a report of another state)
	ReportStarted                   // pending → running
	ReportEnded                     // pending, running or interrupting → its outcome (WorkloadOutcome)
)

// ReportTransition is the status move a report makes an instance in status
// take.
func ReportTransition(status InstanceStatus, r WorkloadStatus) ReportStep {
	switch {
	case r.State == WorkloadRunning && status == InstancePending:
		return ReportStarted
	case r.State == WorkloadExited && (status == InstancePending || status == InstanceRunning || status == InstanceInterrupting):
		return ReportEnded
	}
	return ReportNoMove
}

// DiskReportChanges reports whether what a node says of a workload's disk
// differs from what the portal keeps of it.
func DiskReportChanges(kept *InstanceDisk, d *WorkloadDisk) bool {
	if d == nil || kept == nil {
		return false
	}
	return kept.UsedBytes != d.UsedBytes || kept.Note != d.Note || kept.Enforced == nil || *kept.Enforced != d.Enforced
}

// ReportChanges reports whether a workload report changes anything the
// portal keeps of instance i (checkpointStamp: the agent's stamp of the
// last checkpoint report recorded). A node repeats its workloads' reports
// in every status; one that changes nothing needs no write.
func ReportChanges(i *Instance, r WorkloadStatus, checkpointStamp string) bool {
	switch {
	case ReportTransition(i.Status, r) != ReportNoMove:
		return true
	case r.LogTail != "" && LogTailOf(r.LogTail) != i.LogTail:
		return true
	case DiskReportChanges(i.Disk, r.Disk):
		return true
	case r.CheckpointAt != nil && CheckpointStamp(*r.CheckpointAt) != checkpointStamp:
		return true
	case r.ReadyAt != nil && i.ReadyAt == nil && i.Status == InstanceInterrupting:
		return true
	}
	return DrillReadyReported(i, r)
}

// DrillReadyReported: the report says the workload was ready during the
// instance's drill, which has no result yet.
func DrillReadyReported(i *Instance, r WorkloadStatus) bool {
	return r.DrillReadyAfterSeconds != nil && i.Drill != nil && i.Drill.ReadyAfterSeconds == nil && r.DrillID == i.Drill.WallAt.Unix()
}

// CheckpointStamp is how a checkpoint report's own time is kept, to tell a
// new report from a repeat of the last.
func CheckpointStamp(at time.Time) string {
	return at.UTC().Format(time.RFC3339Nano)
}
