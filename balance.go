package gpuportal

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Balance is what a customer has to spend (DESIGN §1): the posted balance
// (−Σ ledger), the part held for the instances running now (their cost so
// far, posted when each run ends), and the admin-set credit limit.
type Balance struct {
	Balance     Fen        `json:"balance_fen"`
	Held        Fen        `json:"held_fen"`
	CreditLimit Fen        `json:"credit_limit_fen"`
	Available   Fen        `json:"available_fen"`
	BurnPerHour Fen        `json:"burn_fen_per_hour"` // what the running instances cost an hour
	RunsOutAt   *time.Time `json:"runs_out_at"`       // at the current burn, a century ahead at most; nil when nothing burns
}

// NewBalance works out what is available and when it runs out.
func NewBalance(balance, held, creditLimit, burnPerHour Fen, now time.Time) Balance {
	b := Balance{Balance: balance, Held: held, CreditLimit: creditLimit, BurnPerHour: burnPerHour}
	b.Available = balance + creditLimit - held
	if burnPerHour > 0 {
		// A large balance at a small burn lasts past what a Duration holds
		// (292 years; beyond it the conversion wraps to the past, and such
		// an account was warned that it runs out): a century at most.
		hours := min(float64(max(b.Available, 0))/float64(burnPerHour), longestRunOut.Hours())
		t := now.Add(time.Duration(hours * float64(time.Hour))).Truncate(time.Minute)
		b.RunsOutAt = &t
	}
	return b
}

// longestRunOut is the furthest ahead a balance is said to run out.
const longestRunOut = 100 * 365 * 24 * time.Hour

// LaunchFunds is what must be available for a launch (or a job's first
// task): an hour of its own price and an hour of everything of the
// owner's already running or waiting to start — counting the launch alone
// let ¥2.40 start twelve GPUs one after another.
func LaunchFunds(launchHour, runningHour, pendingHour Fen) Fen {
	return launchHour + runningHour + pendingHour
}

// LowBalanceWarning is how long before running out a customer is told.
const LowBalanceWarning = 30 * time.Minute

// RunsOutWithin reports whether the balance runs out within d at the
// current burn.
func (b Balance) RunsOutWithin(d time.Duration, now time.Time) bool {
	return b.RunsOutAt != nil && !b.RunsOutAt.After(now.Add(d))
}

// Ledger entry kinds. amount_fen > 0 takes money out of the balance, < 0
// puts it in.
const (
	LedgerReservation     = "reservation"
	LedgerRefund          = "refund"
	LedgerCancellationFee = "cancellation_fee"
	LedgerInstance        = "instance"
	LedgerVolume          = "volume" // a volume's started hours
	LedgerDisk            = "disk"   // an instance disk's started hours beyond its free part
	LedgerImage           = "image"  // a private image's started hours (the description is its id)
	LedgerTopUp           = "topup"
	LedgerCredit          = "credit" // an admin's credit (a bank transfer)
	// LedgerPayout is unused balance paid back to the payments it came
	// from (a refund request an administrator approved); a payout the
	// provider refused is put back with a negative one.
	LedgerPayout = "payout"
	// LedgerTransfer moves money between two accounts of one person: a
	// closed team's balance to its owner (both ledgers have a line).
	LedgerTransfer = "transfer"
)

// TopUpNeeded is what a customer must top up before something of price
// can be paid from available: the whole difference, also when available
// is below zero (the quote panel, GET /quote and a 402 all say this one
// amount).
func TopUpNeeded(price, available Fen) Fen {
	return max(0, price-available)
}

// TopUpFor is the top-up to offer for a shortfall: the missing amount
// rounded up to whole yuan, never under MinTopUp (0 when nothing is
// missing).
func TopUpFor(missing Fen) Fen {
	if missing <= 0 {
		return 0
	}
	return max(MinTopUp, (missing+99)/100*100)
}

// RevenueKinds are the ledger kinds that are the platform's revenue:
// charges, less refunds and the cancellation fees that stay — never money
// coming in (top-ups, credits) or paid back (payouts), which only move a
// customer's balance.
var RevenueKinds = []string{LedgerReservation, LedgerRefund, LedgerCancellationFee, LedgerInstance, LedgerVolume, LedgerDisk, LedgerImage}

// Top-up statuses.
const (
	TopUpPending = "pending"
	TopUpPaid    = "paid"
	TopUpExpired = "expired"
)

// Top-up limits: ¥1 to ¥1,000,000 at a time; a pending one expires.
const (
	MinTopUp          Fen = 100
	MaxTopUp          Fen = 100_000_000
	TopUpValidFor         = 30 * time.Minute
	TestPayProvider       = "test"
	StripePayProvider     = "stripe"
	MaxCredit         Fen = 1_000_000_000 // an admin's credit: ¥10,000,000 at most at a time
)

// TopUp is money on its way in through a payment provider.
type TopUp struct {
	ID        int64  `json:"id"`
	UserID    int64  `json:"user_id"`
	Amount    Fen    `json:"amount_fen"`
	Provider  string `json:"provider"`
	Status    string `json:"status"`
	PaymentID string `json:"payment_id,omitempty"`
	PayURL    string `json:"pay_url,omitempty"`
	// ProviderRef is the provider's own name for the checkout (a Stripe
	// Checkout Session id); Refunded what of it was paid back.
	ProviderRef string     `json:"provider_ref,omitempty"`
	Refunded    Fen        `json:"refunded_fen,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	PaidAt      *time.Time `json:"paid_at,omitempty"`
}

// TopUpRequest asks to top up.
type TopUpRequest struct {
	Amount   Fen    `json:"amount_fen"`
	Provider string `json:"provider"`
}

// Validate checks a top-up request.
func (r *TopUpRequest) Validate() error {
	if r.Provider == "" {
		r.Provider = TestPayProvider // as before providers came
	}
	if r.Provider != TestPayProvider && r.Provider != StripePayProvider {
		return FieldErrorf(EINVALID, "provider", "Unknown payment provider %q.", r.Provider)
	}
	if r.Amount < MinTopUp || r.Amount > MaxTopUp {
		return FieldErrorf(EINVALID, "amount_fen", "A top-up is %s to %s.", MinTopUp.String(), MaxTopUp.String())
	}
	return nil
}

// Refund request statuses.
const (
	RefundRequested = "requested"
	RefundRefunding = "refunding" // approved; the provider is being asked
	RefundRefunded  = "refunded"
	RefundRejected  = "rejected"
	RefundFailed    = "failed" // the provider refused; the money is back in the balance
)

// RefundRequest is a customer asking for unused balance back.
type RefundRequest struct {
	ID        int64      `json:"id"`
	UserID    int64      `json:"user_id"`
	Amount    Fen        `json:"amount_fen"`
	Note      string     `json:"note,omitempty"`
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	Refs      string     `json:"provider_refs,omitempty"` // the provider's refund ids
	Error     string     `json:"error,omitempty"`
}

// RefundPart is the share of a refund that goes back to one top-up's
// payment.
type RefundPart struct {
	RefundID  int64  `json:"refund_id"`
	TopUpID   int64  `json:"topup_id"`
	Provider  string `json:"provider"`
	PaymentID string `json:"payment_id"`
	Amount    Fen    `json:"amount_fen"`
	Status    string `json:"status"`          // RefundPart*
	Ref       string `json:"ref,omitempty"`   // the provider's refund id, once made
	Error     string `json:"error,omitempty"` // why the provider refused it, or why its outcome is not known yet
	Attempts  int    `json:"attempts"`
}

// IdempotencyKey is the one key every request to the provider for this
// part carries: however often it is asked again (a timeout, a crash), the
// provider makes one refund.
func (p RefundPart) IdempotencyKey() string {
	return fmt.Sprintf("gpuportal-refund-%d-topup-%d", p.RefundID, p.TopUpID)
}

// Refund part statuses. A part whose outcome is not known (the provider
// timed out or failed) stays pending: it is asked again with the same
// idempotency key and read back, never taken as refused — only an
// explicit refusal puts its money back into the balance.
const (
	RefundPartPending = "pending"
	RefundPartMade    = "made"
	RefundPartRefused = "refused"
)

// RefundUpdate is what a provider says of one refund part (its webhook,
// or reading the refund back): made, or refused with why.
type RefundUpdate struct {
	RefundID int64
	TopUpID  int64
	Ref      string
	Status   string // RefundPartMade or RefundPartRefused
	Error    string
}

// RefundSplit spreads amount over the payments it can go back to, newest
// first, each at most what is left of it (refundable[k]); it returns the
// shares and what could not be placed.
func RefundSplit(amount Fen, refundable []Fen) (shares []Fen, left Fen) {
	left = amount
	for _, r := range refundable {
		share := min(left, max(r, 0))
		shares = append(shares, share)
		left -= share
	}
	return shares, left
}

// PaymentEvent is what a provider's webhook says about a payment.
type PaymentEvent struct {
	PaymentID string `json:"payment_id"`
	TopUpID   int64  `json:"topup_id"`
	Amount    Fen    `json:"amount_fen"`
	Status    string `json:"status"`
	// CheckoutRef is the provider's reference of the checkout that was
	// paid (a Stripe Checkout Session id), where it keeps one: the
	// payment credits only the top-up that checkout was made for.
	CheckoutRef string `json:"-"`
}

// Validate checks the shape of a webhook's event.
func (e *PaymentEvent) Validate() error {
	e.PaymentID = strings.TrimSpace(e.PaymentID)
	if e.PaymentID == "" || len(e.PaymentID) > 200 {
		return FieldErrorf(EINVALID, "payment_id", "The payment_id is required (at most 200 characters).")
	}
	if e.TopUpID <= 0 || e.Amount <= 0 {
		return Errorf(EINVALID, "The event needs the topup_id and the amount_fen paid.")
	}
	if e.Status != "paid" {
		return FieldErrorf(EINVALID, "status", "Only paid events credit a top-up.")
	}
	return nil
}

// CreditRequest is an admin's credit to an account (a bank transfer).
type CreditRequest struct {
	Amount Fen    `json:"amount_fen"`
	Note   string `json:"note"`
}

// Validate checks an admin credit.
func (r *CreditRequest) Validate() error {
	r.Note = strings.TrimSpace(r.Note)
	if r.Amount == 0 || r.Amount > MaxCredit || r.Amount < -MaxCredit {
		return FieldErrorf(EINVALID, "amount_fen", "A credit is a non-zero amount up to %s either way.", MaxCredit.String())
	}
	if r.Note == "" || len(r.Note) > 500 {
		return FieldErrorf(EINVALID, "note", "Say why (a bank transfer's reference, say), in at most 500 characters.")
	}
	return nil
}

// Quotas limit what one customer can hold at once (DESIGN §2).
type Quotas struct {
	MaxRunningGPUs     int `json:"max_running_gpus"`
	MaxBookedGPUHours  int `json:"max_booked_gpu_hours"`
	MaxWaitlistEntries int `json:"max_waitlist_entries"`
	// MaxQueuedTasks bounds the tasks of a user's jobs not yet finished
	// (queued or running): each is a row the scheduler reads.
	MaxQueuedTasks int `json:"max_queued_tasks"`
	// MaxVolumeGiB bounds the size of all the user's volumes together;
	// nil: the policy's max_volume_gib (quotas read back always name it).
	MaxVolumeGiB *int `json:"max_volume_gib,omitempty"`
}

// DefaultQuotas are the platform's defaults; admins override per user.
var DefaultQuotas = Quotas{MaxRunningGPUs: 32, MaxBookedGPUHours: 5000, MaxWaitlistEntries: 10, MaxQueuedTasks: 10_000}

// UnmarshalJSON reads quotas; max_queued_tasks, which came later, is the
// default when a client leaves it out.
func (q *Quotas) UnmarshalJSON(b []byte) error {
	type plain Quotas
	p := plain{MaxQueuedTasks: DefaultQuotas.MaxQueuedTasks}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*q = Quotas(p)
	return nil
}

// Validate checks quotas an admin sets.
func (q Quotas) Validate() error {
	if q.MaxRunningGPUs < 0 || q.MaxRunningGPUs > 100_000 || q.MaxBookedGPUHours < 0 || q.MaxBookedGPUHours > 100_000_000 || q.MaxWaitlistEntries < 0 || q.MaxWaitlistEntries > 10_000 ||
		q.MaxQueuedTasks < 0 || q.MaxQueuedTasks > 1_000_000 || (q.MaxVolumeGiB != nil && (*q.MaxVolumeGiB < 0 || *q.MaxVolumeGiB > 1_000_000)) {
		return FieldErrorf(EINVALID, "quotas", "Quotas are whole numbers, 0 or more.")
	}
	return nil
}

// Account is a user with their money and quotas, as admins see it.
type Account struct {
	User User `json:"user"`
	// TeamID: this is the account of that team (its user is no person).
	TeamID         int64   `json:"team_id,omitempty"`
	Balance        Balance `json:"balance"`
	SpendThisMonth Fen     `json:"spend_this_month_fen"`
	Quotas         Quotas  `json:"quotas"`
}
