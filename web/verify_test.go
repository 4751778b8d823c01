package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
)

// (issue 22, item 8) From the settings page: the email link verifies the
// address, a new phone number is unverified until its code is typed, and
// the API does the same.
func TestVerifyContactsFromSettings(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.db.Channels = map[string]bool{gpuportal.ChannelEmail: true, gpuportal.ChannelSMS: true}
	ctx := context.Background()
	b := e.browser()
	b.get("/signup")
	if p := b.post("/signup", url.Values{"email": {"new@example.com"}, "password": {"a-good-password"}, "name": {"New"}}); p.status != http.StatusSeeOther {
		t.Fatalf("signup = %d", p.status)
	}
	u, err := e.db.UserByEmail(ctx, "new@example.com")
	if err != nil || u.EmailVerified {
		t.Fatalf("a new account: %+v %v", u, err)
	}
	if p := b.get("/settings"); !strings.Contains(p.body, `data-testid="resend-verification"`) || !strings.Contains(p.body, "not verified yet") {
		t.Fatalf("settings of an unverified account:\n%s", p.body)
	}
	token, _, err := e.db.EmailVerificationLink(ctx, u.ID) // what the dispatcher puts in the email
	if err != nil {
		t.Fatal(err)
	}
	if p := b.get("/verify-email/" + token); p.status != http.StatusSeeOther || p.location != "/settings#contact" {
		t.Fatalf("verify link = %d → %s", p.status, p.location)
	}
	if p := b.get("/verify-email/" + token); p.status != http.StatusGone {
		t.Fatalf("the link twice = %d", p.status)
	}
	if p := b.get("/settings"); strings.Contains(p.body, `data-testid="resend-verification"`) {
		t.Fatal("the settings still offer a verification link after verifying")
	}

	// A phone number: unverified until its code comes back.
	b.post("/settings/profile", url.Values{"name": {"New"}, "phone": {"+8613800138000"}})
	if p := b.get("/settings"); !strings.Contains(p.body, `data-testid="verify-phone"`) {
		t.Fatalf("no code form for a new phone:\n%s", p.body)
	}
	if p := b.post("/settings/phone/code", nil); p.status != http.StatusSeeOther {
		t.Fatalf("send code = %d %s", p.status, p.body)
	}
	code, err := e.db.PhoneVerificationCode(ctx, u.ID) // what the dispatcher sends
	if err != nil {
		t.Fatal(err)
	}
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	if p := b.post("/settings/phone/verify", url.Values{"code": {wrong}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, "not the one we sent") {
		t.Fatalf("a wrong code = %d", p.status)
	}
	tok := e.tokenFor(u)
	if st, body := e.apiCall("POST", "/api/v1/me/phone/verify", tok, `{"code":"`+code+`"}`); st != 200 || !strings.Contains(body, `"phone_verified":true`) {
		t.Fatalf("verify by API = %d %s", st, body)
	}
	if st, body := e.apiCall("POST", "/api/v1/me/phone/code", tok, ""); st != http.StatusConflict {
		t.Fatalf("a code for a verified phone = %d %s", st, body)
	}
	if st, body := e.apiCall("POST", "/api/v1/me/verify-email", tok, ""); st != http.StatusConflict {
		t.Fatalf("a link for a verified email = %d %s", st, body)
	}
	// Changing the number unverifies it.
	b.post("/settings/profile", url.Values{"name": {"New"}, "phone": {"+8613800138001"}})
	if u, _ := e.db.UserByEmail(ctx, "new@example.com"); u.PhoneVerified {
		t.Fatal("a new number is verified without its code")
	}
}

// (issue 50, item 5) With no mail or SMS transport the settings page
// offers no "send again" that could only answer 409: it says why.
func TestNoSendAgainWithoutATransport(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.db.Channels = nil
	b := e.browser()
	b.get("/signup")
	if p := b.post("/signup", url.Values{"email": {"new@example.com"}, "password": {"a-good-password"}, "name": {"New"}, "phone": {"+8613800138000"}}); p.status != http.StatusSeeOther {
		t.Fatalf("signup = %d", p.status)
	}
	p := b.get("/settings").body
	if strings.Contains(p, `data-testid="resend-verification"`) || !strings.Contains(p, `data-testid="email-off"`) {
		t.Error("without email the page still offers to send the link again, or does not say why")
	}
	if strings.Contains(p, `data-testid="send-phone-code"`) {
		t.Error("without SMS the page still offers to send a code")
	}
}
