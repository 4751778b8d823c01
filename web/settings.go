package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
	"gpuportal/web/templates"
)

func (s *Server) settingsPage(c echo.Context, p templates.SettingsPage) (templates.SettingsPage, error) {
	u := currentUser(c)
	tokens, err := s.db.APITokens(c.Request().Context(), u.ID)
	if err != nil {
		return p, err
	}
	p.Tokens = tokens
	if p.SSHKeys, err = s.db.SSHKeys(c.Request().Context(), u); err != nil {
		return p, err
	}
	prefs, err := s.db.Prefs(c.Request().Context(), u.ID)
	if err != nil {
		return p, err
	}
	p.NotifyEmail, p.NotifySMS = prefs.Email, prefs.SMS
	p.EmailOff, p.SMSOff = !s.db.Channels[gpuportal.ChannelEmail], !s.db.Channels[gpuportal.ChannelSMS]
	p.EmailGap, p.SMSGap = s.channelGaps(u, prefs)
	p.ReachBy = reachByText(reqOf(c).lang, p.EmailGap, p.SMSGap)
	if p.Name == "" {
		p.Name, p.Phone = u.Name, u.Phone
	}
	return p, nil
}

func (s *Server) handleSettings(c echo.Context) error {
	p, err := s.settingsPage(c, templates.SettingsPage{})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Settings(p))
}

func (s *Server) handleProfileForm(c echo.Context) error {
	in := store.ProfileUpdate{Name: c.FormValue("name"), Phone: c.FormValue("phone")}
	if _, err := s.db.UpdateProfile(c.Request().Context(), currentUser(c).ID, in); err != nil {
		return s.settingsFormError(c, err, templates.SettingsPage{Name: in.Name, Phone: in.Phone}, "")
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Your profile has been saved."))
	return redirect(c, "/settings")
}

func (s *Server) handleCreateTokenForm(c echo.Context) error {
	if err := s.tokenCreationAllowed(c); err != nil {
		return s.settingsFormError(c, err, templates.SettingsPage{}, "token_")
	}
	// A token outlives the session: it takes the password, as on the API.
	if _, err := s.checkLogin(c, currentUser(c).Email, c.FormValue("password")); err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EUNAUTHORIZED {
			err = gpuportal.FieldErrorf(gpuportal.EINVALID, "password", "The password is wrong.")
		}
		return s.settingsFormError(c, err, templates.SettingsPage{}, "token_")
	}
	t, secret, err := s.db.CreateAPIToken(c.Request().Context(), currentUser(c).ID, c.FormValue("name"))
	if err != nil {
		return s.settingsFormError(c, err, templates.SettingsPage{}, "token_")
	}
	// The secret is rendered directly (not via a redirect + flash) so it
	// never sits in a cookie.
	p, err := s.settingsPage(c, templates.SettingsPage{NewToken: secret, NewTokenName: t.Name})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusCreated, templates.Settings(p))
}

func (s *Server) handleRevokeTokenForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.RevokeAPIToken(c.Request().Context(), currentUser(c).ID, id); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The token has been revoked."))
	return redirect(c, "/settings#tokens")
}

func (s *Server) settingsFormError(c echo.Context, err error, p templates.SettingsPage, fieldPrefix string) error {
	code := gpuportal.ErrorCode(err)
	if code == gpuportal.EINTERNAL {
		return err
	}
	p, perr := s.settingsPage(c, p)
	if perr != nil {
		return perr
	}
	p.Errors = templates.FieldErrors{fieldPrefix + gpuportal.ErrorField(err): i18n.Error(reqOf(c).lang, err)}
	return s.render(c, statusOf[code], templates.Settings(p))
}
