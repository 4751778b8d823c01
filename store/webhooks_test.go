package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// deliveredTypes is what a webhook has been given to send, oldest first.
func deliveredTypes(t *testing.T, db *store.DB, u *gpuportal.User, hook int64) []string {
	t.Helper()
	list, err := db.WebhookDeliveries(context.Background(), u, hook, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := len(list) - 1; k >= 0; k-- {
		out = append(out, list[k].Type)
	}
	return out
}

// (issue 48) A spot instance's life and a booking, as a webhook sees them:
// every event of its types written in the transaction of its cause, with
// the object as its GET answers at that moment (labels included); an
// account's webhooks hear nothing of another's; events no webhook wants
// write nothing.
func TestWebhookEventsFollowAnInstanceAndABooking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	other := storetest.MustCreateUser(t, db, "o@example.com", gpuportal.RoleCustomer)
	agent := fakeAgent{t, db}

	hook, err := db.CreateWebhook(ctx, u, "https://ci.example.com/hook", []string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hook.Secret) < 40 || hook.Failures != 0 {
		t.Fatalf("made %+v", hook)
	}
	if got, _ := db.Webhook(ctx, u, hook.ID); got.Secret != "" {
		t.Fatal("the secret is shown again")
	}
	narrow, err := db.CreateWebhook(ctx, u, "https://ci.example.com/notices", []string{gpuportal.EventInstanceNotice})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := db.CreateWebhook(ctx, other, "https://other.example.com/hook", []string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	// Refused: another's webhook, bad events, bad addresses.
	if _, err := db.Webhook(ctx, u, theirs.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("another's webhook = %v", err)
	}
	if err := db.DeleteWebhook(ctx, u, theirs.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("deleting another's webhook = %v", err)
	}
	for _, bad := range []struct {
		url    string
		events []string
		field  string
	}{
		{"ftp://x.example.com/", []string{"*"}, "url"},
		{"https://user:pw@x.example.com/", []string{"*"}, "url"},
		{"https://x.example.com/", nil, "events"},
		{"https://x.example.com/", []string{"instance.exploded"}, "events"},
	} {
		if _, err := db.CreateWebhook(ctx, u, bad.url, bad.events); gpuportal.ErrorCode(err) != gpuportal.EINVALID || gpuportal.ErrorField(err) != bad.field {
			t.Fatalf("webhook %q %v = %v, want 400 naming %s", bad.url, bad.events, err, bad.field)
		}
	}

	labels := gpuportal.Labels{"experiment": "lr-sweep", "run": "7"}
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 8, Command: "train", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindSpot, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x",
		Labels: gpuportal.Labels{"Bad Key": "v"}}); gpuportal.ErrorCode(err) != gpuportal.EINVALID || gpuportal.ErrorField(err) != "labels" {
		t.Fatalf("a bad label = %v", err)
	}
	tick(t, db, clock, clock.Now())
	agent.runAll()
	if got := deliveredTypes(t, db, u, hook.ID); !slices.Equal(got, []string{gpuportal.EventInstanceRunning}) {
		t.Fatalf("after it runs: %v", got)
	}
	// The event's data is the instance as GET shows it, running, labelled.
	d, err := db.ClaimDelivery(ctx, hook.ID, db.Wall.Now())
	if err != nil || d == nil {
		t.Fatalf("claim = %v, %v", d, err)
	}
	var data gpuportal.Instance
	if err := json.Unmarshal(d.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.ID != inst.ID || data.Status != gpuportal.InstanceRunning || data.Labels["experiment"] != "lr-sweep" || len(data.GPUs) != 8 || d.Secret == "" {
		t.Fatalf("the running event's data = %+v", data)
	}
	if err := db.FinishDelivery(ctx, d, store.DeliveryResult{StatusCode: 204}, db.Wall.Now()); err != nil {
		t.Fatal(err)
	}

	// A booking of every GPU: confirmed, the spot instance's rebalance
	// recommendation and notice, its end, the reservation's start.
	start := storetest.Epoch.Add(2 * time.Hour)
	res, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start, End: start.Add(4 * time.Hour),
		Labels: gpuportal.Labels{"experiment": "lr-sweep"}})
	if err != nil {
		t.Fatal(err)
	}
	for at := clock.Now().Truncate(time.Minute).Add(time.Minute); !at.After(start); at = at.Add(time.Minute) {
		if r := tick(t, db, clock, at); r.Interrupted > 0 {
			agent.exit(getInstance(t, db, inst.ID))
		}
	}
	want := []string{gpuportal.EventInstanceRunning, gpuportal.EventReservationConfirm, gpuportal.EventInstanceRebalance, gpuportal.EventInstanceNotice,
		gpuportal.EventInstanceInterrupted, gpuportal.EventReservationStarted}
	if got := deliveredTypes(t, db, u, hook.ID); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if got := deliveredTypes(t, db, u, narrow.ID); !slices.Equal(got, []string{gpuportal.EventInstanceNotice}) {
		t.Fatalf("the notices-only webhook got %v", got)
	}
	if got := deliveredTypes(t, db, other, theirs.ID); len(got) != 0 {
		t.Fatalf("another customer's webhook got %v", got)
	}

	// Labels find them again; a filter that matches nothing finds nothing.
	list, err := db.InstanceList(ctx, u, store.InstanceFilter{Labels: gpuportal.LabelFilter{{Key: "experiment", Value: "lr-sweep"}, {Key: "run", Value: "7"}}})
	if err != nil || len(list) != 1 || list[0].ID != inst.ID || list[0].Labels["run"] != "7" {
		t.Fatalf("by label = %+v, %v", list, err)
	}
	if list, _ := db.InstanceList(ctx, u, store.InstanceFilter{Labels: gpuportal.LabelFilter{{Key: "run", Value: "8"}}}); len(list) != 0 {
		t.Fatalf("run=8 found %d", len(list))
	}
	rs, err := db.Reservations(ctx, u, store.ReservationFilter{Labels: gpuportal.LabelFilter{{Key: "experiment", Value: "lr-sweep"}}})
	if err != nil || len(rs) != 1 || rs[0].ID != res.ID {
		t.Fatalf("reservations by label = %+v, %v", rs, err)
	}
	if rs, _ := db.Reservations(ctx, other, store.ReservationFilter{Labels: gpuportal.LabelFilter{{Key: "experiment", Value: "lr-sweep"}}}); len(rs) != 0 {
		t.Fatal("a label filter reached another customer's reservations")
	}

	// Deleting a webhook gives up what still waited for it.
	if err := db.DeleteWebhook(ctx, u, hook.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Webhook(ctx, u, hook.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("a deleted webhook = %v", err)
	}
	due, err := db.DueWebhooks(ctx, db.Wall.Now().Add(time.Hour), 100)
	if err != nil || slices.Contains(due, hook.ID) {
		t.Fatalf("a deleted webhook is still due: %v %v", due, err)
	}
}

// (issue 48) A job's tasks carry the job's labels; the job list filters by
// them.
func TestJobTasksInheritTheJobsLabels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	job, err := db.CreateJob(ctx, u, gpuportal.JobRequest{Name: "sweep", Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 2, Command: "run",
		MaxParallel: 2, Labels: gpuportal.Labels{"sweep": "s1"}})
	if err != nil {
		t.Fatal(err)
	}
	tick(t, db, clock, clock.Now())
	list, err := db.InstanceList(ctx, u, store.InstanceFilter{Labels: gpuportal.LabelFilter{{Key: "sweep", Value: "s1"}}})
	if err != nil || len(list) != 2 {
		t.Fatalf("the job's tasks by label = %d, %v", len(list), err)
	}
	jobs, err := db.JobList(ctx, u, store.Page{Limit: 10}, gpuportal.LabelFilter{{Key: "sweep", Value: "s1"}})
	if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID || jobs[0].Labels["sweep"] != "s1" {
		t.Fatalf("jobs by label = %+v, %v", jobs, err)
	}
	if jobs, _ := db.JobList(ctx, u, store.Page{Limit: 10}, gpuportal.LabelFilter{{Key: "sweep", Value: "s2"}}); len(jobs) != 0 {
		t.Fatal("sweep=s2 found a job")
	}
}
