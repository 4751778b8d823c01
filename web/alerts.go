package web

import (
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
)

// reachBy says, in the reader's language, how the signed-in user is told
// of what happens: by email and by SMS only where the portal can send
// them, the address or phone is verified and the user wants them;
// otherwise in the portal alone — never "we will tell you by email and
// SMS" to someone no email or SMS will reach.
func (s *Server) reachBy(c echo.Context) string {
	lang := reqOf(c).lang
	u := currentUser(c)
	if u == nil {
		return i18n.T(lang, "in the portal, and by email and SMS once you have set them up")
	}
	prefs, err := s.db.Prefs(c.Request().Context(), u.ID)
	if err != nil {
		return i18n.T(lang, "in the portal")
	}
	email := prefs.Email && u.EmailVerified && s.db.Channels[gpuportal.ChannelEmail]
	sms := prefs.SMS && u.PhoneVerified && u.Phone != "" && s.db.Channels[gpuportal.ChannelSMS]
	switch {
	case email && sms:
		return i18n.T(lang, "by email and SMS")
	case email:
		return i18n.T(lang, "by email")
	case sms:
		return i18n.T(lang, "by SMS")
	}
	return i18n.T(lang, "in the portal only (email and SMS do not reach you yet: see your settings)")
}
