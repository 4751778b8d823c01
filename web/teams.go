package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// Acting for a team (issue 47): a request names the team — the X-Team
// header on the API, the header's switcher (kept in the session) in the
// browser — and its routes about resources and money then act as the
// team's account, with the member and their role beside it. The routes
// of one's own (settings, keys, tokens, notifications, teams themselves)
// stay the person's. What each role may do is gpuportal.TeamMay, checked
// here once for every route.

const teamHeader = "X-Team"

// teamAreaOf says what a path touches when acting for a team ("" for
// the person's own routes).
func teamAreaOf(path string) gpuportal.TeamArea {
	p := strings.TrimPrefix(path, "/api/v1")
	for _, prefix := range []string{"/instances", "/reservations", "/jobs", "/volumes", "/images", "/waitlist", "/calendar", "/quote", "/offerings", "/ssh"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") || strings.HasPrefix(p, prefix+"?") {
			return gpuportal.AreaResources
		}
	}
	if p == "/webhooks" || strings.HasPrefix(p, "/webhooks/") {
		return gpuportal.AreaWebhooks
	}
	for _, prefix := range []string{"/balance", "/ledger", "/ledger.csv", "/spend", "/topups", "/me/budget", "/pay", "/refund-requests"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return gpuportal.AreaMoney
		}
	}
	return ""
}

// actForTeam is the middleware: the request acts for the team it names
// where the route is a team's, and only as the member's role allows; a
// change it makes lands in the team's audit trail.
func (s *Server) actForTeam(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := reqOf(c)
		if r.user == nil {
			return next(c)
		}
		teamID, named, err := s.teamOfRequest(c)
		if err != nil {
			return err
		}
		area := teamAreaOf(c.Request().URL.Path)
		change := c.Request().Method != http.MethodGet && c.Request().Method != http.MethodHead
		if lim := r.user.Token; lim != nil {
			if lim.ReadOnly && change {
				return gpuportal.Errorf(gpuportal.EFORBIDDEN, "This API token only reads; make a write token to change anything.")
			}
			if lim.TeamID != 0 {
				if teamID != 0 && teamID != lim.TeamID {
					return gpuportal.FieldErrorf(gpuportal.EFORBIDDEN, teamHeader, "This API token acts for team %d only.", lim.TeamID)
				}
				if area == "" && !(c.Request().Method == http.MethodGet && c.Request().URL.Path == "/api/v1/me") {
					return gpuportal.Errorf(gpuportal.EFORBIDDEN, "This API token acts for team %d only.", lim.TeamID)
				}
				teamID, named = lim.TeamID, true
			}
		}
		if teamID == 0 || area == "" {
			if teamID != 0 && !isAPI(c) {
				// The switcher and the header's balance still show it.
				r.team, _ = s.db.ActAs(c.Request().Context(), r.user, teamID)
			}
			return next(c)
		}
		acct, err := s.db.ActAs(c.Request().Context(), r.user, teamID)
		if err != nil {
			if !named && gpuportal.ErrorCode(err) == gpuportal.ENOTFOUND {
				// The team the browser was switched to is gone (left,
				// removed): back to one's own account.
				delete(r.session.Values, "team")
				r.dirty = true
				return next(c)
			}
			return err
		}
		if !gpuportal.TeamMay(acct.Acting.Role, area, change) {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Your role in this team (%s) may not do this; it takes the role %s or above.", acct.Acting.Role, gpuportal.TeamRoleFor(area, change))
		}
		r.member, r.user, r.team = r.user, acct, acct
		err = next(c)
		if change && err == nil && c.Response().Status < 400 {
			subject := strings.TrimPrefix(c.Request().URL.Path, "/api/v1")
			if aerr := s.db.AuditTeamChange(c.Request().Context(), acct, "team.change", c.Request().Method+" "+subject); aerr != nil {
				s.log.Error("team audit", "team", teamID, "err", aerr)
			}
		}
		return err
	}
}

// teamOfRequest is the team a request acts for (0: none) and whether it
// named it itself (the header) rather than the session remembering it.
func (s *Server) teamOfRequest(c echo.Context) (int64, bool, error) {
	if h := strings.TrimSpace(c.Request().Header.Get(teamHeader)); h != "" {
		id, err := strconv.ParseInt(h, 10, 64)
		if err != nil || id <= 0 {
			return 0, true, gpuportal.FieldErrorf(gpuportal.EINVALID, teamHeader, "X-Team is a team's id (a number).")
		}
		return id, true, nil
	}
	if r := reqOf(c); r.session != nil && !isAPI(c) {
		if id, ok := r.session.Values["team"].(int64); ok && id > 0 {
			return id, false, nil
		}
	}
	return 0, false, nil
}

// person is who is asking: the member when acting for a team.
func person(c echo.Context) *gpuportal.User {
	if r := reqOf(c); r.member != nil {
		return r.member
	}
	return currentUser(c)
}

// --- JSON API ---

func (s *Server) apiCreateTeam(c echo.Context) error {
	var in struct {
		Name string `json:"name"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	t, err := s.db.CreateTeam(c.Request().Context(), person(c), in.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

func (s *Server) apiTeams(c echo.Context) error {
	list, err := s.db.Teams(c.Request().Context(), person(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiTeam(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	t, err := s.db.Team(c.Request().Context(), person(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

func (s *Server) apiInvite(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	inv, err := s.invite(c, id, in.Email, in.Role)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, inv)
}

// invite makes an invitation and its link (emailed by the store's outbox
// when email is set up).
func (s *Server) invite(c echo.Context, id int64, email, role string) (*gpuportal.TeamInvitation, error) {
	inv, token, err := s.db.Invite(c.Request().Context(), person(c), id, email, role)
	if err != nil {
		return nil, err
	}
	inv.URL = s.absoluteURL("/invitations/" + token)
	return inv, nil
}

func (s *Server) apiInvitations(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	list, err := s.db.Invitations(c.Request().Context(), person(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiAcceptInvitation(c echo.Context) error {
	inv, err := s.db.AcceptInvitation(c.Request().Context(), person(c), c.Param("token"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"team_id": inv.TeamID, "role": inv.Role})
}

func (s *Server) apiMembers(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	list, err := s.db.Members(c.Request().Context(), person(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

// memberJSON is PUT /teams/{id}/members/{user_id}: a field left out is
// left alone; a limit given as null is removed.
type memberJSON struct {
	Role              *string `json:"role"`
	MonthlySpendLimit *int64  `json:"monthly_spend_limit_fen"`
	MaxRunningGPUs    *int    `json:"max_running_gpus"`
	// ReservedRunningGPUs is the member's guaranteed share of the team's
	// running GPUs: past it they borrow what the team leaves idle.
	ReservedRunningGPUs *int `json:"reserved_running_gpus"`
}

func (s *Server) apiUpdateMember(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	memberID, err := strconv.ParseInt(c.Param("user_id"), 10, 64)
	if err != nil {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "No such member.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxJSONBody))
	if err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body could not be read.")
	}
	var in memberJSON
	if err := decodeStrict(bytes.NewReader(body), &in); err != nil {
		return err
	}
	var raw map[string]json.RawMessage // which limits it names, null or not
	_ = json.Unmarshal(body, &raw)
	u := gpuportal.MemberUpdate{Role: in.Role}
	if _, ok := raw["monthly_spend_limit_fen"]; ok {
		u.SetMonthlySpendLimit = true
		if in.MonthlySpendLimit != nil {
			f := gpuportal.Fen(*in.MonthlySpendLimit)
			u.MonthlySpendLimit = &f
		}
	}
	if _, ok := raw["max_running_gpus"]; ok {
		u.SetMaxRunningGPUs, u.MaxRunningGPUs = true, in.MaxRunningGPUs
	}
	if _, ok := raw["reserved_running_gpus"]; ok {
		u.SetReservedGPUs, u.ReservedRunningGPUs = true, in.ReservedRunningGPUs
	}
	m, err := s.db.UpdateMember(c.Request().Context(), person(c), id, memberID, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

func (s *Server) apiRemoveMember(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	memberID, err := strconv.ParseInt(c.Param("user_id"), 10, 64)
	if err != nil {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "No such member.")
	}
	if err := s.db.RemoveMember(c.Request().Context(), person(c), id, memberID); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiDeleteTeam(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.DeleteTeam(c.Request().Context(), person(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiTeamTokens(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	list, err := s.db.TeamTokens(c.Request().Context(), person(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiRevokeTeamToken(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	tokenID, err := strconv.ParseInt(c.Param("token_id"), 10, 64)
	if err != nil {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "Token %s not found.", c.Param("token_id"))
	}
	if err := s.db.RevokeTeamToken(c.Request().Context(), person(c), id, tokenID); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) handleRevokeTeamTokenForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	tokenID, _ := strconv.ParseInt(c.Param("token_id"), 10, 64)
	if err := s.db.RevokeTeamToken(c.Request().Context(), person(c), id, tokenID); err != nil {
		return s.teamFormError(c, id, err)
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The token is revoked."))
	return redirect(c, fmt.Sprintf("/teams/%d", id))
}

func (s *Server) apiTeamAudit(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	list, err := s.db.TeamAudit(c.Request().Context(), person(c), id, 200)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

// apiAdminCreditTeam is POST /admin/teams/{id}/credit: money into a
// team's balance (a bank transfer), audited as any credit.
func (s *Server) apiAdminCreditTeam(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var req gpuportal.CreditRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	account, err := s.db.TeamAccount(c.Request().Context(), id)
	if err != nil {
		return err
	}
	b, err := s.db.Credit(c.Request().Context(), currentUser(c), account, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

// --- pages ---

func (s *Server) handleTeamsPage(c echo.Context) error {
	return s.renderTeams(c, http.StatusOK, templates.TeamForm{})
}

func (s *Server) renderTeams(c echo.Context, status int, form templates.TeamForm) error {
	list, err := s.db.Teams(c.Request().Context(), person(c))
	if err != nil {
		return err
	}
	return s.render(c, status, templates.TeamsPage(list, form))
}

func (s *Server) handleCreateTeamForm(c echo.Context) error {
	name := c.FormValue("name")
	t, err := s.db.CreateTeam(c.Request().Context(), person(c), name)
	if err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
			return err
		}
		return s.renderTeams(c, statusOf[gpuportal.ErrorCode(err)], templates.TeamForm{Name: name, Error: i18n.Error(reqOf(c).lang, err)})
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Team %s is made; invite its members.", t.Name))
	return redirect(c, fmt.Sprintf("/teams/%d", t.ID))
}

func (s *Server) handleTeamPage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	return s.renderTeam(c, http.StatusOK, id, nil, "")
}

func (s *Server) renderTeam(c echo.Context, status int, id int64, invited *gpuportal.TeamInvitation, formError string) error {
	ctx := c.Request().Context()
	t, err := s.db.Team(ctx, person(c), id)
	if err != nil {
		return err
	}
	p := templates.TeamPage{Team: *t, Me: person(c).ID, Invited: invited, Error: formError}
	if p.Members, err = s.db.Members(ctx, person(c), id); err != nil {
		return err
	}
	if gpuportal.TeamMay(t.Role, gpuportal.AreaMembers, true) {
		if p.Invitations, err = s.db.Invitations(ctx, person(c), id); err != nil {
			return err
		}
		if p.Audit, err = s.db.TeamAudit(ctx, person(c), id, 50); err != nil {
			return err
		}
		if p.Tokens, err = s.db.TeamTokens(ctx, person(c), id); err != nil {
			return err
		}
	}
	return s.render(c, status, templates.TeamDetail(p))
}

// teamFormError shows a refusal on the team's page; anything else fails.
func (s *Server) teamFormError(c echo.Context, id int64, err error) error {
	code := gpuportal.ErrorCode(err)
	if code == gpuportal.EINTERNAL {
		return err
	}
	// A team the person is not in is not_found again from renderTeam.
	return s.renderTeam(c, statusOf[code], id, nil, i18n.Error(reqOf(c).lang, err))
}

func (s *Server) handleInviteForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	inv, err := s.invite(c, id, c.FormValue("email"), c.FormValue("role"))
	if err != nil {
		return s.teamFormError(c, id, err)
	}
	return s.renderTeam(c, http.StatusCreated, id, inv, "")
}

func (s *Server) handleMemberForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	memberID, _ := strconv.ParseInt(c.Param("user_id"), 10, 64)
	u := gpuportal.MemberUpdate{SetMonthlySpendLimit: true, SetMaxRunningGPUs: true, SetReservedGPUs: true}
	if role := c.FormValue("role"); role != "" {
		u.Role = &role
	}
	if v := strings.TrimSpace(c.FormValue("monthly_spend_limit")); v != "" {
		f, err := gpuportal.ParseYuan(v)
		if err != nil {
			return s.teamFormError(c, id, gpuportal.FieldErrorf(gpuportal.EINVALID, "monthly_spend_limit_fen", "The monthly limit is an amount in yuan, like 500 or 500.00."))
		}
		u.MonthlySpendLimit = &f
	}
	u.MaxRunningGPUs = formCount(c, "max_running_gpus")
	u.ReservedRunningGPUs = formCount(c, "reserved_running_gpus")
	if _, err := s.db.UpdateMember(c.Request().Context(), person(c), id, memberID, u); err != nil {
		return s.teamFormError(c, id, err)
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The member is changed."))
	return redirect(c, fmt.Sprintf("/teams/%d", id))
}

// formCount reads an optional count of GPUs from a form: nil when empty,
// -1 (refused by the rule with its field's message) when not a number.
func formCount(c echo.Context, field string) *int {
	v := strings.TrimSpace(c.FormValue(field))
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		n = -1
	}
	return &n
}

func (s *Server) handleRemoveMemberForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	memberID, _ := strconv.ParseInt(c.Param("user_id"), 10, 64)
	if err := s.db.RemoveMember(c.Request().Context(), person(c), id, memberID); err != nil {
		return s.teamFormError(c, id, err)
	}
	if memberID == person(c).ID {
		s.switchTeam(c, 0)
		s.addFlash(c, "info", i18n.T(reqOf(c).lang, "You left the team."))
		return redirect(c, "/teams")
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The member is removed."))
	return redirect(c, fmt.Sprintf("/teams/%d", id))
}

func (s *Server) handleDeleteTeamForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.DeleteTeam(c.Request().Context(), person(c), id); err != nil {
		return s.teamFormError(c, id, err)
	}
	s.switchTeam(c, 0)
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "The team is deleted."))
	return redirect(c, "/teams")
}

// handleSwitchTeam is the header's switcher: act for a team (its id) or
// for oneself (0) from now on in this browser.
func (s *Server) handleSwitchTeam(c echo.Context) error {
	id, _ := strconv.ParseInt(c.FormValue("team"), 10, 64)
	if id != 0 {
		if _, err := s.db.Team(c.Request().Context(), person(c), id); err != nil {
			return err
		}
	}
	s.switchTeam(c, id)
	return redirect(c, safeNext(c.FormValue("next"), "/instances"))
}

func (s *Server) switchTeam(c echo.Context, id int64) {
	r := reqOf(c)
	if r.session == nil {
		return
	}
	if id == 0 {
		delete(r.session.Values, "team")
	} else {
		r.session.Values["team"] = id
	}
	r.dirty = true
}

func (s *Server) handleInvitationPage(c echo.Context) error {
	inv, name, err := s.db.InvitationByToken(c.Request().Context(), c.Param("token"))
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.InvitationPage(*inv, name, c.Param("token"), s.cfg.Clock.Now()))
}

func (s *Server) handleAcceptInvitationForm(c echo.Context) error {
	inv, err := s.db.AcceptInvitation(c.Request().Context(), person(c), c.Param("token"))
	if err != nil {
		if code := gpuportal.ErrorCode(err); code == gpuportal.EGONE || code == gpuportal.EFORBIDDEN {
			s.addFlash(c, "error", i18n.Error(reqOf(c).lang, err))
			return redirect(c, "/invitations/"+c.Param("token"))
		}
		return err
	}
	s.switchTeam(c, inv.TeamID)
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "You joined the team as %s; you act for it now (the switcher in the header goes back to your own account).", i18n.T(reqOf(c).lang, inv.Role)))
	return redirect(c, fmt.Sprintf("/teams/%d", inv.TeamID))
}
