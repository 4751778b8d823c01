package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// Every lifecycle's status is a typed string (gpuportal.InstanceStatus,
// ReservationStatus, JobStatus, ...); a page's badge must still carry it
// as its class (the stylesheet colours by it): templ leaves a class of a
// type it does not know out without a word.
func TestStatusBadgesCarryTheirStatusAsAClass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "h", "cd-1", "a100-80g", 1, 8)
	alice := storetest.MustCreateUser(t, e.db, "alice@example.com", gpuportal.RoleCustomer)
	inst, err := e.db.Launch(ctx, alice, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "train"})
	if err != nil {
		t.Fatal(err)
	}
	start := e.clock.Now().Truncate(time.Hour).Add(24 * time.Hour)
	r, err := e.db.Book(ctx, alice, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	job, err := e.db.CreateJob(ctx, alice, gpuportal.JobRequest{Name: "render", Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 2,
		Command: "render", MaxParallel: 1, Kind: gpuportal.JobSpot})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	for _, c := range []struct{ path, class string }{
		{"/instances", `class="badge pending"`},
		{fmt.Sprintf("/instances/%d", inst.ID), `class="badge pending"`},
		{"/reservations", `class="badge confirmed"`},
		{fmt.Sprintf("/reservations/%d", r.ID), `class="badge confirmed"`},
		{"/jobs", `class="badge job-queued"`},
		{fmt.Sprintf("/jobs/%d", job.ID), `class="badge job-queued"`},
		{"/", `class="badge pending"`},
	} {
		if p := b.get(c.path); p.status != 200 || !strings.Contains(p.body, c.class) {
			t.Errorf("%s (%d): no %s", c.path, p.status, c.class)
		}
	}
}
