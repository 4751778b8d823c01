package web

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// Reservations come in two tabs, a page of 25 at a time; the
// notifications page pages too, links what each is about, and the
// navigation counts what is new until it has been seen.
func TestListsPageTabAndCountUnread(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 4, 8)
	u := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	ctx := context.Background()
	start := storetest.Epoch.Add(48 * time.Hour)
	for k := range 30 {
		s := start.Add(time.Duration(k) * 5 * time.Hour)
		if _, err := e.db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: s, End: s.Add(4 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.db.Cancel(ctx, u, 30); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	p := b.get("/reservations")
	if n := strings.Count(p.body, `data-testid="reservation-`); n != 25 || !strings.Contains(p.body, `data-testid="older"`) || strings.Contains(p.body, `data-testid="newer"`) {
		t.Fatalf("first page of upcoming: %d rows, pager %v", n, strings.Contains(p.body, `data-testid="older"`))
	}
	if !strings.Contains(p.body, `data-testid="reservation-1"`) { // soonest first
		t.Fatal("the first page of upcoming does not start with the soonest booking")
	}
	p = b.get("/reservations?page=2")
	if n := strings.Count(p.body, `data-testid="reservation-`); n != 4 || !strings.Contains(p.body, `data-testid="newer"`) {
		t.Fatalf("second page of upcoming: %d rows", n)
	}
	p = b.get("/reservations?tab=past")
	if n := strings.Count(p.body, `data-testid="reservation-`); n != 1 || !strings.Contains(p.body, `data-testid="reservation-30"`) {
		t.Fatalf("past tab: %d rows\n%s", n, p.body)
	}
	if p := b.get("/reservations?tab=someday"); p.status != 400 {
		t.Fatalf("an unknown tab = %d", p.status)
	}
	if p := b.get("/instances?tab=ended"); p.status != 200 || !strings.Contains(p.body, `aria-current="page"`) {
		t.Fatalf("instances, ended tab = %d", p.status)
	}
	// 31 notifications (30 bookings, 1 cancellation): all new at first.
	home := b.get("/")
	if !strings.Contains(home.body, `data-testid="unread-count"`) || !strings.Contains(home.body, ">31<") {
		t.Fatalf("unread count in the navigation:\n%s", home.body[:min(len(home.body), 3000)])
	}
	notes := b.get("/notifications")
	if n := strings.Count(notes.body, `data-testid="unread"`); n != 25 || !strings.Contains(notes.body, `data-testid="older"`) {
		t.Fatalf("first page of notifications: %d marked new", n)
	}
	if !strings.Contains(notes.body, fmt.Sprintf(`href="/reservations/%d"`, 30)) {
		t.Fatal("notifications do not link the reservation they are about")
	}
	// (issue 28) The link is the "Open" button, never a raw path as text.
	if regexp.MustCompile(`(?m)^\s*/reservations/\d+\s*</p>`).MatchString(notes.body) || strings.Contains(notes.body, "\n\n/reservations/") {
		t.Fatalf("a notification prints its link as text:\n%s", notes.body)
	}
	if home := b.get("/"); strings.Contains(home.body, `data-testid="unread-count"`) {
		t.Fatal("the unread count stays after the notifications were seen")
	}
}
