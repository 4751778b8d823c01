package gpuportal

import (
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"
)

// Teams: one balance, many people (DESIGN §1, §6 "Teams"). A team owns an
// account of its own — a users row nobody signs in as — so that its
// balance, ledger, budget, quotas and every resource made for it work as
// a customer's do; a member acting for the team (X-Team, the header's
// switcher) acts as that account, with the member and their role beside
// it (User.Acting). Who may do what is one rule, TeamMay.

// Team roles, most powerful first.
const (
	TeamOwner   = "owner"
	TeamAdmin   = "admin"
	TeamBilling = "billing"
	TeamMember  = "member"
	TeamViewer  = "viewer"
)

// TeamRoles lists the roles, most powerful first.
var TeamRoles = []string{TeamOwner, TeamAdmin, TeamBilling, TeamMember, TeamViewer}

// ValidTeamRole reports whether role is one of TeamRoles.
func ValidTeamRole(role string) bool {
	for _, r := range TeamRoles {
		if r == role {
			return true
		}
	}
	return false
}

// TeamArea is what a request acting for a team touches.
type TeamArea string

const (
	// AreaResources: instances, reservations, jobs, volumes, images, the
	// waitlist — what the team runs and books.
	AreaResources TeamArea = "resources"
	// AreaWebhooks: the team's webhooks — owners and admins make and
	// change them, every member sees them.
	AreaWebhooks TeamArea = "webhooks"
	// AreaMoney: the team's balance, ledger, spend, top-ups and budget.
	AreaMoney TeamArea = "money"
	// AreaMembers: the team itself — members, invitations, limits, audit.
	AreaMembers TeamArea = "members"
)

// TeamMay is the one rule of who may do what in a team: read (change
// false) or change an area. Members change resources, but only their
// own instances (TeamMayChangeInstance); the owner alone deletes the team
// or hands over ownership (TeamOwnerOnly).
func TeamMay(role string, area TeamArea, change bool) bool {
	switch area {
	case AreaResources:
		switch role {
		case TeamOwner, TeamAdmin, TeamMember:
			return true
		case TeamViewer:
			return !change
		}
	case AreaMoney:
		switch role {
		case TeamOwner, TeamBilling:
			return true
		case TeamAdmin:
			return !change
		}
	case AreaWebhooks:
		switch role {
		case TeamOwner, TeamAdmin:
			return true
		case TeamBilling, TeamMember, TeamViewer:
			return !change
		}
	case AreaMembers:
		switch role {
		case TeamOwner, TeamAdmin:
			return true
		case TeamBilling, TeamMember, TeamViewer:
			return !change // the members list, without changing it
		}
	}
	return false
}

// TeamRoleFor names the least role that may do it, for the 403's words.
func TeamRoleFor(area TeamArea, change bool) string {
	for k := len(TeamRoles) - 1; k >= 0; k-- {
		if TeamMay(TeamRoles[k], area, change) {
			return TeamRoles[k]
		}
	}
	return TeamOwner
}

// TeamMayChangeInstance: owners and admins stop, start and enter any of
// the team's instances; a member only those they made.
func TeamMayChangeInstance(role string, memberID int64, createdBy *int64) bool {
	switch role {
	case TeamOwner, TeamAdmin:
		return true
	case TeamMember:
		return createdBy != nil && *createdBy == memberID
	}
	return false
}

// Acting is a member acting for a team: User is then the team's account.
type Acting struct {
	TeamID   int64
	TeamName string
	Member   *User // the person
	Role     string
	// The member's limits (nil: none).
	MonthlySpendLimit *Fen
	MaxRunningGPUs    *int
	// ReservedRunningGPUs is the member's guaranteed share of the team's
	// running GPUs (nil: none; see AdmitTeamRun).
	ReservedRunningGPUs *int
}

// MemberID is who made what a user makes: the member acting for a team,
// or nil for one's own account.
func (u *User) MemberID() *int64 {
	if u == nil || u.Acting == nil || u.Acting.Member == nil {
		return nil
	}
	id := u.Acting.Member.ID
	return &id
}

// Team is a team as its member sees it.
type Team struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"` // the caller's
	CreatedAt time.Time `json:"created_at"`
	Members   int       `json:"members"`
	// Balance: for owner, admin and billing only.
	Balance *Balance `json:"balance,omitempty"`
	// AccountID is the team's account (the owner of its resources).
	AccountID int64 `json:"-"`
}

// TeamMemberInfo is one member on the members list.
type TeamMemberInfo struct {
	UserID            int64  `json:"user_id"`
	Email             string `json:"email"`
	Name              string `json:"name"`
	Role              string `json:"role"`
	MonthlySpendLimit *Fen   `json:"monthly_spend_limit_fen"`
	MaxRunningGPUs    *int   `json:"max_running_gpus"`
	// ReservedRunningGPUs: the member's guaranteed share (nil: none).
	ReservedRunningGPUs *int      `json:"reserved_running_gpus"`
	SpentThisMonth      Fen       `json:"spent_this_month_fen"`
	RunningGPUs         int       `json:"running_gpus"`
	JoinedAt            time.Time `json:"joined_at"`
}

// TeamInvitation is an invitation to join a team with a role.
type TeamInvitation struct {
	ID        int64     `json:"id"`
	TeamID    int64     `json:"team_id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	URL       string    `json:"url,omitempty"` // only when made: the token is not kept
	ExpiresAt time.Time `json:"expires_at"`
	// AcceptedAt: used (one use).
	AcceptedAt *time.Time `json:"accepted_at,omitempty"`
}

// InvitationLifetime is how long an invitation may be accepted.
const InvitationLifetime = 7 * 24 * time.Hour

// MemberUpdate changes a member: a role, or limits (Set* says the limit
// is named in the request; a nil value then removes it).
type MemberUpdate struct {
	Role                 *string
	SetMonthlySpendLimit bool
	MonthlySpendLimit    *Fen
	SetMaxRunningGPUs    bool
	MaxRunningGPUs       *int
	SetReservedGPUs      bool
	ReservedRunningGPUs  *int
}

// ValidateTeamName trims and checks a team's name: 1 to 100 characters.
func ValidateTeamName(name *string) error {
	*name = strings.TrimSpace(*name)
	if *name == "" || utf8.RuneCountInString(*name) > 100 || strings.ContainsAny(*name, "\x00\r\n") {
		return FieldErrorf(EINVALID, "name", "A team's name is 1 to 100 characters on one line.")
	}
	return nil
}

// ValidateInvitation checks an invitation's email and role (an owner is
// made by handing over ownership, never invited).
func ValidateInvitation(email *string, role string) error {
	*email = strings.ToLower(strings.TrimSpace(*email))
	if a, err := mail.ParseAddress(*email); err != nil || a.Address != *email {
		return FieldErrorf(EINVALID, "email", "Enter the email address to invite.")
	}
	if !ValidTeamRole(role) || role == TeamOwner {
		return FieldErrorf(EINVALID, "role", "The role must be admin, billing, member or viewer.")
	}
	return nil
}

// ValidateMemberUpdate checks a member change's shape.
func ValidateMemberUpdate(u MemberUpdate) error {
	if u.Role != nil && !ValidTeamRole(*u.Role) {
		return FieldErrorf(EINVALID, "role", "The role must be owner, admin, billing, member or viewer.")
	}
	if u.MonthlySpendLimit != nil && (*u.MonthlySpendLimit < 0 || *u.MonthlySpendLimit > MaxCredit) {
		return FieldErrorf(EINVALID, "monthly_spend_limit_fen", "A monthly spend limit is 0 to %s.", MaxCredit.String())
	}
	if u.MaxRunningGPUs != nil && (*u.MaxRunningGPUs < 0 || *u.MaxRunningGPUs > 100_000) {
		return FieldErrorf(EINVALID, "max_running_gpus", "A GPU limit is 0 to 100000.")
	}
	if u.ReservedRunningGPUs != nil && (*u.ReservedRunningGPUs < 0 || *u.ReservedRunningGPUs > 100_000) {
		return FieldErrorf(EINVALID, "reserved_running_gpus", "A guaranteed share is 0 to 100000 GPUs.")
	}
	return nil
}

// A team lends its idle GPUs (Kueue's cohort borrowing, Run:ai's
// over-quota). Once any member has a guaranteed share
// (reserved_running_gpus), the team's running-GPU quota is split: what a
// member runs within their share is theirs; a run that would take them
// past it borrows GPUs the team is not using, at the spot price, and is
// interruptible: a teammate launching within their share takes borrowed
// GPUs back with the usual notice, newest first. An instance is within
// its member's share only if it fits whole, and stays what it was
// launched as for its life.

// ReasonTeamReclaim: a borrowed run taken back for a teammate launching
// within their share (never counted in the spot rates; no auto-restart).
const ReasonTeamReclaim InterruptReason = "team_reclaim"

// TeamGPUs is what a team runs when a member launches.
type TeamGPUs struct {
	Quota     int // the team's running-GPU quota
	Share     int // the launching member's guaranteed share (0: none)
	MemberOwn int // the member's GPUs running within their share
	TeamOwn   int // all the team's GPUs running within shares
	Lent      int // borrowed GPUs running, not under notice
	Leaving   int // borrowed GPUs under notice, soon free
}

// Lending is how a team's run is admitted.
type Lending struct {
	Borrowed bool // the run borrows idle GPUs (spot price, interruptible)
	Reclaim  int  // GPUs of borrowed runs to take back for it
}

// AdmitTeamRun admits a run of count GPUs by a member of a team that
// lends, or says why not (422 field "quota").
func AdmitTeamRun(g TeamGPUs, count int) (Lending, error) {
	if g.MemberOwn+count <= g.Share {
		if g.TeamOwn+count > g.Quota {
			// Shares can add up past a quota an administrator lowered.
			return Lending{}, FieldErrorf(EPOLICY, "quota", "Your team's quota is %d GPUs running at once and %d of them run within members' shares now.", g.Quota, g.TeamOwn)
		}
		return Lending{Reclaim: max(0, g.TeamOwn+g.Lent+count-g.Quota)}, nil
	}
	if idle := g.Quota - g.TeamOwn - g.Lent - g.Leaving; count > idle {
		return Lending{}, FieldErrorf(EPOLICY, "quota", "Past your guaranteed share of %d GPUs you borrow the team's idle GPUs, and %d of its %d are idle now; you asked for %d.",
			g.Share, max(idle, 0), g.Quota, count)
	}
	return Lending{Borrowed: true}, nil
}
