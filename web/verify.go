package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// Contact verification: the email link, and the phone code typed on the
// settings page (or sent to the API). Until verified, nothing but these
// is sent to an address.

// handleVerifyEmail takes the link from the verification email.
func (s *Server) handleVerifyEmail(c echo.Context) error {
	u, err := s.db.VerifyEmail(c.Request().Context(), c.Param("token"))
	if err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Your email address %s is verified: notifications can reach it now.", u.Email))
	if currentUser(c) == nil {
		return redirect(c, "/login?next=/settings")
	}
	return redirect(c, "/settings#contact")
}

func (s *Server) handleResendVerificationForm(c echo.Context) error {
	if err := s.db.SendEmailVerification(c.Request().Context(), currentUser(c).ID); err != nil {
		return s.settingsFormError(c, err, templates.SettingsPage{}, "verify_")
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "We sent a new verification link to %s.", currentUser(c).Email))
	return redirect(c, "/settings#contact")
}

func (s *Server) handleSendPhoneCodeForm(c echo.Context) error {
	if err := s.db.SendPhoneCode(c.Request().Context(), currentUser(c).ID); err != nil {
		return s.settingsFormError(c, err, templates.SettingsPage{}, "phone_")
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "We sent a code to %s; type it below.", currentUser(c).Phone))
	return redirect(c, "/settings#contact")
}

func (s *Server) handleVerifyPhoneForm(c echo.Context) error {
	if err := s.db.VerifyPhone(c.Request().Context(), currentUser(c).ID, strings.TrimSpace(c.FormValue("code"))); err != nil {
		return s.settingsFormError(c, err, templates.SettingsPage{}, "phone_")
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Your phone number is verified: SMS alerts can reach it now."))
	return redirect(c, "/settings#contact")
}

func (s *Server) apiResendVerification(c echo.Context) error {
	if err := s.db.SendEmailVerification(c.Request().Context(), currentUser(c).ID); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "sent"})
}

func (s *Server) apiSendPhoneCode(c echo.Context) error {
	if err := s.db.SendPhoneCode(c.Request().Context(), currentUser(c).ID); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "sent"})
}

type phoneCode struct {
	Code string `json:"code"`
}

func (s *Server) apiVerifyPhone(c echo.Context) error {
	var in phoneCode
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if err := s.db.VerifyPhone(c.Request().Context(), currentUser(c).ID, strings.TrimSpace(in.Code)); err != nil {
		return err
	}
	u, err := s.db.UserByID(c.Request().Context(), currentUser(c).ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]*gpuportal.User{"user": u})
}
