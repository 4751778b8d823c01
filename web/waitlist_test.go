package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

func TestWaitlistAPI(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	_, bob := e.apiToken("bob@example.com", gpuportal.RoleCustomer)
	_, body := e.apiCall("POST", "/api/v1/reservations", alice, bookBody("a100-80g", 8, at(1, 10), at(1, 14)))
	full := decodeReservation(t, body)
	// Bob's booking is refused; he joins the waitlist.
	if st, _ := e.apiCall("POST", "/api/v1/reservations", bob, bookBody("a100-80g", 2, at(1, 10), at(1, 14))); st != http.StatusConflict {
		t.Fatalf("full window = %d", st)
	}
	join := strings.Replace(bookBody("a100-80g", 2, at(1, 10), at(1, 14)), "}", `,"auto_book":false}`, 1)
	st, body := e.apiCall("POST", "/api/v1/waitlist", bob, join)
	if st != http.StatusCreated || !strings.Contains(body, `"position":1`) || !strings.Contains(body, `"status":"waiting"`) {
		t.Fatalf("join = %d %s", st, body)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	for _, bad := range []string{
		strings.Replace(join, `"count":2`, `"count":0`, 1),
		strings.Replace(join, `"auto_book":false`, `"auto_book":"yes"`, 1),
		bookBody("a100-80g", 2, at(1, 10), at(1, 12)),
	} {
		if st, body := e.apiCall("POST", "/api/v1/waitlist", bob, bad); st < 400 || st >= 500 {
			t.Errorf("bad join %s = %d %s", bad, st, body)
		}
	}
	// No offer yet: claiming is a conflict; another user cannot see it.
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/waitlist/%d/claim", id), bob, ""); st != http.StatusConflict {
		t.Fatalf("claim before an offer = %d", st)
	}
	if st, _ := e.apiCall("DELETE", fmt.Sprintf("/api/v1/waitlist/%d", id), alice, ""); st != http.StatusNotFound {
		t.Fatalf("alice deleting bob's entry = %d", st)
	}
	// Alice cancels; the scheduler offers Bob the GPUs; he claims them.
	e.apiCall("POST", fmt.Sprintf("/api/v1/reservations/%d/cancel", full.ID), alice, "")
	if _, err := e.db.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, body = e.apiCall("GET", "/api/v1/waitlist", bob, "")
	if !strings.Contains(body, `"status":"offered"`) || !strings.Contains(body, `"offer_expires_at":"2026-11-30T00:30:00Z"`) {
		t.Fatalf("after the cancellation: %s", body)
	}
	st, body = e.apiCall("POST", fmt.Sprintf("/api/v1/waitlist/%d/claim", id), bob, "")
	if st != http.StatusCreated || !strings.Contains(body, `"status":"confirmed"`) {
		t.Fatalf("claim = %d %s", st, body)
	}
	if st, _ := e.apiCall("POST", fmt.Sprintf("/api/v1/waitlist/%d/claim", id), bob, ""); st != http.StatusGone {
		t.Fatalf("second claim = %d; want 410", st)
	}
	// The in-app list has the offer and the confirmation.
	_, body = e.apiCall("GET", "/api/v1/notifications", bob, "")
	if !strings.Contains(body, `"kind":"waitlist_offer"`) || !strings.Contains(body, `"kind":"booking_confirmed"`) {
		t.Fatalf("bob's notifications: %s", body)
	}
}

func TestWaitlistPages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	e.apiCall("POST", "/api/v1/reservations", alice, bookBody("a100-80g", 8, at(1, 10), at(1, 14)))
	storetest.MustCreateUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	b := e.browser()
	b.login("bob@example.com", storetest.Password)
	// The full window's quote offers the waitlist.
	q := b.get("/calendar/quote?model=a100-80g&region=cd-1&count=2&start=2026-12-02T10:00&end=2026-12-02T14:00")
	if !strings.Contains(q.body, `data-testid="join-waitlist"`) {
		t.Fatalf("no waitlist offer in the quote panel:\n%s", q.body)
	}
	p := b.post("/waitlist", url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "count": {"2"}, "start": {at(1, 10)}, "end": {at(1, 14)}, "auto_book": {"true"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("join form = %d %s", p.status, p.body)
	}
	if w := b.get("/waitlist"); !strings.Contains(w.body, "number 1 on the waitlist") || !strings.Contains(w.body, "books automatically") {
		t.Fatalf("waitlist page:\n%s", w.body)
	}
	// (issue 28, honest alerts) No email or SMS is set up on this portal:
	// the panel and the flash say in-app only, never "by email and SMS".
	if !strings.Contains(q.body, "in the portal only") || strings.Contains(q.body, "by email and SMS") {
		t.Fatalf("the full window's panel promises what it cannot send:\n%s", q.body)
	}
	e.db.Channels = map[string]bool{gpuportal.ChannelEmail: true}
	if q := b.get("/calendar/quote?model=a100-80g&region=cd-1&count=2&start=2026-12-02T10:00&end=2026-12-02T14:00"); !strings.Contains(q.body, "you are told by email when it frees") {
		t.Fatalf("with email set up and verified:\n%s", q.body)
	}
	e.db.Channels = nil
	if p := b.post("/settings/notifications", url.Values{"email": {"on"}}); p.status != http.StatusSeeOther {
		t.Fatalf("prefs = %d", p.status)
	}
	u, _ := e.db.UserByEmail(t.Context(), "bob@example.com")
	if prefs, _ := e.db.Prefs(t.Context(), u.ID); !prefs.Email || prefs.SMS {
		t.Fatalf("prefs = %+v", prefs)
	}
	// The settings say the same, and why each channel does not reach him.
	if st := b.get("/settings"); !strings.Contains(st.body, "You are told in the portal only") ||
		!strings.Contains(st.body, "This portal sends no email yet") || !strings.Contains(st.body, "This portal sends no SMS yet") {
		t.Fatalf("settings without email or SMS:\n%s", st.body)
	}
	e.db.Channels = map[string]bool{gpuportal.ChannelEmail: true, gpuportal.ChannelSMS: true}
	if st := b.get("/settings"); !strings.Contains(st.body, "You are told by email.") || !strings.Contains(st.body, "No phone number is set.") ||
		strings.Contains(st.body, `data-testid="email-gap"`) {
		t.Fatalf("settings with both set up, no phone:\n%s", st.body)
	}
	if p := b.post("/lang", url.Values{"lang": {"zh-CN"}, "next": {"/settings"}}); p.status != http.StatusSeeOther {
		t.Fatalf("lang = %d", p.status)
	}
	if st := b.get("/settings"); !strings.Contains(st.body, "您的通知方式：通过邮件。") || !strings.Contains(st.body, "尚未设置手机号码。") {
		t.Fatalf("settings in Chinese:\n%s", st.body)
	}
	e.db.Channels = nil
	if p := b.post("/lang", url.Values{"lang": {"en"}, "next": {"/waitlist"}}); p.status != http.StatusSeeOther {
		t.Fatalf("lang = %d", p.status)
	}
	if p := b.post("/waitlist/1/leave", nil); p.status != http.StatusSeeOther {
		t.Fatalf("leave = %d", p.status)
	}
	if p := b.get("/admin/notifications"); p.status != http.StatusForbidden {
		t.Fatalf("customer outbox = %d", p.status)
	}
}
