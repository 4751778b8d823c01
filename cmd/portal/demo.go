package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"gpuportal"
	"gpuportal/store"
)

// Demo logins, printed at start with --demo. They are well known on
// purpose: --demo is for trying the portal out, never for production.
var demoAccounts = []struct {
	role, email, password, name string
}{
	{gpuportal.RoleAdmin, "admin@gpuportal.demo", "demo-admin-pass", "Demo Admin"},
	{gpuportal.RoleCustomer, "alice@gpuportal.demo", "demo-alice-pass", "Alice Chen"},
	{gpuportal.RoleCustomer, "bob@gpuportal.demo", "demo-bob-pass", "Bob Li"},
}

// demoNodes is the demo region's fleet: 4 × DGX A100 and 2 × DGX H100 in
// cd-1, 8 GPUs each.
var demoNodes = []struct {
	prefix, model, name string
	count               int
}{
	{"dgx-a100", "a100-80g", "NVIDIA A100-SXM4-80GB", 4},
	{"dgx-h100", "h100-80g", "NVIDIA H100 80GB HBM3", 2},
}

// seedDemo makes sure the demo accounts and fleet exist, books a few
// upcoming reservations so the calendar has something on it, and prints
// the logins.
func seedDemo(ctx context.Context, db *store.DB, out io.Writer, url string) error {
	users := map[string]*gpuportal.User{}
	for _, a := range demoAccounts {
		var u *gpuportal.User
		var err error
		if a.role == gpuportal.RoleAdmin {
			u, err = db.EnsureAdmin(ctx, a.email, a.password, a.name)
		} else {
			u, err = db.CreateUser(ctx, gpuportal.SignUp{Email: a.email, Password: a.password, Name: a.name}, a.role, "")
			if gpuportal.ErrorCode(err) == gpuportal.ECONFLICT {
				u, err = db.UserByEmail(ctx, a.email)
			}
		}
		if err != nil {
			return err
		}
		users[a.email] = u
	}
	fresh, err := seedDemoFleet(ctx, db)
	if err != nil {
		return err
	}
	if fresh {
		if err := seedDemoBookings(ctx, db, users["bob@gpuportal.demo"]); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\ngpuportal demo at %s\n", url)
	for _, a := range demoAccounts {
		fmt.Fprintf(out, "  %-9s %-22s password: %s\n", a.role, a.email, a.password)
	}
	fmt.Fprintln(out)
	return nil
}

// seedDemoFleet adds the demo nodes unless the fleet has nodes already.
func seedDemoFleet(ctx context.Context, db *store.DB) (bool, error) {
	n, err := db.NodeCount(ctx)
	if err != nil || n > 0 {
		return false, err
	}
	for _, spec := range demoNodes {
		for i := 1; i <= spec.count; i++ {
			node := gpuportal.Node{ID: fmt.Sprintf("%s-%d", spec.prefix, i), Hostname: fmt.Sprintf("%s-%d.cd-1.demo", spec.prefix, i), Region: "cd-1", State: gpuportal.NodeOnline}
			for g := 0; g < 8; g++ {
				node.GPUs = append(node.GPUs, gpuportal.GPU{
					UUID: fmt.Sprintf("GPU-demo-%s-%d-%d", spec.prefix, i, g), Index: g, Model: spec.model, Name: spec.name,
					Healthy: true, MemoryTotalMiB: 81920,
				})
			}
			if err := db.AddNode(ctx, node); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// seedDemoBookings books some of the coming days for another customer.
func seedDemoBookings(ctx context.Context, db *store.DB, u *gpuportal.User) error {
	day := db.Clock.Now().In(db.Location)
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, db.Location)
	for _, b := range []struct {
		model             string
		count, days, hour int
		hours             int
	}{
		{"a100-80g", 16, 1, 9, 10}, {"a100-80g", 8, 2, 0, 24}, {"h100-80g", 8, 1, 20, 12},
		{"a100-80g", 24, 3, 10, 6}, {"h100-80g", 16, 4, 8, 8}, {"a100-80g", 32, 5, 12, 4},
	} {
		start := day.AddDate(0, 0, b.days).Add(time.Duration(b.hour) * time.Hour)
		req := gpuportal.BookingRequest{Model: b.model, Region: "cd-1", Count: b.count, Start: start, End: start.Add(time.Duration(b.hours) * time.Hour)}
		if _, err := db.Book(ctx, u, req); err != nil {
			return fmt.Errorf("demo booking: %w", err)
		}
	}
	return nil
}
