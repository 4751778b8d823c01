package gpuportal

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// InstanceKind is how an instance is sold: spot, on-demand, or on a
// reservation's GPUs.
type InstanceKind string

// Instance kinds.
const (
	KindSpot     InstanceKind = "spot"
	KindOnDemand InstanceKind = "on_demand"
	KindReserved InstanceKind = "reserved"
)

// InstanceStatus is where an instance is in its life: pending → running
// → (interrupting → interrupted) | stopped | failed.
type InstanceStatus string

// Instance statuses.
const (
	InstancePending      InstanceStatus = "pending"
	InstanceRunning      InstanceStatus = "running"
	InstanceInterrupting InstanceStatus = "interrupting"
	InstanceInterrupted  InstanceStatus = "interrupted"
	InstanceStopped      InstanceStatus = "stopped"
	InstanceFailed       InstanceStatus = "failed"
)

// InterruptReason says why an instance was interrupted: its notice, the
// rates (only reservations, on-demand demand and node failures count)
// and its owner's notification name it.
type InterruptReason string

// Interruption reasons.
const (
	ReasonReservation InterruptReason = "reservation"
	ReasonOnDemand    InterruptReason = "on_demand"
	ReasonNodeFailure InterruptReason = "node_failure"
	ReasonAdmin       InterruptReason = "admin"
	// ReasonFairShare: a job's task gave its GPUs to a spot instance
	// launched on its own; the task is queued again.
	ReasonFairShare InterruptReason = "fair_share"
	// ReasonBalance: the owner's balance ran out (metadata action "stop").
	ReasonBalance InterruptReason = "balance"
	// ReasonAccountDisabled: an administrator disabled the owner's account.
	ReasonAccountDisabled InterruptReason = "account_disabled"
	// ReasonReservationEnd: a reserved instance's reservation ends; its
	// metadata says "stop" at the end, as EC2 does for Capacity Blocks.
	ReasonReservationEnd InterruptReason = "reservation_end"
)

// InterruptionReasons lists every reason an instance is interrupted or
// stopped for, drills included.
var InterruptionReasons = []InterruptReason{ReasonReservation, ReasonOnDemand, ReasonNodeFailure, ReasonAdmin, ReasonFairShare,
	ReasonBalance, ReasonAccountDisabled, ReasonReservationEnd, ReasonDrill, ReasonGPUFailure, ReasonMaintenance, ReasonTeamReclaim}

// InterruptionReasonText is a reason in words (English; the pages and
// messages translate it), for customers who never see the codes.
func InterruptionReasonText(reason InterruptReason) string {
	switch reason {
	case ReasonReservation:
		return "a booking's start"
	case ReasonOnDemand:
		return "on-demand demand"
	case ReasonNodeFailure:
		return "a node failure"
	case ReasonAdmin:
		return "an administrator"
	case ReasonFairShare:
		return "another spot launch (fair share)"
	case ReasonBalance:
		return "the balance ran out"
	case ReasonAccountDisabled:
		return "the account was disabled"
	case ReasonReservationEnd:
		return "the reservation ends"
	case ReasonDrill:
		return "an interruption drill"
	case ReasonGPUFailure:
		return "a GPU failure"
	case ReasonMaintenance:
		return "maintenance of its node"
	case ReasonTeamReclaim:
		return "a teammate taking back their share"
	}
	return string(reason)
}

// ReservedStopNotice is how long before its reservation's end a reserved
// instance's metadata says it will be stopped then.
const ReservedStopNotice = 30 * time.Minute

// MaxGPUsPerInstance: an instance runs on one node.
const MaxGPUsPerInstance = 8

// LaunchRequest asks for an instance.
type LaunchRequest struct {
	Kind          InstanceKind `json:"kind"`
	Model         string       `json:"model"`
	Region        string       `json:"region"`
	Count         int          `json:"count"`
	Command       string       `json:"command"`
	AutoRestart   bool         `json:"auto_restart"`
	ReservationID *int64       `json:"reservation_id,omitempty"`
	// Image is a catalog image id (GET /images); empty: the first.
	Image string `json:"image,omitempty"`
	// NoticeSeconds (spot only) asks for a notice of this length, within
	// the policy's bounds; nil: the policy's notice.
	NoticeSeconds *int `json:"notice_seconds,omitempty"`
	// IdleStopMinutes (on-demand and spot) stops the instance after that
	// many minutes with all its GPUs at 0 % utilisation.
	IdleStopMinutes *int `json:"idle_stop_minutes,omitempty"`
	// Volumes are the customer's volumes of the region to mount.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// DiskGiB sizes the instance's disk, its writable root filesystem;
	// nil: the policy's container_disk_gib.
	DiskGiB *int `json:"disk_gib,omitempty"`
	// KeepDiskOnInterrupt (spot; default true when DiskGiB is given): an
	// interruption keeps the disk, so an auto-restart resumes the same
	// environment and an instance that does not restart can be started
	// again with it.
	KeepDiskOnInterrupt *bool `json:"keep_disk_on_interrupt,omitempty"`
	// Labels tag it for finding it again (?label=k=v on the list).
	Labels Labels `json:"labels,omitempty"`
}

// KeepsDiskOnInterrupt resolves keep_disk_on_interrupt: spot only, and on
// by default when the launch sized its disk itself.
func (r *LaunchRequest) KeepsDiskOnInterrupt() (bool, error) {
	if r.KeepDiskOnInterrupt != nil && *r.KeepDiskOnInterrupt && r.Kind != KindSpot {
		return false, FieldErrorf(EINVALID, "keep_disk_on_interrupt", "Only spot instances are interrupted; keep_disk_on_interrupt is for them.")
	}
	if r.KeepDiskOnInterrupt != nil {
		return *r.KeepDiskOnInterrupt, nil
	}
	return r.Kind == KindSpot && r.DiskGiB != nil, nil
}

// MaxIdleStopMinutes bounds idle_stop_minutes (a week).
const MaxIdleStopMinutes = 7 * 24 * 60

// ValidateIdleStop checks idle_stop_minutes: on-demand and spot only (a
// reservation's GPUs are paid for anyway), 1 minute to a week.
func (r *LaunchRequest) ValidateIdleStop() error {
	if r.IdleStopMinutes == nil {
		return nil
	}
	if r.Kind == KindReserved {
		return FieldErrorf(EINVALID, "idle_stop_minutes", "Idle stop is for on-demand and spot instances; a reservation's GPUs are paid for either way.")
	}
	if n := *r.IdleStopMinutes; n < 1 || n > MaxIdleStopMinutes {
		return FieldErrorf(EINVALID, "idle_stop_minutes", "idle_stop_minutes must be between 1 and %d.", MaxIdleStopMinutes)
	}
	return nil
}

// IdleStopDue reports whether an instance idle since idleSince has been
// idle for its minutes by now.
func IdleStopDue(idleSince time.Time, minutes int, now time.Time) bool {
	return !idleSince.IsZero() && minutes > 0 && !now.Before(idleSince.Add(time.Duration(minutes)*time.Minute))
}

// ValidateNotice checks a spot launch's notice_seconds against the
// policy's bounds (policy_violation); other kinds cannot ask for one.
func (r *LaunchRequest) ValidateNotice(p Policy) error {
	if r.NoticeSeconds == nil {
		return nil
	}
	if r.Kind != KindSpot {
		return FieldErrorf(EINVALID, "notice_seconds", "Only spot instances are interrupted with notice; notice_seconds is for spot launches.")
	}
	if n := *r.NoticeSeconds; n < p.SpotNoticeMinSeconds || n > p.SpotNoticeMaxSeconds {
		return FieldErrorf(EPOLICY, "notice_seconds", "The notice must be between %d and %d seconds.", p.SpotNoticeMinSeconds, p.SpotNoticeMaxSeconds)
	}
	return nil
}

// Validate checks the shape of a launch request.
func (r *LaunchRequest) Validate() error {
	if err := ValidateLabels(r.Labels); err != nil {
		return err
	}
	switch r.Kind {
	case KindSpot, KindOnDemand, KindReserved:
	default:
		return FieldErrorf(EINVALID, "kind", "The kind must be spot, on_demand or reserved.")
	}
	if r.Kind == KindReserved && r.ReservationID == nil {
		return FieldErrorf(EINVALID, "reservation_id", "A reserved instance needs the reservation_id of an active reservation.")
	}
	if r.Kind != KindReserved && r.ReservationID != nil {
		return FieldErrorf(EINVALID, "reservation_id", "Only reserved instances run on a reservation.")
	}
	if r.Kind != KindSpot && r.AutoRestart {
		return FieldErrorf(EINVALID, "auto_restart", "Only spot instances are restarted automatically.")
	}
	if r.Count < 1 || r.Count > MaxGPUsPerInstance {
		return FieldErrorf(EINVALID, "count", "An instance runs on 1 to %d GPUs of one node.", MaxGPUsPerInstance)
	}
	if strings.TrimSpace(r.Command) == "" {
		// No command: a machine to log into (SSH, the terminal,
		// JupyterLab), which idles until it is stopped.
		r.Command = MachineCommand
	}
	return ValidateCommand(&r.Command)
}

// ValidateCommand trims a workload's command and checks it is one a shell
// can run: some text, at most 8 KiB.
func ValidateCommand(cmd *string) error {
	*cmd = strings.TrimSpace(*cmd)
	if *cmd == "" {
		return FieldErrorf(EINVALID, "command", "The command is required (it runs with /bin/sh -c).")
	}
	if len(*cmd) > 8192 || !utf8.ValidString(*cmd) || strings.ContainsRune(*cmd, 0) {
		return FieldErrorf(EINVALID, "command", "The command must be at most 8192 bytes of text.")
	}
	return nil
}

// InstanceInterruption is the notice an interrupted instance got.
type InstanceInterruption struct {
	NoticeAt time.Time       `json:"notice_at"`
	Deadline time.Time       `json:"deadline"`
	Reason   InterruptReason `json:"reason"`
}

// Instance is a running (or finished) workload on GPUs.
type Instance struct {
	ID     int64 `json:"id"`
	UserID int64 `json:"user_id"`
	// TeamID: the team it belongs to (nil: personal); CreatedBy: the
	// member who made it for the team.
	TeamID        *int64         `json:"team_id"`
	CreatedBy     *int64         `json:"created_by"`
	Kind          InstanceKind   `json:"kind"`
	Model         string         `json:"model"`
	Region        string         `json:"region"`
	Count         int            `json:"count"`
	Command       string         `json:"command"`
	Image         string         `json:"image,omitempty"` // the image reference it runs in
	AutoRestart   bool           `json:"auto_restart"`
	ReservationID *int64         `json:"reservation_id,omitempty"`
	Status        InstanceStatus `json:"status"`
	Node          string         `json:"node,omitempty"`
	GPUs          []string       `json:"gpus"`
	PricePerGPU   Fen            `json:"price_per_gpu_hour_fen"`
	Cost          Fen            `json:"cost_fen"`
	// MinimumCharge is, for an on-demand run younger than the policy's
	// minimum billable time (MinimumMinutes), what stopping it now bills
	// for the run all the same.
	MinimumCharge  Fen `json:"minimum_charge_fen,omitempty"`
	MinimumMinutes int `json:"minimum_minutes,omitempty"`
	// MinimumApplied: its last run was billed up to the on-demand minimum
	// of this many minutes (it ran less).
	MinimumApplied int                   `json:"minimum_applied_minutes,omitempty"`
	CreatedAt      time.Time             `json:"created_at"`
	StartedAt      *time.Time            `json:"started_at,omitempty"`
	EndedAt        *time.Time            `json:"ended_at,omitempty"`
	Interruption   *InstanceInterruption `json:"interruption,omitempty"`
	SafeUntil      *time.Time            `json:"safe_until,omitempty"`
	ExitCode       *int                  `json:"exit_code,omitempty"`
	Error          string                `json:"error,omitempty"`
	Restarts       int                   `json:"restarts"`
	LogTail        string                `json:"log_tail,omitempty"`
	Attempt        int                   `json:"attempt"`
	JobID          *int64                `json:"job_id,omitempty"`     // an attempt of a job's task
	TaskIndex      *int                  `json:"task_index,omitempty"` // which task of the job
	CheckpointKey  string                `json:"-"`
	// LastCheckpoint is the workload's last checkpoint report (business
	// time); WorkSinceCheckpoint the GPU-seconds since it (or since the
	// start) while it runs — what an interruption now would lose; Lost
	// what its interruptions lost.
	LastCheckpoint      *time.Time `json:"last_checkpoint_at,omitempty"`
	WorkSinceCheckpoint *int64     `json:"work_since_checkpoint_gpu_seconds,omitempty"`
	Lost                *int64     `json:"lost_gpu_seconds,omitempty"`
	// ReadyAt: after its notice the workload reported its state saved.
	ReadyAt *time.Time `json:"ready_at,omitempty"`
	// Drill is the instance's last drill, if it had one.
	Drill *Drill `json:"drill,omitempty"`
	// IdleStopMinutes as launched; IdleSince: its GPUs have been at 0 %
	// since then (nil: busy, or not watched).
	IdleStopMinutes *int       `json:"idle_stop_minutes,omitempty"`
	IdleSince       *time.Time `json:"idle_since,omitempty"`
	// StopReason says why the platform stopped it for its owner (idle stop).
	StopReason string `json:"stop_reason,omitempty"`
	// Sessions are the interactive sessions open into it now (its page
	// and GET /instances/{id}).
	Sessions []Session `json:"sessions,omitempty"`
	// Volumes it mounts.
	Volumes []InstanceVolume `json:"volumes,omitempty"`
	// Disk is its writable root filesystem (nil for instances launched
	// before disks).
	Disk *InstanceDisk `json:"disk,omitempty"`
	// Labels as launched (a job's task: its job's).
	Labels Labels `json:"labels,omitempty"`
	// RebalanceAt: the platform recommended checkpointing then (the book
	// wants its GPUs back soon); ReclaimExpected is when, roughly: the
	// hour the booking that wants them starts (its notice comes before).
	RebalanceAt     *time.Time `json:"rebalance_recommended_at,omitempty"`
	ReclaimExpected *time.Time `json:"reclaim_expected_at,omitempty"`
	// Borrowed: a team member's run past their guaranteed share, on the
	// team's idle GPUs at the spot price; a teammate within their share
	// takes it back with the usual notice (see AdmitTeamRun).
	Borrowed bool `json:"borrowed,omitempty"`
}

// StopOptions are what a stop may ask besides stopping.
type StopOptions struct {
	// KeepDisk keeps the instance's disk (everything written outside its
	// volumes) for a later start, billed while kept.
	KeepDisk bool `json:"keep_disk"`
}

// CanKeepDisk says whether a stop may keep i's disk: it must run with a
// disk its node holds (not only a read-only image), and be an instance
// its owner starts (not a reservation's or a job's).
func CanKeepDisk(i *Instance) error {
	switch {
	case i.JobID != nil:
		return FieldErrorf(ECONFLICT, "keep_disk", "Instance %d runs a job's task, which starts its own; it keeps no disk.", i.ID)
	case i.Status != InstanceRunning && i.Status != InstanceInterrupting:
		return FieldErrorf(ECONFLICT, "keep_disk", "Instance %d is %s: it has no disk yet to keep.", i.ID, i.Status)
	case i.Disk == nil || i.Disk.Enforced == nil || !*i.Disk.Enforced:
		return FieldErrorf(ECONFLICT, "keep_disk", "Instance %d's node gives it no disk of its own (a read-only image), so there is nothing to keep.", i.ID)
	}
	return nil
}

// CanStart says whether instance i starts again (POST .../start): it must
// be stopped (or have ended otherwise) with its disk kept.
func CanStart(i *Instance) error {
	switch {
	case i.Status == InstancePending || i.Status == InstanceRunning || i.Status == InstanceInterrupting:
		return Errorf(ECONFLICT, "Instance %d is %s already.", i.ID, i.Status)
	case i.Disk == nil || !i.Disk.Kept:
		return Errorf(ECONFLICT, "Instance %d is %s without a kept disk: launch a new one (a stop that keeps the disk lets an instance start again).", i.ID, i.Status)
	}
	return nil
}

// InstanceDisk is an instance's disk: its size, how much of it was
// written when its agent last looked, and whether the node holds writes
// to the size (enforced; false says why not in Note, nil: not reported
// yet). Kept: it outlives the instance's run (a stop that keeps it).
type InstanceDisk struct {
	SizeGiB   int    `json:"size_gib"`
	UsedBytes int64  `json:"used_bytes"`
	Kept      bool   `json:"kept"`
	Enforced  *bool  `json:"enforced,omitempty"`
	Note      string `json:"note,omitempty"`
	// PricePerDayFen is what keeping it costs a day (all of its size at
	// the volume price): billed while it is kept, shown before a stop
	// that keeps it.
	PricePerDayFen Fen `json:"price_per_day_fen"`
}

// KeptDiskPerDay is a day of a kept disk of sizeGiB at the volume price
// per GiB-month (a month being 30 days).
func KeptDiskPerDay(sizeGiB int, pricePerGiBMonth Fen) Fen {
	return Fen(sizeGiB) * pricePerGiBMonth / 30
}

// UsedPercent is how full the disk is, 0–100, for its bar.
func (d InstanceDisk) UsedPercent() int {
	if d.SizeGiB <= 0 {
		return 0
	}
	return int(min(100, d.UsedBytes*100/(int64(d.SizeGiB)<<30)))
}

// DiskFor is the disk a launch gets: what it asked for (1 GiB up to the
// policy's max_container_disk_gib) or the policy's container_disk_gib.
// field names the request's field in the error ("disk_gib",
// "launch.disk_gib").
func (p Policy) DiskFor(asked *int, field string) (int, error) {
	if asked == nil {
		return p.ContainerDiskGiB, nil
	}
	if err := ValidateDiskShape(asked, field); err != nil {
		return 0, err
	}
	if *asked > p.MaxContainerDiskGiB {
		return 0, FieldErrorf(EPOLICY, field, "A disk is 1 to %d GiB.", p.MaxContainerDiskGiB)
	}
	return *asked, nil
}

// ValidateDiskShape checks what any disk size must be, whatever the
// policy: at least 1 GiB.
func ValidateDiskShape(asked *int, field string) error {
	if asked != nil && *asked < 1 {
		return FieldErrorf(EINVALID, field, "A disk is at least 1 GiB.")
	}
	return nil
}

// DiskHourCost is one started hour of a disk of sizeGiB beyond the
// policy's free part, at the volume price (VolumeHourCost, with carry).
func (p Policy) DiskHourCost(sizeGiB int, carry int64) (Fen, int64) {
	return VolumeHourCost(p.BilledDiskGiB(sizeGiB), Fen(p.VolumePricePerGiBMonthFen), carry)
}

// BilledDiskGiB is the part of a disk of sizeGiB that is paid for.
func (p Policy) BilledDiskGiB(sizeGiB int) int {
	return max(0, sizeGiB-p.ContainerDiskFreeGiB)
}

// Drill results.
const (
	DrillRunning  = "running"
	DrillReady    = "ready"     // the workload reported ready within the notice
	DrillNotReady = "not_ready" // the notice ran out first
)

// DrillEvery is how often a customer may drill one instance.
const DrillEvery = time.Hour

// ReasonDrill is the reason a drill's notice gives.
const ReasonDrill InterruptReason = "drill"

// Drill is a rehearsal interruption: the real notice to the owner's own
// spot instance, withdrawn when its workload reports ready or the notice
// runs out (no SIGTERM). It is free and never in the published rates.
type Drill struct {
	StartedAt         time.Time `json:"started_at"`
	Deadline          time.Time `json:"deadline"`
	Result            string    `json:"result"`
	ReadyAfterSeconds *float64  `json:"ready_after_seconds,omitempty"`
	// WallAt and Seconds are the notice in real time (notices count in
	// real time, so a test clock moved ahead does not end it).
	WallAt  time.Time `json:"-"`
	Seconds int       `json:"-"`
}

// Settle works out a drill's result at the real time wallNow.
func (d *Drill) Settle(wallNow time.Time) {
	switch {
	case d.ReadyAfterSeconds != nil:
		d.Result = DrillReady
	case wallNow.Before(d.WallAt.Add(time.Duration(d.Seconds) * time.Second)):
		d.Result = DrillRunning
	default:
		d.Result = DrillNotReady
	}
}

// WorkAtRisk is the GPU-seconds an interruption at now would lose: since
// the last checkpoint report, or since the run started.
func (i *Instance) WorkAtRisk(now time.Time) int64 {
	if i.StartedAt == nil {
		return 0
	}
	var last time.Time
	if i.LastCheckpoint != nil {
		last = *i.LastCheckpoint
	}
	return LostGPUSeconds(i.Count, *i.StartedAt, last, now)
}

// ExpectReclaim fills ReclaimExpected from a rebalance recommendation made
// at: bookings start on the hour, so the next one after it. Nothing once
// the notice has come (Interruption says the time then) or it has ended.
func (i *Instance) ExpectReclaim(at time.Time) {
	i.RebalanceAt = &at
	if i.Status != InstanceRunning && i.Status != InstancePending {
		return
	}
	next := at.Truncate(time.Hour).Add(time.Hour)
	i.ReclaimExpected = &next
}

// Lifecycle is what the metadata endpoint calls the instance's kind.
func (i *Instance) Lifecycle() Lifecycle {
	switch i.Kind {
	case KindSpot:
		return LifecycleSpot
	case KindReserved:
		return LifecycleScheduled
	}
	return LifecycleOnDemand
}

// BillableMinutes is what one run of an instance costs in minutes: every
// started minute; an interrupted spot run does not pay for the minute of
// its interruption; a user-stopped on-demand run pays at least minMinutes.
func BillableMinutes(start, end time.Time, kind InstanceKind, interrupted, userStopped bool, minMinutes int) int {
	d := end.Sub(start)
	if d < 0 {
		d = 0
	}
	minutes := int((d + time.Minute - 1) / time.Minute)
	if interrupted {
		minutes = int(d / time.Minute)
	}
	if kind == KindOnDemand && userStopped && minutes < minMinutes {
		minutes = minMinutes
	}
	return minutes
}

// RunLedgerLine is the stored words of a run's ledger line; minimum, when
// above 0, is the on-demand minimum the run was billed up to (the ledger's
// pages find it again with MinimumOfRunLine).
func RunLedgerLine(id int64, kind InstanceKind, count int, model string, minutes, minimum int) string {
	line := fmt.Sprintf("Instance #%d (%s, %d × %s): %d min", id, kind, count, model, minutes)
	if minimum > 0 {
		line += fmt.Sprintf(" (%d-min minimum)", minimum)
	}
	return line
}

// MinimumOfRunLine is the minimum a run's ledger line says it was billed
// up to (0: none).
func MinimumOfRunLine(line string) int {
	i := strings.LastIndex(line, " (")
	var n int
	if i < 0 || !strings.HasSuffix(line, "-min minimum)") {
		return 0
	}
	if _, err := fmt.Sscanf(line[i:], " (%d-min minimum)", &n); err != nil {
		return 0
	}
	return n
}

// RunCost is the price of minutes of count GPUs at pricePerGPUHour, rounded
// down to whole fen (an instance in no-GPU mode: of its one price).
func RunCost(pricePerGPUHour Fen, count, minutes int) Fen {
	return pricePerGPUHour * Fen(BilledUnits(count)) * Fen(minutes) / 60
}

// BilledUnits is what an instance's hour price is multiplied by: its GPUs,
// or 1 in no-GPU mode (count 0), whose price is the mode's whole hourly
// price (the policy's no_gpu_price_per_hour_fen).
func BilledUnits(count int) int { return max(count, 1) }

// AutoRestarts reports whether an instance whose run ended with outcome is
// started again: an auto_restart instance interrupted by the platform is —
// not one stopped because its owner's money ran out or their account was
// disabled.
func AutoRestarts(i *Instance, outcome InstanceStatus, ownerDisabled bool) bool {
	if outcome != InstanceInterrupted || !i.AutoRestart || ownerDisabled {
		return false
	}
	if i.Interruption == nil {
		return true
	}
	switch i.Interruption.Reason {
	case ReasonBalance, ReasonAccountDisabled, ReasonTeamReclaim:
		// Starting again would take back what was just given back.
		return false
	}
	return true
}

// FenceTimeout is how long an auto-restart instance whose node stopped
// answering waits for that node to confirm the old attempt gone (or for
// an administrator to fence the node by revoking its token). Past it, it
// starts elsewhere in a fresh checkpoint directory: the old attempt may
// still be writing the old one.
const FenceTimeout = 15 * time.Minute

// LostAfterHeartbeats is how many heartbeats in a row may leave out a
// running instance before the portal takes it as lost by its agent and
// ends it. One miss can be a race (a heartbeat written just before the
// workload started, read after the push that said it runs); three cannot.
const LostAfterHeartbeats = 3

// LostWorkloadError is the error an instance gets when its node stopped
// reporting it.
const LostWorkloadError = "its node stopped reporting it (the agent lost the workload)"

// WorkloadOutcome is how an instance's run ended, from its agent's report
// of the exit: interrupted when it had its notice — except a job's task
// that finished its work (exit 0) during the notice, which succeeded, as
// running it again would do it twice; stopped when its owner (or the
// platform) asked; failed on an error or a non-zero exit; stopped when it
// simply exited 0.
func WorkloadOutcome(i *Instance, stopAsked bool, r WorkloadStatus) InstanceStatus {
	doneInNotice := i.JobID != nil && r.Signal == "" && r.ExitCode != nil && *r.ExitCode == 0
	switch {
	case i.Status == InstanceInterrupting && !doneInNotice:
		return InstanceInterrupted
	case stopAsked:
		return InstanceStopped
	case r.Error != "" || (r.ExitCode != nil && *r.ExitCode != 0):
		return InstanceFailed
	}
	return InstanceStopped
}

// GPUNow is one of an instance's GPUs as its node's last heartbeat said.
type GPUNow struct {
	Index              int    `json:"index"`
	UUID               string `json:"uuid"`
	UtilizationPercent int    `json:"utilization_percent"`
	MemoryUsedMiB      int    `json:"memory_used_mib"`
	MemoryTotalMiB     int    `json:"memory_total_mib"`
}

// GPUUseSample is an instance's GPUs at one time: their mean utilisation
// and the memory in use on all of them.
type GPUUseSample struct {
	At                 time.Time `json:"at"`
	UtilizationPercent int       `json:"utilization_percent"`
	MemoryUsedMiB      int       `json:"memory_used_mib"`
}
