package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// (issue 51, step 5) Every list starts from what its reader may see: a
// customer's lists hold their own rows alone, an admin's everybody's —
// the same for every kind (an admin saw every reservation but only their
// own jobs before), and paging counts the same rows it pages.
func TestEveryListStartsFromWhatItsReaderMaySee(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	boss := storetest.MustCreateUser(t, db, "boss@example.com", gpuportal.RoleAdmin)
	start := storetest.Epoch.Add(2 * time.Hour)
	var users []*gpuportal.User
	for k := range 2 {
		u := storetest.MustCreateUser(t, db, fmt.Sprintf("u%d@example.com", k), gpuportal.RoleCustomer)
		users = append(users, u)
		if _, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "x"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Book(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateJob(ctx, u, gpuportal.JobRequest{Name: "j", Model: "a100-80g", Region: "cd-1", GPUsPerTask: 1, Tasks: 1, MaxParallel: 1, Command: "x", Kind: gpuportal.JobSpot}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.JoinWaitlist(ctx, u, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 8, Start: start, End: start.Add(4 * time.Hour)}, false); err != nil {
			t.Fatal(err)
		}
	}
	lists := map[string]func(u *gpuportal.User, total *int) ([]int64, error){
		"instances": func(u *gpuportal.User, total *int) ([]int64, error) {
			l, err := db.InstanceList(ctx, u, store.InstanceFilter{Total: total})
			return ownersOf(l, func(i gpuportal.Instance) int64 { return i.UserID }), err
		},
		"reservations": func(u *gpuportal.User, total *int) ([]int64, error) {
			l, err := db.Reservations(ctx, u, store.ReservationFilter{Total: total})
			return ownersOf(l, func(r gpuportal.Reservation) int64 { return r.UserID }), err
		},
		"jobs": func(u *gpuportal.User, total *int) ([]int64, error) {
			l, err := db.JobPage(ctx, u, store.Page{Limit: 100, Total: total})
			return ownersOf(l, func(j gpuportal.Job) int64 { return j.UserID }), err
		},
		"waitlist": func(u *gpuportal.User, total *int) ([]int64, error) {
			l, err := db.WaitlistPage(ctx, u, store.Page{Limit: 100, Total: total})
			return ownersOf(l, func(w gpuportal.WaitlistEntry) int64 { return w.UserID }), err
		},
	}
	for name, list := range lists {
		for _, reader := range append([]*gpuportal.User{boss}, users...) {
			var total int
			owners, err := list(reader, &total)
			if err != nil {
				t.Fatalf("%s of %s: %v", name, reader.Email, err)
			}
			want := 1
			if reader.IsAdmin() {
				want = len(users)
			}
			if len(owners) != want || total != want {
				t.Errorf("%s of %s: %d rows (total %d), want %d", name, reader.Email, len(owners), total, want)
			}
			for _, o := range owners {
				if !reader.IsAdmin() && o != reader.ID {
					t.Errorf("%s of %s holds user %d's row", name, reader.Email, o)
				}
			}
		}
	}
}

func ownersOf[T any](list []T, owner func(T) int64) []int64 {
	out := make([]int64, len(list))
	for k, v := range list {
		out[k] = owner(v)
	}
	return out
}
