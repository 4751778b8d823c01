package gpuportal

import "time"

// The agent protocol (POST /api/v1/agent/register, /heartbeat, /events).
// The agent reconciles: each heartbeat reports what actually runs and gets
// back what should run; a lost message heals on the next exchange.

// AgentGPU is a GPU as an agent reports it at registration.
type AgentGPU struct {
	UUID           string `json:"uuid"`
	Index          int    `json:"index"`
	Name           string `json:"name"`
	MemoryTotalMiB int    `json:"memory_total_mib"`
}

// AgentRegistration enrols a node with a one-time enrollment token.
type AgentRegistration struct {
	EnrollToken      string     `json:"enroll_token"`
	Hostname         string     `json:"hostname"`
	Region           string     `json:"region"`
	HeartbeatSeconds int        `json:"heartbeat_seconds"`
	GPUs             []AgentGPU `json:"gpus"`
}

// AgentCredentials is the answer to a registration: the node's id and its
// token (shown once; the portal keeps only a hash).
type AgentCredentials struct {
	NodeID    string `json:"node_id"`
	NodeToken string `json:"node_token"`
}

// GPUSample is one reading of a GPU's telemetry and health.
type GPUSample struct {
	UUID               string `json:"uuid"`
	Healthy            bool   `json:"healthy"`
	MemoryUsedMiB      int    `json:"memory_used_mib"`
	MemoryFreeMiB      int    `json:"memory_free_mib"`
	UtilizationPercent int    `json:"utilization_percent"`
	TemperatureC       int    `json:"temperature_c"`
	PowerW             int    `json:"power_w"`
	ECCCorrected       uint64 `json:"ecc_corrected"`
	ECCUncorrected     uint64 `json:"ecc_uncorrected"`
	XIDErrors          uint64 `json:"xid_errors"`
	LastXID            uint64 `json:"last_xid,omitempty"`
	SMClockMHz         int    `json:"sm_clock_mhz,omitempty"`
	// Health says why a GPU is not healthy (nil when it is): the fault
	// the agent saw, from when.
	Health *GPUHealth `json:"health,omitempty"`
}

// WorkloadState is where a workload is, as its agent reports it.
type WorkloadState string

// Workload states.
const (
	WorkloadRunning WorkloadState = "running"
	WorkloadExited  WorkloadState = "exited"
)

// AgentBackoffCap is the longest an agent waits between two tries to
// reach a portal it lost: a portal that comes back hears every node
// within it (node liveness gives that much grace after a portal starts).
const AgentBackoffCap = 30 * time.Second

// WorkloadStatus is what an agent knows about one instance's workload.
type WorkloadStatus struct {
	InstanceID int64         `json:"instance_id"`
	Attempt    int           `json:"attempt"`
	State      WorkloadState `json:"state"`
	StartedAt  time.Time     `json:"started_at"`
	EndedAt    *time.Time    `json:"ended_at,omitempty"`
	// ExitCode is nil while running, and when it cannot be known (a
	// workload re-adopted after an agent restart).
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"` // SIGTERM or SIGKILL if the agent sent one
	// GPUsFree: after the workload ended, NVML showed none of its processes
	// left on its GPUs.
	GPUsFree bool   `json:"gpus_free"`
	Error    string `json:"error,omitempty"` // it could not be started
	// LogTail is the end of the workload's output (at most 4 KiB).
	LogTail string `json:"log_tail,omitempty"`
	// CheckpointAt is the workload's last checkpoint report to its
	// metadata endpoint (PUT /gpuportal/checkpoint), in the agent's clock:
	// the portal stamps it in business time when it first sees it.
	CheckpointAt *time.Time `json:"checkpoint_at,omitempty"`
	// ReadyAt: after its notice the workload said its state is saved (PUT
	// /gpuportal/ready); the agent stops it at once.
	ReadyAt *time.Time `json:"ready_at,omitempty"`
	// DrillID and DrillReadyAfterSeconds: during drill DrillID the
	// workload reported ready that long after the notice.
	DrillID                int64    `json:"drill_id,omitempty"`
	DrillReadyAfterSeconds *float64 `json:"drill_ready_after_seconds,omitempty"`
	// Disk: how much of the workload's disk is written, while it runs
	// (nil for a workload launched without a disk size).
	Disk *WorkloadDisk `json:"disk,omitempty"`
}

// WorkloadDisk is what an agent says of a running workload's disk.
type WorkloadDisk struct {
	UsedBytes int64 `json:"used_bytes"`
	// Enforced: the disk is a filesystem of its size, so writes past it
	// fail inside (ENOSPC). Otherwise Note says why not, and the workload
	// writes only to /tmp, its checkpoint directory and volumes.
	Enforced bool   `json:"enforced"`
	Note     string `json:"note,omitempty"`
}

// AgentHeartbeat reports a node's GPUs and workloads. WaitSeconds > 0 asks
// the portal to hold the answer until the desired state changes from
// Revision (long poll), at most that long.
type AgentHeartbeat struct {
	Revision         int64            `json:"revision"`
	WaitSeconds      int              `json:"wait_seconds"`
	HeartbeatSeconds int              `json:"heartbeat_seconds"`
	GPUs             []GPUSample      `json:"gpus"`
	Workloads        []WorkloadStatus `json:"workloads"`
	// Volumes: the agent measured its volume root anew (about once a
	// minute; nil in between).
	Volumes *VolumeReport `json:"volumes,omitempty"`
	// Images: how the image imports it was asked for went.
	Images []ImageReport `json:"images,omitempty"`
}

// AgentEvents pushes workload changes at once (between heartbeats).
type AgentEvents struct {
	Workloads []WorkloadStatus `json:"workloads"`
}

// Interruption tells an agent to stop a workload: the notice is given now;
// SIGTERM comes after DeadlineInSeconds, SIGKILL GraceSeconds later. Times
// are durations, not instants, so the agent enforces them in its own clock.
type Interruption struct {
	Action            NoticeAction    `json:"action"`
	DeadlineInSeconds float64         `json:"deadline_in_seconds"`
	GraceSeconds      int             `json:"grace_seconds"`
	Reason            InterruptReason `json:"reason"`
	// Drill: a rehearsal — show the notice, never signal; DrillID names it
	// (the agent echoes it with the workload's ready time).
	Drill   bool  `json:"drill,omitempty"`
	DrillID int64 `json:"drill_id,omitempty"`
}

// NoticeAction is what a notice says will happen at its deadline, as
// the metadata endpoint's spot/instance-action says it (EC2's words).
type NoticeAction string

// Notice actions.
const (
	NoticeTerminate NoticeAction = "terminate" // the platform takes the GPUs back
	NoticeStop      NoticeAction = "stop"      // the balance ran out, or a reservation ends
)

// Lifecycle is how an instance was sold, as the metadata endpoint's
// instance-life-cycle says it (EC2's words).
type Lifecycle string

// Instance lifecycles.
const (
	LifecycleSpot      Lifecycle = "spot"
	LifecycleOnDemand  Lifecycle = "on-demand"
	LifecycleScheduled Lifecycle = "scheduled"
)

// DesiredWorkload is one instance a node should run.
type DesiredWorkload struct {
	InstanceID int64 `json:"instance_id"`
	// Attempt counts the instance's launches (auto-restarts make more);
	// a workload is one attempt of one instance.
	Attempt   int       `json:"attempt"`
	Lifecycle Lifecycle `json:"lifecycle"`
	GPUs      []string  `json:"gpus"`
	Command   string    `json:"command"`
	// Image is the reference of the image to run it in (container
	// runtimes; empty: the node's default).
	Image string `json:"image,omitempty"`
	// ImageArchive: a private image's archive under the agent's image
	// root, which it loads when the node does not have the image yet.
	ImageArchive string `json:"image_archive,omitempty"`
	// CheckpointKey names the instance's checkpoint directory under the
	// shared checkpoint root; it stays the same across auto-restarts.
	CheckpointKey string            `json:"checkpoint_key"`
	Env           map[string]string `json:"env,omitempty"`
	// Task is set for an attempt of a job's task: the agent gives the
	// workload GPUPORTAL_JOB_ID, GPUPORTAL_TASK_INDEX and
	// GPUPORTAL_TASK_COUNT.
	Task      *TaskRef      `json:"task,omitempty"`
	Interrupt *Interruption `json:"interrupt,omitempty"`
	// Stop: the portal asked for this workload to end (its owner, a job's
	// cancel, a reservation's end): stop it now, or — when it never
	// started here — report it exited. The portal lists a stopped workload
	// until it has applied its exit, so no exit report can be lost.
	Stop bool `json:"stop,omitempty"`
	// Rebalance: the book will want this spot instance's GPUs soon; its
	// metadata answers events/recommendations/rebalance (as EC2's does).
	Rebalance bool `json:"rebalance,omitempty"`
	// Volumes to mount (the directory VolumeDirName(id) of the agent's
	// volume root, read-write at MountPath).
	Volumes []InstanceVolume `json:"volumes,omitempty"`
	// DiskGiB sizes the workload's writable root filesystem (its disk);
	// 0: none (instances launched before disks).
	DiskGiB int `json:"disk_gib,omitempty"`
	// DiskKept: the disk is kept across runs: it was kept by a stop (a
	// start finds it in the image root), and — with Stop — this stop keeps
	// it: the agent leaves the file in place at the end.
	DiskKept bool `json:"disk_kept,omitempty"`
}

// TaskRef names a job's task.
type TaskRef struct {
	JobID int64 `json:"job_id"`
	Index int   `json:"index"`
	Count int   `json:"count"`
}

// AgentDesired is the portal's answer to a heartbeat.
type AgentDesired struct {
	Revision         int64             `json:"revision"`
	HeartbeatSeconds int               `json:"heartbeat_seconds"`
	Workloads        []DesiredWorkload `json:"workloads"`
	// Sessions the agent should connect out for (each once).
	Sessions []DesiredSession `json:"sessions,omitempty"`
	// DeleteVolumes: volumes whose files the agent removes — those it
	// reported that were deleted, and its region's volumes deleted in the
	// last minutes (a volume it does not hold is nothing to remove).
	DeleteVolumes []int64 `json:"delete_volumes,omitempty"`
	// ImportImages: private images to import from a volume's archive
	// into the image root (each until the portal has the agent's report).
	ImportImages []ImageImportOrder `json:"import_images,omitempty"`
	// ReleaseDisks: instances of the node's region whose kept disks were
	// released lately: the agent removes their files from the image root
	// (each is the same file on every node) unless it runs the instance.
	ReleaseDisks []int64 `json:"release_disks,omitempty"`
	// DeleteImages: private images deleted lately in the node's region:
	// the agent removes its loaded copy (and the archive, if still there).
	DeleteImages []int64 `json:"delete_images,omitempty"`
	// RotateToken asks the agent to fetch a new node token (POST
	// /agent/rotate-token), keep it and use it from then on.
	RotateToken bool `json:"rotate_token,omitempty"`
}
