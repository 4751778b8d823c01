package notify_test

import (
	"context"
	netmail "net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// textOf is the text/plain part of a mail.
func textOf(t *testing.T, data string) string {
	t.Helper()
	var text string
	msg, err := netmail.ReadMessage(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	walkParts(t, msg.Header, msg.Body, func(ct string, _ map[string]string, b []byte) {
		if ct == "text/plain" {
			text = string(b)
		}
	})
	return text
}

// (issue 22, item 8) A sign-up with somebody's address sends that address
// one thing — the verification link — and nothing else until it is
// followed; a phone gets alerts only after its code came back; and no
// account is sent more than store.MessagesPerHour email and SMS an hour.
func TestNothingGoesToUnverifiedContacts(t *testing.T) {
	w := newWorld(t, 8)
	ctx := context.Background()
	u, err := w.db.CreateUser(ctx, gpuportal.SignUp{Email: "frank@example.com", Password: storetest.Password, Name: "Frank", Phone: "+8613900139000"}, gpuportal.RoleCustomer, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Credit(ctx, nil, u.ID, gpuportal.CreditRequest{Amount: storetest.TestBalance, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Book(ctx, u, w.req(1)); err != nil {
		t.Fatal(err)
	}
	w.dispatch()
	mails := w.box.to("frank@example.com")
	if len(mails) != 1 || !strings.Contains(subjectOf(mails[0]), "Verify your email") {
		t.Fatalf("an unverified address got %d mails (want only the verification link)", len(mails))
	}
	if sms := w.sms.to("+8613900139000"); len(sms) != 0 {
		t.Fatalf("an unverified phone got SMS: %q", sms)
	}
	// The link verifies the address; a second use is gone.
	link := regexp.MustCompile(`/verify-email/(gpv_[A-Za-z0-9_-]+)`).FindStringSubmatch(textOf(t, mails[0].Data))
	if link == nil {
		t.Fatalf("no link in %s", mails[0].Data)
	}
	if got, err := w.db.VerifyEmail(ctx, link[1]); err != nil || !got.EmailVerified {
		t.Fatalf("verify: %+v %v", got, err)
	}
	if _, err := w.db.VerifyEmail(ctx, link[1]); gpuportal.ErrorCode(err) != gpuportal.EGONE {
		t.Fatalf("the link twice: %v", err)
	}
	if _, err := w.db.Book(ctx, u, w.req(1)); err != nil {
		t.Fatal(err)
	}
	w.dispatch()
	if mails := w.box.to("frank@example.com"); len(mails) != 2 || !strings.Contains(subjectOf(mails[1]), "Booking confirmed") {
		t.Fatalf("after verifying: %d mails", len(mails))
	}

	// The phone: a code by SMS; a wrong one is refused, the right one
	// verifies it, and alerts follow.
	if err := w.db.SendPhoneCode(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	w.dispatch()
	sms := w.sms.to("+8613900139000")
	if len(sms) != 1 {
		t.Fatalf("code SMS: %q", sms)
	}
	code := regexp.MustCompile(`\b(\d{6})\b`).FindStringSubmatch(sms[0])
	if code == nil {
		t.Fatalf("no code in %q", sms[0])
	}
	wrong := "000000"
	if code[1] == wrong {
		wrong = "111111"
	}
	if err := w.db.VerifyPhone(ctx, u.ID, wrong); gpuportal.ErrorField(err) != "code" {
		t.Fatalf("a wrong code: %v", err)
	}
	if err := w.db.VerifyPhone(ctx, u.ID, code[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Book(ctx, u, w.req(1)); err != nil {
		t.Fatal(err)
	}
	w.dispatch()
	if sms := w.sms.to("+8613900139000"); len(sms) != 2 || !strings.Contains(sms[1], "confirmed") {
		t.Fatalf("SMS after verifying: %q", sms)
	}

	// At most MessagesPerHour email and SMS an hour (verifications aside):
	// then in-app only.
	for day := range store.MessagesPerHour {
		start := winStart.AddDate(0, 0, 1+day)
		if _, err := w.db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for w.dispatch() > 0 {
	}
	sent := len(w.box.to("frank@example.com")) - 1 + len(w.sms.to("+8613900139000")) - 1 // less the link and the code
	if sent != store.MessagesPerHour {
		t.Fatalf("%d messages in an hour, want the limit %d", sent, store.MessagesPerHour)
	}
	if inApp, _ := w.db.InApp(ctx, u.ID, 100); len(inApp) < store.MessagesPerHour+3 {
		t.Fatalf("in-app has %d notifications; every one belongs there", len(inApp))
	}
}

// (issue 44, item 14) Whoever missed the first verification mail is not
// locked out: a password reset goes to an address never verified too (at
// most store.PasswordResetsPerHour an hour, so a sign-up with somebody's
// address cannot flood it), and following the link verifies the address.
func TestPasswordResetReachesAnUnverifiedAddress(t *testing.T) {
	w := newWorld(t, 8)
	ctx := context.Background()
	u, err := w.db.CreateUser(ctx, gpuportal.SignUp{Email: "grace@example.com", Password: storetest.Password, Name: "Grace"}, gpuportal.RoleCustomer, "")
	if err != nil {
		t.Fatal(err)
	}
	w.dispatch()
	if n := len(w.box.to("grace@example.com")); n != 1 {
		t.Fatalf("the sign-up sent %d mails, want the verification link", n)
	}
	for range store.PasswordResetsPerHour + 2 {
		if err := w.db.RequestPasswordReset(ctx, "grace@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	w.dispatch()
	mails := w.box.to("grace@example.com")
	if len(mails) != 1+store.PasswordResetsPerHour {
		t.Fatalf("%d mails after %d reset requests; want the sign-up's and %d resets", len(mails), store.PasswordResetsPerHour+2, store.PasswordResetsPerHour)
	}
	link := regexp.MustCompile(`/password-reset/(gpr_[A-Za-z0-9_-]+)`).FindStringSubmatch(textOf(t, mails[len(mails)-1].Data))
	if link == nil || !strings.Contains(subjectOf(mails[len(mails)-1]), "Reset your gpuportal password") {
		t.Fatalf("no reset link in %s", mails[len(mails)-1].Data)
	}
	if _, err := w.db.ResetPassword(ctx, link[1], "a-brand-new-password"); err != nil {
		t.Fatal(err)
	}
	if got, err := w.db.UserByID(ctx, u.ID); err != nil || !got.EmailVerified {
		t.Fatalf("after the reset link: %+v %v; want the address verified", got, err)
	}
}
