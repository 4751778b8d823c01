package gpuportal

import "time"

// Notification kinds.
const (
	NoteBookingConfirmed    = "booking_confirmed"
	NoteBookingCancelled    = "booking_cancelled"
	NoteWaitlistOffer       = "waitlist_offer"
	NoteWaitlistExpired     = "waitlist_expired"
	NoteWaitlistBooked      = "waitlist_booked"
	NoteReservationStarts   = "reservation_starting"
	NoteReservationEnds     = "reservation_ending"
	NoteSpotInterruption    = "spot_interruption"
	NoteInstanceRestarted   = "instance_restarted"
	NoteReservationShorted  = "reservation_short"
	NotePasswordReset       = "password_reset" // email only: it carries a one-time link
	NoteJobSucceeded        = "job_succeeded"
	NoteJobUnpaid           = "job_unpaid"      // a job's tasks wait: its owner's balance cannot pay for another
	NoteAutoBookUnpaid      = "waitlist_unpaid" // capacity freed but the balance could not pay the auto-book
	NoteBalanceLow          = "balance_low"     // runs out within 30 min at the current burn
	NoteBalanceStop         = "balance_stop"    // ran out: instances get the stop notice
	NoteJobFailed           = "job_failed"
	NoteTokensRevoked       = "api_tokens_revoked"   // a password reset (or a change, when asked) ended every API token
	NoteVerifyEmail         = "verify_email"         // email only: the link that verifies the address
	NoteVerifyPhone         = "verify_phone"         // SMS only: the code that verifies the phone
	NoteSpotRebalance       = "spot_rebalance"       // in-app only: the book will want a spot instance's GPUs soon
	NoteReservationLaunched = "reservation_launched" // its launch spec started on its GPUs
	NoteVolumesSuspended    = "volumes_suspended"    // the balance ran out: volumes kept 15 days (VolumeNames, Deadline)
	NoteVolumeDeleteSoon    = "volume_delete_soon"   // 3 days before a suspended volume is deleted
	NoteVolumeDeleted       = "volume_deleted"       // a suspended volume was deleted after 15 days
	NoteIdleStopped         = "idle_stopped"         // an instance stopped by its idle_stop_minutes (Missing: the minutes)
	NoteBudgetReached       = "budget_reached"       // this month's spend reached a BudgetLevels share of the budget (Budget)
	// NoteMemberLimit: a team member's spend this month reached a share
	// of the limit the team gave them (Budget; Subject the team, VolumeNames
	// unused): told to the member at 80 %, and to the owners too at 100 %.
	NoteMemberLimit = "member_limit"
	// NoteScheduleFailed: one of the scheduler's decisions about the
	// user's things could not be carried out (Kind: the step, Subject:
	// what it was about, Reason: why); the rest of the tick went on.
	NoteScheduleFailed = "schedule_failed"
	// NoteReservationLaunchFailed: a reservation started, but its launch
	// spec could not run (Reason); its GPUs are the owner's all the same.
	NoteReservationLaunchFailed = "reservation_launch_failed"
	// Kept disks at zero balance follow the volumes' rule (InstanceID,
	// Deadline): suspended and kept 15 days, told 3 days before, then
	// released.
	NoteDiskSuspended   = "disk_suspended"
	NoteDiskReleaseSoon = "disk_release_soon"
	NoteDiskReleased    = "disk_released"
	// NoteWebhookFailing: a webhook's endpoint failed WebhookFailingAfter
	// attempts in a row (Subject: its URL, Reason: the last error); its
	// deliveries wait and are retried for 24 h.
	NoteWebhookFailing = "webhook_failing"
	// NoteGPUFailure: an instance's GPU failed under it (Reason: the
	// fault; Refund: what was credited; Subject: how it ended,
	// interrupted — restarting where its kind does — or failed).
	NoteGPUFailure = "gpu_failure"
	// NoteMaintenance: a maintenance window (Subject: its reason; Start,
	// End) cancelled the reservation ReservationID with a full refund
	// (Refund), or will stop the instance InstanceID at its start.
	NoteMaintenance = "maintenance_window"
)

// NoteKinds is every notification kind: each must render in every
// language (a test fails for one without its message).
var NoteKinds = []string{
	NoteBookingConfirmed, NoteBookingCancelled, NoteWaitlistOffer, NoteWaitlistExpired, NoteWaitlistBooked,
	NoteReservationStarts, NoteReservationEnds, NoteSpotInterruption, NoteInstanceRestarted, NoteReservationShorted,
	NotePasswordReset, NoteJobSucceeded, NoteJobUnpaid, NoteAutoBookUnpaid, NoteBalanceLow, NoteBalanceStop, NoteJobFailed, NoteTokensRevoked, NoteVerifyEmail, NoteVerifyPhone, NoteSpotRebalance, NoteReservationLaunched, NoteIdleStopped, NoteBudgetReached, NoteMemberLimit,
	NoteScheduleFailed, NoteReservationLaunchFailed, NoteDiskSuspended, NoteDiskReleaseSoon, NoteDiskReleased, NoteWebhookFailing, NoteGPUFailure, NoteMaintenance,
}

// Notification channels.
const (
	ChannelApp   = "app"
	ChannelEmail = "email"
	ChannelSMS   = "sms"
)

// NoteParams are the facts a notification is written from; which are set
// depends on the kind.
type NoteParams struct {
	ReservationID int64     `json:"reservation_id,omitempty"`
	InstanceID    int64     `json:"instance_id,omitempty"`
	EntryID       int64     `json:"entry_id,omitempty"`
	Model         string    `json:"model,omitempty"`
	ModelName     string    `json:"model_name,omitempty"` // the model's name when it was written
	Region        string    `json:"region,omitempty"`
	RegionName    string    `json:"region_name,omitempty"` // the region's name when it was written
	Count         int       `json:"count,omitempty"`
	Start         time.Time `json:"start,omitzero"`
	End           time.Time `json:"end,omitzero"`
	Price         Fen       `json:"price_fen,omitempty"`
	Fee           Fen       `json:"fee_fen,omitempty"`
	Refund        Fen       `json:"refund_fen,omitempty"`
	Expires       time.Time `json:"expires,omitzero"`
	Deadline      time.Time `json:"deadline,omitzero"`
	Reason        string    `json:"reason,omitempty"`
	Missing       int       `json:"missing,omitempty"`
	Available     Fen       `json:"available_fen,omitempty"`
	RunsOutAt     time.Time `json:"runs_out_at,omitzero"`
	JobID         int64     `json:"job_id,omitempty"`
	JobName       string    `json:"job_name,omitempty"`
	Tasks         []int     `json:"tasks,omitempty"` // a failed job's failed tasks
	Kind          string    `json:"kind,omitempty"`  // an instance's kind (spot, on_demand, reserved)
	// ExtendHours is how many hours a reservation ending soon could be
	// extended by when the reminder was written.
	ExtendHours int `json:"extend_hours,omitempty"`
	// Budget is, for a budget notice, the budget and this month's spend.
	Budget *Budget `json:"budget,omitempty"`
	// Subject is what a failed scheduler decision was about ("reservation 12").
	Subject string `json:"subject,omitempty"`
	// Team and Member: a member limit notice's team and who reached it.
	Team   string `json:"team,omitempty"`
	Member string `json:"member,omitempty"`
	// VolumeNames names the volumes a volume notice is about.
	VolumeNames string `json:"volume_names,omitempty"`
	// Token is a password reset link's secret (NotePasswordReset only). It
	// is never stored: the dispatcher makes the link when it sends the
	// email, so no secret sits in the outbox or the admins' notification
	// log.
	Token string `json:"-"`
	// Code is a phone verification code (NoteVerifyPhone only), made as it
	// is sent and never stored either.
	Code string `json:"-"`
}

// Notification is one message to one user on one channel.
type Notification struct {
	ID        int64      `json:"id"`
	UserID    int64      `json:"user_id"`
	Kind      string     `json:"kind"`
	Params    NoteParams `json:"params"`
	Channel   string     `json:"channel"`
	Recipient string     `json:"recipient"`
	Status    string     `json:"status"`
	Attempts  int        `json:"attempts"`
	LastError string     `json:"last_error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	SentAt    *time.Time `json:"sent_at,omitempty"`
	NextTry   time.Time  `json:"next_attempt_at"`
}
