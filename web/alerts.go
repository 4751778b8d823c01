package web

import (
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
)

// channelGaps says, per channel, why it does not reach the user, in
// English for T ("" where it does): the portal cannot send it, the
// address or phone is missing or not verified, or the user turned it off.
func (s *Server) channelGaps(u *gpuportal.User, prefs store.NotificationPrefs) (email, sms string) {
	switch {
	case !s.db.Channels[gpuportal.ChannelEmail]:
		email = "This portal sends no email yet (its operator has not set up an SMTP server)."
	case !u.EmailVerified:
		email = "Your email address is not confirmed yet (see Profile, above)."
	case !prefs.Email:
		email = "You turned email off."
	}
	switch {
	case !s.db.Channels[gpuportal.ChannelSMS]:
		sms = "This portal sends no SMS yet (its operator has not set up an SMS gateway)."
	case u.Phone == "":
		sms = "No phone number is set."
	case !u.PhoneVerified:
		sms = "Your phone number is not confirmed yet (see Profile, above)."
	case !prefs.SMS:
		sms = "You turned SMS off."
	}
	return email, sms
}

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
	email, sms := s.channelGaps(u, prefs)
	return reachByText(lang, email, sms)
}

func reachByText(lang, emailGap, smsGap string) string {
	switch {
	case emailGap == "" && smsGap == "":
		return i18n.T(lang, "by email and SMS")
	case emailGap == "":
		return i18n.T(lang, "by email")
	case smsGap == "":
		return i18n.T(lang, "by SMS")
	}
	return i18n.T(lang, "in the portal only (email and SMS do not reach you yet: see your settings)")
}
