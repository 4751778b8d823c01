package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gpuportal"
)

// Teams (issue 47). A team's money and resources belong to its account,
// a users row nobody signs in as (noLogin); members act for it through
// ActAs. Every change to a team is in the audit log with its team_id.

const teamColumns = `t.id, t.name, t.account_id, t.created_at, m.role, (SELECT count(*) FROM team_members c WHERE c.team_id = t.id)`

func scanTeam(row interface{ Scan(...any) error }) (*gpuportal.Team, error) {
	var t gpuportal.Team
	var created int64
	if err := row.Scan(&t.ID, &t.Name, &t.AccountID, &created, &t.Role, &t.Members); err != nil {
		return nil, err
	}
	t.CreatedAt = fromUnix(created)
	return &t, nil
}

// CreateTeam makes a team with its account and user as its owner.
func (db *DB) CreateTeam(ctx context.Context, user *gpuportal.User, name string) (*gpuportal.Team, error) {
	if user == nil || user.Acting != nil {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "Make a team from your own account, not while acting for a team.")
	}
	if err := gpuportal.ValidateTeamName(&name); err != nil {
		return nil, err
	}
	var id int64
	err := db.inTx(ctx, "create team", func(tx *sql.Tx) error {
		now := unix(db.now())
		// The account's address is never written to: it is only unique.
		var account int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO users (email, name, phone, password_hash, role, lang, created_at) VALUES (?, ?, '', ?, ?, '', ?) RETURNING id`,
			"team-"+gpuportal.NewSecret("")+"@teams.invalid", name, noLogin, gpuportal.RoleCustomer, now).Scan(&account); err != nil {
			return named("team account", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (user_id) VALUES (?)`, account); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `INSERT INTO teams (name, account_id, created_at) VALUES (?, ?, ?) RETURNING id`, name, account, now).Scan(&id); err != nil {
			return named("team", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO team_members (team_id, user_id, role, joined_at) VALUES (?, ?, 'owner', ?)`, id, user.ID, now); err != nil {
			return err
		}
		return db.teamAudit(ctx, tx, id, user.ID, "team.create", teamSubject(id), nil, map[string]any{"name": name})
	})
	if err != nil {
		return nil, err
	}
	return db.Team(ctx, user, id)
}

func teamSubject(id int64) string { return "team/" + strconv.FormatInt(id, 10) }

// teamAudit writes one entry of a team's audit trail.
func (db *DB) teamAudit(ctx context.Context, tx *sql.Tx, teamID, actorID int64, action, subject string, oldValue, newValue any) error {
	return db.auditFor(ctx, tx, teamID, actorID, action, subject, oldValue, newValue)
}

// Teams are the user's teams with their role in each (and the balance,
// for the roles that see it).
func (db *DB) Teams(ctx context.Context, user *gpuportal.User) ([]gpuportal.Team, error) {
	list, err := db.TeamsOf(ctx, user)
	if err != nil {
		return nil, err
	}
	for k := range list {
		if err := db.teamBalance(ctx, &list[k]); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// TeamsOf is Teams without their balances (the header's switcher, on
// every page).
func (db *DB) TeamsOf(ctx context.Context, user *gpuportal.User) ([]gpuportal.Team, error) {
	list, err := scanAll(ctx, db.read, func(r *sql.Rows, t *gpuportal.Team) error {
		got, err := scanTeam(r)
		if err == nil {
			*t = *got
		}
		return err
	}, `SELECT `+teamColumns+` FROM team_members m JOIN teams t ON t.id = m.team_id WHERE m.user_id = ? AND t.deleted_at IS NULL ORDER BY t.name, t.id`, user.ID)
	if err != nil {
		return nil, fmt.Errorf("teams: %w", err)
	}
	return list, nil
}

// Team is one of the user's teams; another's is not_found.
func (db *DB) Team(ctx context.Context, user *gpuportal.User, id int64) (*gpuportal.Team, error) {
	t, err := db.teamOf(ctx, db.read, user, id)
	if err != nil {
		return nil, err
	}
	return t, db.teamBalance(ctx, t)
}

// teamBalance adds the balance for the roles that see it.
func (db *DB) teamBalance(ctx context.Context, t *gpuportal.Team) error {
	if !gpuportal.TeamMay(t.Role, gpuportal.AreaMoney, false) {
		return nil
	}
	b, err := db.balanceIn(ctx, db.read, t.AccountID, db.now())
	if err != nil {
		return err
	}
	t.Balance = &b
	return nil
}

// teamOf reads a team the user is a member of (not_found otherwise: no
// one outside a team learns it exists).
func (db *DB) teamOf(ctx context.Context, q queryer, user *gpuportal.User, id int64) (*gpuportal.Team, error) {
	if user == nil {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Team %d not found.", id)
	}
	t, err := scanTeam(q.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM team_members m JOIN teams t ON t.id = m.team_id
		WHERE m.team_id = ? AND m.user_id = ? AND t.deleted_at IS NULL`, id, user.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Team %d not found.", id)
	}
	return t, err
}

// teamAllows reads the user's team and checks their role may do it.
func (db *DB) teamAllows(ctx context.Context, q queryer, user *gpuportal.User, id int64, area gpuportal.TeamArea, change bool) (*gpuportal.Team, error) {
	t, err := db.teamOf(ctx, q, user, id)
	if err != nil {
		return nil, err
	}
	if !gpuportal.TeamMay(t.Role, area, change) {
		return nil, teamForbidden(t.Role, area, change)
	}
	return t, nil
}

func teamForbidden(role string, area gpuportal.TeamArea, change bool) error {
	return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Your role in this team (%s) may not do this; it takes the role %s or above.", role, gpuportal.TeamRoleFor(area, change))
}

// ActAs is member acting for team id: the team's account, with who acts
// and in which role (not_found unless they are a member).
func (db *DB) ActAs(ctx context.Context, member *gpuportal.User, id int64) (*gpuportal.User, error) {
	if member == nil {
		return nil, gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "Log in first.")
	}
	var acting gpuportal.Acting
	var account int64
	var spend, gpus, share sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT t.id, t.name, t.account_id, m.role, m.monthly_spend_limit_fen, m.max_running_gpus, m.reserved_running_gpus FROM team_members m JOIN teams t ON t.id = m.team_id
		WHERE m.team_id = ? AND m.user_id = ? AND t.deleted_at IS NULL`, id, member.ID).Scan(&acting.TeamID, &acting.TeamName, &account, &acting.Role, &spend, &gpus, &share)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.FieldErrorf(gpuportal.ENOTFOUND, "X-Team", "Team %d not found.", id)
	} else if err != nil {
		return nil, fmt.Errorf("team membership: %w", err)
	}
	if spend.Valid {
		f := gpuportal.Fen(spend.Int64)
		acting.MonthlySpendLimit = &f
	}
	acting.MaxRunningGPUs, acting.ReservedRunningGPUs = nullInt(gpus), nullInt(share)
	u, err := db.UserByID(ctx, account)
	if err != nil {
		return nil, err
	}
	acting.Member = member
	u.Acting = &acting
	u.Lang = member.Lang
	return u, nil
}

// TeamAccount is the account of team id (not_found for no such team).
func (db *DB) TeamAccount(ctx context.Context, id int64) (int64, error) {
	var account int64
	err := db.read.QueryRowContext(ctx, `SELECT account_id FROM teams WHERE id = ? AND deleted_at IS NULL`, id).Scan(&account)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, gpuportal.Errorf(gpuportal.ENOTFOUND, "Team %d not found.", id)
	}
	return account, err
}

// TeamIDOfAccount is the team whose account id is (0: a person's).
func (db *DB) TeamIDOfAccount(ctx context.Context, id int64) (int64, error) {
	var team int64
	err := db.read.QueryRowContext(ctx, `SELECT id FROM teams WHERE account_id = ?`, id).Scan(&team)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return team, err
}

// Invite makes an invitation to team id for email with role (owner or
// admin) and returns it with the token its link carries (kept only as a
// hash).
func (db *DB) Invite(ctx context.Context, user *gpuportal.User, id int64, email, role string) (*gpuportal.TeamInvitation, string, error) {
	if err := gpuportal.ValidateInvitation(&email, role); err != nil {
		return nil, "", err
	}
	token := gpuportal.NewSecret("inv_")
	inv := &gpuportal.TeamInvitation{TeamID: id, Email: email, Role: role}
	err := db.inTx(ctx, "invite", func(tx *sql.Tx) error {
		if _, err := db.teamAllows(ctx, tx, user, id, gpuportal.AreaMembers, true); err != nil {
			return err
		}
		var already int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM team_members m JOIN users u ON u.id = m.user_id WHERE m.team_id = ? AND u.email = ?`, id, email).Scan(&already); err != nil {
			return err
		}
		if already > 0 {
			return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "email", "%s is a member already.", email)
		}
		now := db.now()
		inv.ExpiresAt = now.Add(gpuportal.InvitationLifetime).UTC().Truncate(time.Second)
		if err := tx.QueryRowContext(ctx, `INSERT INTO team_invitations (team_id, email, role, token_hash, invited_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			id, email, role, gpuportal.HashSecret(token), user.ID, unix(now), unix(inv.ExpiresAt)).Scan(&inv.ID); err != nil {
			return named("invitation", err)
		}
		return db.teamAudit(ctx, tx, id, user.ID, "team.invite", teamSubject(id), nil, map[string]any{"email": email, "role": role})
	})
	if err != nil {
		return nil, "", err
	}
	return inv, token, nil
}

// InvitationByToken is what an invitation's page shows: the team's name,
// the address and role — to anyone holding the token (it is the link).
func (db *DB) InvitationByToken(ctx context.Context, token string) (*gpuportal.TeamInvitation, string, error) {
	var inv gpuportal.TeamInvitation
	var name string
	var expires int64
	var accepted sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT i.id, i.team_id, i.email, i.role, i.expires_at, i.accepted_at, t.name FROM team_invitations i JOIN teams t ON t.id = i.team_id
		WHERE i.token_hash = ? AND t.deleted_at IS NULL`, gpuportal.HashSecret(token)).Scan(&inv.ID, &inv.TeamID, &inv.Email, &inv.Role, &expires, &accepted, &name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", gpuportal.Errorf(gpuportal.ENOTFOUND, "This invitation does not exist.")
	} else if err != nil {
		return nil, "", err
	}
	inv.ExpiresAt, inv.AcceptedAt = fromUnix(expires), fromNullUnix(accepted)
	return &inv, name, nil
}

// AcceptInvitation makes user a member with the invitation's role: only
// the account with the invited address, once, within its days.
func (db *DB) AcceptInvitation(ctx context.Context, user *gpuportal.User, token string) (*gpuportal.TeamInvitation, error) {
	if user == nil || user.Acting != nil {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "Accept an invitation signed in as yourself.")
	}
	var inv *gpuportal.TeamInvitation
	err := db.inTx(ctx, "accept invitation", func(tx *sql.Tx) error {
		var expires int64
		var accepted sql.NullInt64
		inv = &gpuportal.TeamInvitation{}
		err := tx.QueryRowContext(ctx, `SELECT i.id, i.team_id, i.email, i.role, i.expires_at, i.accepted_at FROM team_invitations i JOIN teams t ON t.id = i.team_id
			WHERE i.token_hash = ? AND t.deleted_at IS NULL`, gpuportal.HashSecret(token)).Scan(&inv.ID, &inv.TeamID, &inv.Email, &inv.Role, &expires, &accepted)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "This invitation does not exist.")
		} else if err != nil {
			return err
		}
		inv.ExpiresAt = fromUnix(expires)
		switch {
		case accepted.Valid:
			return gpuportal.Errorf(gpuportal.EGONE, "This invitation was used already.")
		case !db.now().Before(inv.ExpiresAt):
			return gpuportal.Errorf(gpuportal.EGONE, "This invitation expired on %s; ask for a new one.", inv.ExpiresAt.In(db.Location).Format("2006-01-02 15:04"))
		case gpuportal.NormalizeEmail(user.Email) != inv.Email:
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "This invitation is for %s; sign in with that address to accept it.", inv.Email)
		}
		now := unix(db.now())
		res, err := tx.ExecContext(ctx, `UPDATE team_invitations SET accepted_at = ?, accepted_by = ? WHERE id = ? AND accepted_at IS NULL`, now, user.ID, inv.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return gpuportal.Errorf(gpuportal.EGONE, "This invitation was used already.")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO team_members (team_id, user_id, role, joined_at) VALUES (?, ?, ?, ?) ON CONFLICT (team_id, user_id) DO NOTHING`,
			inv.TeamID, user.ID, inv.Role, now); err != nil {
			return err
		}
		return db.teamAudit(ctx, tx, inv.TeamID, user.ID, "team.accept", teamSubject(inv.TeamID), nil, map[string]any{"email": inv.Email, "role": inv.Role})
	})
	if err != nil {
		return nil, err
	}
	return inv, nil
}

// Invitations are a team's open invitations (owner and admin).
func (db *DB) Invitations(ctx context.Context, user *gpuportal.User, id int64) ([]gpuportal.TeamInvitation, error) {
	if _, err := db.teamAllows(ctx, db.read, user, id, gpuportal.AreaMembers, true); err != nil {
		return nil, err
	}
	return scanAll(ctx, db.read, func(r *sql.Rows, inv *gpuportal.TeamInvitation) error {
		var expires int64
		err := r.Scan(&inv.ID, &inv.TeamID, &inv.Email, &inv.Role, &expires)
		inv.ExpiresAt = fromUnix(expires)
		return err
	}, `SELECT id, team_id, email, role, expires_at FROM team_invitations WHERE team_id = ? AND accepted_at IS NULL AND expires_at > ? ORDER BY id`, id, unix(db.now()))
}

// Members is a team's members with their role, limits and what each spent
// this month (as the team's ledger says) and runs now.
func (db *DB) Members(ctx context.Context, user *gpuportal.User, id int64) ([]gpuportal.TeamMemberInfo, error) {
	t, err := db.teamAllows(ctx, db.read, user, id, gpuportal.AreaMembers, false)
	if err != nil {
		return nil, err
	}
	list, err := scanAll(ctx, db.read, func(r *sql.Rows, m *gpuportal.TeamMemberInfo) error {
		var spend, gpus, share sql.NullInt64
		var joined int64
		if err := r.Scan(&m.UserID, &m.Email, &m.Name, &m.Role, &spend, &gpus, &share, &joined); err != nil {
			return err
		}
		if spend.Valid {
			f := gpuportal.Fen(spend.Int64)
			m.MonthlySpendLimit = &f
		}
		m.MaxRunningGPUs, m.ReservedRunningGPUs = nullInt(gpus), nullInt(share)
		m.JoinedAt = fromUnix(joined)
		return nil
	}, `SELECT u.id, u.email, u.name, m.role, m.monthly_spend_limit_fen, m.max_running_gpus, m.reserved_running_gpus, m.joined_at FROM team_members m JOIN users u ON u.id = m.user_id
		WHERE m.team_id = ? ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'billing' THEN 2 WHEN 'member' THEN 3 ELSE 4 END, u.email`, id)
	if err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	spent, err := db.memberSpend(ctx, db.read, t.AccountID, 0, db.monthStart(db.now()))
	if err != nil {
		return nil, err
	}
	running, err := db.memberGPUs(ctx, db.read, t.AccountID, 0)
	if err != nil {
		return nil, err
	}
	for k := range list {
		list[k].SpentThisMonth, list[k].RunningGPUs = spent[list[k].UserID], running[list[k].UserID]
	}
	return list, nil
}

// memberSpend is what each member of a team's account spent since from
// (or member alone, when not 0): the team's charges for what they made,
// with the runs not posted yet.
func (db *DB) memberSpend(ctx context.Context, q queryer, account, member int64, from time.Time) (map[int64]gpuportal.Fen, error) {
	type row struct {
		member int64
		fen    gpuportal.Fen
	}
	who, args := "l.created_by IS NOT NULL", []any{account, unix(from)}
	if member != 0 {
		who, args = "l.created_by = ?", append(args, member)
	}
	posted, err := scanAll(ctx, q, func(r *sql.Rows, x *row) error { return r.Scan(&x.member, &x.fen) },
		`SELECT l.created_by, sum(l.amount_fen) FROM ledger_entries l
		WHERE l.user_id = ? AND l.at >= ? AND `+who+` AND l.kind IN (`+spendKinds+`) GROUP BY l.created_by`, args...)
	if err != nil {
		return nil, fmt.Errorf("members' spend: %w", err)
	}
	out := map[int64]gpuportal.Fen{}
	for _, x := range posted {
		out[x.member] += x.fen
	}
	type live struct {
		member int64
		run    runningCost
	}
	who, args = "created_by IS NOT NULL", []any{account}
	if member != 0 {
		who, args = "created_by = ?", append(args, member)
	}
	runs, err := scanAll(ctx, q, func(r *sql.Rows, x *live) error {
		return r.Scan(&x.member, &x.run.kind, &x.run.count, &x.run.price, &x.run.started)
	}, `SELECT created_by, kind, count, price_fen, started_at FROM instances
		WHERE user_id = ? AND `+who+` AND status IN ('running', 'interrupting') AND kind IN ('spot', 'on_demand')`, args...)
	if err != nil {
		return nil, fmt.Errorf("members' runs: %w", err)
	}
	now := db.now()
	for _, x := range runs {
		held, _ := x.run.accrued(now)
		out[x.member] += held
	}
	return out, nil
}

// memberGPUs is the GPUs each member of a team's account (or member
// alone, when not 0) runs or waits to run now.
func (db *DB) memberGPUs(ctx context.Context, q queryer, account, member int64) (map[int64]int, error) {
	type row struct {
		member int64
		gpus   int
	}
	who, args := "created_by IS NOT NULL", []any{account}
	if member != 0 {
		who, args = "created_by = ?", append(args, member)
	}
	rows, err := scanAll(ctx, q, func(r *sql.Rows, x *row) error { return r.Scan(&x.member, &x.gpus) },
		`SELECT created_by, sum(count) FROM instances WHERE user_id = ? AND `+who+` AND status IN ('pending', 'running', 'interrupting')
		AND kind <> 'reserved' GROUP BY created_by`, args...)
	if err != nil {
		return nil, fmt.Errorf("members' GPUs: %w", err)
	}
	out := map[int64]int{}
	for _, x := range rows {
		out[x.member] = x.gpus
	}
	return out, nil
}

// checkMemberLimits holds a member acting for a team to their limits, in
// the transaction that charges the team: gpus more running GPUs and spend
// more money this month (an hour of the run).
func (db *DB) checkMemberLimits(ctx context.Context, tx *sql.Tx, user *gpuportal.User, gpus int, spend gpuportal.Fen) error {
	if err := db.checkMemberGPUs(ctx, tx, user, gpus); err != nil {
		return err
	}
	return db.checkMemberSpend(ctx, tx, user, spend)
}

// checkMemberGPUs: the member's running-GPU limit, gpus more.
func (db *DB) checkMemberGPUs(ctx context.Context, tx *sql.Tx, user *gpuportal.User, gpus int) error {
	a := user.Acting
	if a == nil || a.MaxRunningGPUs == nil || gpus <= 0 {
		return nil
	}
	running, err := db.memberGPUs(ctx, tx, user.ID, a.Member.ID)
	if err != nil {
		return err
	}
	if now := running[a.Member.ID]; now+gpus > *a.MaxRunningGPUs {
		return gpuportal.FieldErrorf(gpuportal.EPOLICY, "max_running_gpus", "Your team lets you run at most %d GPUs at once; you run %d and asked for %d more.", *a.MaxRunningGPUs, now, gpus)
	}
	return nil
}

// checkMemberSpend: the member's monthly spend limit, with spend more
// (what the transaction charged already for what they made counts).
func (db *DB) checkMemberSpend(ctx context.Context, tx *sql.Tx, user *gpuportal.User, spend gpuportal.Fen) error {
	a := user.Acting
	if a == nil || a.MonthlySpendLimit == nil {
		return nil
	}
	spent, err := db.memberSpend(ctx, tx, user.ID, a.Member.ID, db.monthStart(db.now()))
	if err != nil {
		return err
	}
	if got := spent[a.Member.ID]; got+spend > *a.MonthlySpendLimit {
		return gpuportal.FieldErrorf(gpuportal.EFUNDS, "monthly_spend_limit_fen", "Your team's limit for you is %s a month; with this you would spend %s this month.",
			a.MonthlySpendLimit.String(), (got + spend).String())
	}
	return nil
}

// UpdateMember changes a member's role or limits (owner and admin; only
// an owner names or unnames owners, and the last owner stays one).
func (db *DB) UpdateMember(ctx context.Context, user *gpuportal.User, id, memberID int64, u gpuportal.MemberUpdate) (*gpuportal.TeamMemberInfo, error) {
	if err := gpuportal.ValidateMemberUpdate(u); err != nil {
		return nil, err
	}
	err := db.inTx(ctx, "update member", func(tx *sql.Tx) error {
		t, err := db.teamAllows(ctx, tx, user, id, gpuportal.AreaMembers, true)
		if err != nil {
			return err
		}
		var role string
		if err := tx.QueryRowContext(ctx, `SELECT role FROM team_members WHERE team_id = ? AND user_id = ?`, id, memberID).Scan(&role); errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "No such member.")
		} else if err != nil {
			return err
		}
		if u.Role != nil && *u.Role != role {
			if (role == gpuportal.TeamOwner || *u.Role == gpuportal.TeamOwner) && t.Role != gpuportal.TeamOwner {
				return gpuportal.FieldErrorf(gpuportal.EFORBIDDEN, "role", "Only an owner makes or unmakes owners.")
			}
			if role == gpuportal.TeamOwner {
				if err := lastOwner(ctx, tx, id); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE team_members SET role = ? WHERE team_id = ? AND user_id = ?`, *u.Role, id, memberID); err != nil {
				return err
			}
			if err := db.teamAudit(ctx, tx, id, user.ID, "team.role", memberSubject(id, memberID), role, *u.Role); err != nil {
				return err
			}
		}
		if u.SetMonthlySpendLimit {
			if _, err := tx.ExecContext(ctx, `UPDATE team_members SET monthly_spend_limit_fen = ? WHERE team_id = ? AND user_id = ?`, nullFen(u.MonthlySpendLimit), id, memberID); err != nil {
				return err
			}
			if err := db.teamAudit(ctx, tx, id, user.ID, "team.limit", memberSubject(id, memberID), nil, map[string]any{"monthly_spend_limit_fen": u.MonthlySpendLimit}); err != nil {
				return err
			}
		}
		if u.SetMaxRunningGPUs {
			if _, err := tx.ExecContext(ctx, `UPDATE team_members SET max_running_gpus = ? WHERE team_id = ? AND user_id = ?`, intOrNull(u.MaxRunningGPUs), id, memberID); err != nil {
				return err
			}
			if err := db.teamAudit(ctx, tx, id, user.ID, "team.limit", memberSubject(id, memberID), nil, map[string]any{"max_running_gpus": u.MaxRunningGPUs}); err != nil {
				return err
			}
		}
		if u.SetReservedGPUs {
			if err := db.setShare(ctx, tx, t, memberID, u.ReservedRunningGPUs); err != nil {
				return err
			}
			if err := db.teamAudit(ctx, tx, id, user.ID, "team.limit", memberSubject(id, memberID), nil, map[string]any{"reserved_running_gpus": u.ReservedRunningGPUs}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	list, err := db.Members(ctx, user, id)
	if err != nil {
		return nil, err
	}
	for _, m := range list {
		if m.UserID == memberID {
			return &m, nil
		}
	}
	return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "No such member.")
}

func memberSubject(team, user int64) string {
	return fmt.Sprintf("team/%d/member/%d", team, user)
}

func nullInt(n sql.NullInt64) *int {
	if !n.Valid {
		return nil
	}
	v := int(n.Int64)
	return &v
}

func intOrNull(n *int) sql.NullInt64 {
	if n == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(*n), Valid: true}
}

func nullFen(f *gpuportal.Fen) sql.NullInt64 {
	if f == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(*f), Valid: true}
}

// lastOwner refuses to take away a team's only owner.
func lastOwner(ctx context.Context, tx *sql.Tx, id int64) error {
	var owners int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM team_members WHERE team_id = ? AND role = 'owner'`, id).Scan(&owners); err != nil {
		return err
	}
	if owners <= 1 {
		return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "role", "A team keeps at least one owner: make another member owner first.")
	}
	return nil
}

// RemoveMember takes a member out of a team (owner and admin), or lets
// one leave (memberID the user's own). Their access ends at once; what
// they made stays the team's.
func (db *DB) RemoveMember(ctx context.Context, user *gpuportal.User, id, memberID int64) error {
	return db.inTx(ctx, "remove member", func(tx *sql.Tx) error {
		t, err := db.teamOf(ctx, tx, user, id)
		if err != nil {
			return err
		}
		if memberID != user.ID && !gpuportal.TeamMay(t.Role, gpuportal.AreaMembers, true) {
			return teamForbidden(t.Role, gpuportal.AreaMembers, true)
		}
		var role string
		if err := tx.QueryRowContext(ctx, `SELECT role FROM team_members WHERE team_id = ? AND user_id = ?`, id, memberID).Scan(&role); errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "No such member.")
		} else if err != nil {
			return err
		}
		if role == gpuportal.TeamOwner {
			if memberID != user.ID && t.Role != gpuportal.TeamOwner {
				return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only an owner removes an owner.")
			}
			if err := lastOwner(ctx, tx, id); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM team_members WHERE team_id = ? AND user_id = ?`, id, memberID); err != nil {
			return err
		}
		action := "team.remove"
		if memberID == user.ID {
			action = "team.leave"
		}
		return db.teamAudit(ctx, tx, id, user.ID, action, memberSubject(id, memberID), role, nil)
	})
}

// DeleteTeam closes a team (owner only): nothing of it may run, be booked
// or be stored; what is left on its balance goes to the owner's account,
// through both ledgers.
func (db *DB) DeleteTeam(ctx context.Context, user *gpuportal.User, id int64) error {
	return db.inTx(ctx, "delete team", func(tx *sql.Tx) error {
		t, err := db.teamOf(ctx, tx, user, id)
		if err != nil {
			return err
		}
		if t.Role != gpuportal.TeamOwner {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only an owner deletes the team.")
		}
		var live int
		if err := tx.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM instances WHERE user_id = ? AND (status IN ('pending', 'running', 'interrupting') OR (disk_kept <> 0 AND disk_released_at IS NULL))) +
			(SELECT count(*) FROM reservations WHERE user_id = ? AND status IN ('confirmed', 'active')) +
			(SELECT count(*) FROM volumes WHERE user_id = ? AND deleted_at IS NULL) +
			(SELECT count(*) FROM private_images WHERE user_id = ? AND deleted_at IS NULL AND status <> 'failed') +
			(SELECT count(*) FROM jobs WHERE user_id = ? AND status IN ('queued', 'running'))`, t.AccountID, t.AccountID, t.AccountID, t.AccountID, t.AccountID).Scan(&live); err != nil {
			return named("team resources", err)
		}
		if live > 0 {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "The team still has %d instances, disks, bookings, volumes, images or jobs: end or delete them first.", live)
		}
		if err := db.lockAccount(ctx, tx, t.AccountID); err != nil {
			return err
		}
		b, err := db.balanceIn(ctx, tx, t.AccountID, db.now())
		if err != nil {
			return err
		}
		if b.Balance < 0 {
			return gpuportal.Errorf(gpuportal.EFUNDS, "The team owes %s: top it up to zero first.", (-b.Balance).String())
		}
		if b.Balance > 0 {
			if err := db.moveBalance(ctx, tx, t.AccountID, user.ID, b.Balance, fmt.Sprintf("Team %q closed: its balance", t.Name)); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE teams SET deleted_at = ? WHERE id = ?`, unix(db.now()), id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM team_members WHERE team_id = ?`, id); err != nil {
			return err
		}
		return db.teamAudit(ctx, tx, id, user.ID, "team.delete", teamSubject(id), map[string]any{"name": t.Name, "balance_fen": b.Balance}, nil)
	})
}

// TeamAudit is a team's audit trail, newest first (owner and admin).
func (db *DB) TeamAudit(ctx context.Context, user *gpuportal.User, id int64, limit int) ([]AuditEntry, error) {
	if _, err := db.teamAllows(ctx, db.read, user, id, gpuportal.AreaMembers, true); err != nil {
		return nil, err
	}
	return db.Audit(ctx, AuditFilter{TeamID: id, Limit: limit})
}

// AuditTeamChange records a change a member made to a team's resources
// (the route and what it named), for the team's audit trail.
func (db *DB) AuditTeamChange(ctx context.Context, user *gpuportal.User, action, subject string) error {
	if user == nil || user.Acting == nil {
		return nil
	}
	return db.inTx(ctx, "audit team change", func(tx *sql.Tx) error {
		return db.teamAudit(ctx, tx, user.Acting.TeamID, user.Acting.Member.ID, action, subject, nil, nil)
	})
}

// moveBalance moves amount from one account to another (a closed team's
// balance to its owner), a line in each ledger.
func (db *DB) moveBalance(ctx context.Context, tx *sql.Tx, from, to int64, amount gpuportal.Fen, desc string) error {
	now := db.now()
	if err := db.postLedger(ctx, tx, ledgerPost{userID: from, at: now, kind: gpuportal.LedgerTransfer, amount: amount, desc: desc}); err != nil {
		return err
	}
	return db.postLedger(ctx, tx, ledgerPost{userID: to, at: now, kind: gpuportal.LedgerTransfer, amount: -amount, desc: desc})
}

// mayEnter says whether user may open a session into (and so act inside)
// an instance owned by owner: their own, or a team's they may change
// (TeamMayChangeInstance) — acting for the team, or as themselves (the
// SSH gateway knows the person by their key).
func mayEnter(ctx context.Context, q queryer, user *gpuportal.User, instanceID, owner int64, createdBy *int64) error {
	notFound := gpuportal.Errorf(gpuportal.ENOTFOUND, "Instance %d not found.", instanceID)
	if user == nil {
		return notFound
	}
	if owner == user.ID {
		if a := user.Acting; a != nil && !gpuportal.TeamMayChangeInstance(a.Role, a.Member.ID, createdBy) {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Instance %d was made by another member: only they, and the team's admins, enter or stop it.", instanceID)
		}
		return nil
	}
	if user.Acting != nil {
		return notFound
	}
	var role string
	err := q.QueryRowContext(ctx, `SELECT m.role FROM team_members m JOIN teams t ON t.id = m.team_id WHERE t.account_id = ? AND m.user_id = ? AND t.deleted_at IS NULL`, owner, user.ID).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !gpuportal.TeamMayChangeInstance(role, user.ID, createdBy)) {
		return notFound
	}
	return err
}

// mayChangeInstance: a member acting for a team changes (stops, starts,
// saves, releases) only the instances they made; owners and admins any.
func mayChangeInstance(user *gpuportal.User, i *gpuportal.Instance) error {
	if a := user.Acting; a != nil && i.UserID == user.ID && !gpuportal.TeamMayChangeInstance(a.Role, a.Member.ID, i.CreatedBy) {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Instance %d was made by another member: only they, and the team's admins, enter or stop it.", i.ID)
	}
	return nil
}
