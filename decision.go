package gpuportal

// The scheduler applies each of a tick's decisions on its own (DESIGN §8):
// one that fails is rolled back alone, recorded and its owner told, and
// the rest of the tick applies. These name the steps a failed decision
// belongs to; notices render each in words.
const (
	StepComplete  = "complete reservation"
	StepActivate  = "start reservation"
	StepLaunch    = "launch on reservation"
	StepLostWork  = "end work on a failed node"
	StepReplace   = "replace reservation GPUs"
	StepBalance   = "balance"
	StepInterrupt = "interrupt"
	StepRebalance = "rebalance recommendation"
	StepPlace     = "place instance"
	StepTask      = "start job task"
	StepJobUnpaid = "job unpaid notice"
	StepWaitlist  = "waitlist"
	StepReminder  = "reminder"
	StepIdleStop  = "idle stop"      // an instance's idle mark or stop
	StepBudgets   = "budget notices" // a customer's or team member's notice
	StepVolumes   = "bill volumes"
	StepDisks     = "bill disks"
	StepImages    = "bill images"
	// The book-keeping after the plan, one decision each.
	StepTopUps  = "expire top-ups"
	StepSamples = "sample instances"
	StepRollup  = "roll up rates"
	// StepGPUFailure: ending an instance whose GPU failed (in the
	// heartbeat that reported it).
	StepGPUFailure = "end work on a failed GPU"
)
