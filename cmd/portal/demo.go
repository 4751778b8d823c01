package main

import (
	"context"
	"fmt"
	"io"

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

// seedDemo makes sure the demo accounts exist and prints their logins.
func seedDemo(ctx context.Context, db *store.DB, out io.Writer, url string) error {
	for _, a := range demoAccounts {
		if a.role == gpuportal.RoleAdmin {
			if _, err := db.EnsureAdmin(ctx, a.email, a.password, a.name); err != nil {
				return err
			}
			continue
		}
		_, err := db.CreateUser(ctx, gpuportal.SignUp{Email: a.email, Password: a.password, Name: a.name}, a.role, "")
		if err != nil && gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
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
