package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// Password change (settings), reset by emailed one-time link, and reset
// links issued by an admin when the portal cannot send email. Each of
// them ends every session of the account.

// Reset requests count per address like sign-ups: each may send an email.
const (
	resetWindow        = time.Hour
	resetRequestsPerIP = 10
)

func resetRule(ip string) rule { return rule{"reset:" + ip, resetRequestsPerIP, resetWindow} }

// resetURL is the link a reset token opens, on the portal's public address
// (never built from a request's Host header, which a client chooses; with
// no public address configured it is a path on this site).
func (s *Server) resetURL(token string) string {
	return strings.TrimRight(s.cfg.PublicURL, "/") + "/password-reset/" + token
}

// --- change (signed in) ---

type passwordChange struct {
	Current  string `json:"current_password"`
	Password string `json:"password"`
	// RevokeAPITokens also ends every API token of the account.
	RevokeAPITokens bool `json:"revoke_api_tokens,omitempty"`
}

func (s *Server) changePassword(c echo.Context, in passwordChange) error {
	// The current password is a login's secret: guessing it is limited
	// like logging in.
	ip, email := c.RealIP(), currentUser(c).Email
	if err := s.limiter.checkLoginAllowed(ip, email); err != nil {
		return err
	}
	u, err := s.db.ChangePassword(c.Request().Context(), currentUser(c).ID, in.Current, in.Password, in.RevokeAPITokens)
	if gpuportal.ErrorField(err) == "current_password" {
		s.limiter.loginFailed(ip, email)
	}
	if err != nil {
		return err
	}
	// Every other session (other browsers, copied cookies) has ended;
	// this browser carries on in a fresh one.
	if reqOf(c).session != nil {
		s.logIn(c, u)
	}
	return nil
}

func (s *Server) handlePasswordForm(c echo.Context) error {
	in := passwordChange{Current: c.FormValue("current_password"), Password: c.FormValue("password"), RevokeAPITokens: c.FormValue("revoke_api_tokens") == "on"}
	if err := s.changePassword(c, in); err != nil {
		return s.settingsFormError(c, err, templates.SettingsPage{}, "pw_")
	}
	done := "Your password has been changed; every other session has been logged out."
	if in.RevokeAPITokens {
		done = "Your password has been changed; every other session has been logged out and your API tokens revoked."
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, done))
	return redirect(c, "/settings")
}

func (s *Server) apiChangePassword(c echo.Context) error {
	var in passwordChange
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if err := s.changePassword(c, in); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "changed"})
}

// --- request a reset link (anyone) ---

func (s *Server) requestReset(c echo.Context, email string) error {
	if wait, blocked := s.limiter.attempt(resetRule(c.RealIP())); blocked {
		return gpuportal.Errorf(gpuportal.ERATELIMITED, "Too many password reset requests from your address. Please try again in %d minutes.", minutesLeft(wait))
	}
	email = gpuportal.NormalizeEmail(email)
	if err := gpuportal.ValidateEmail(email); err != nil {
		return err
	}
	return s.db.RequestPasswordReset(c.Request().Context(), email)
}

func (s *Server) handleResetRequestPage(c echo.Context) error {
	return s.render(c, http.StatusOK, templates.ResetRequestPage(templates.AuthForm{}))
}

func (s *Server) handleResetRequestForm(c echo.Context) error {
	email := c.FormValue("email")
	if err := s.requestReset(c, email); err != nil {
		return s.renderFormError(c, err, func(f templates.AuthForm) templates.AuthForm { f.Email = email; return f }, templates.ResetRequestPage)
	}
	return s.render(c, http.StatusOK, templates.ResetRequestPage(templates.AuthForm{Email: email, Sent: true}))
}

type resetRequest struct {
	Email string `json:"email"`
}

// apiRequestReset answers the same whether or not the account exists.
func (s *Server) apiRequestReset(c echo.Context) error {
	var in resetRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if err := s.requestReset(c, in.Email); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "sent_if_the_account_exists"})
}

// --- use a reset link ---

func (s *Server) handleResetPage(c echo.Context) error {
	u, err := s.db.CheckPasswordReset(c.Request().Context(), c.Param("token"))
	if err != nil {
		return s.renderFormError(c, err, func(f templates.AuthForm) templates.AuthForm { f.Gone = true; return f }, templates.ResetPage)
	}
	return s.render(c, http.StatusOK, templates.ResetPage(templates.AuthForm{Email: u.Email, Token: c.Param("token")}))
}

func (s *Server) handleResetForm(c echo.Context) error {
	token := c.Param("token")
	u, err := s.db.ResetPassword(c.Request().Context(), token, c.FormValue("password"))
	if err != nil {
		return s.renderFormError(c, err, func(f templates.AuthForm) templates.AuthForm {
			f.Token, f.Gone = token, gpuportal.ErrorCode(err) == gpuportal.EGONE
			return f
		}, templates.ResetPage)
	}
	s.logIn(c, u)
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Your password has been changed; every other session has been logged out."))
	return redirect(c, "/")
}

type resetUse struct {
	Password string `json:"password"`
}

func (s *Server) apiReset(c echo.Context) error {
	var in resetUse
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if _, err := s.db.ResetPassword(c.Request().Context(), c.Param("token"), in.Password); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "changed"})
}

// --- admins issue links ---

type resetLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *Server) issueReset(c echo.Context, userID int64) (resetLink, error) {
	token, expires, err := s.db.IssuePasswordReset(c.Request().Context(), currentUser(c), userID)
	if err != nil {
		return resetLink{}, err
	}
	return resetLink{URL: s.resetURL(token), ExpiresAt: expires}, nil
}

func (s *Server) apiIssueReset(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	link, err := s.issueReset(c, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, link)
}

// handleIssueResetForm issues a link for the account with the email given
// on the admin page, and shows it there (never in a flash cookie).
func (s *Server) handleIssueResetForm(c echo.Context) error {
	email := c.FormValue("email")
	u, err := s.db.UserByEmail(c.Request().Context(), email)
	var link resetLink
	if err == nil {
		link, err = s.issueReset(c, u.ID)
	}
	if err != nil {
		if code := gpuportal.ErrorCode(err); code != gpuportal.EINTERNAL {
			return s.renderAdmin(c, statusOf[code], templates.FieldErrors{"reset_email": i18n.Error(reqOf(c).lang, err)}, nil)
		}
		return err
	}
	return s.renderAdmin(c, http.StatusCreated, nil, &templates.IssuedReset{Email: u.Email, URL: link.URL, ExpiresAt: link.ExpiresAt})
}
