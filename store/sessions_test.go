package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// testKey is an ed25519 authorized_keys line (a fixed one: the store only
// compares fingerprints).
const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPhaMOMZFLGKgOY6CbNYZnfjepMNDy59nrE/uIAC1WeM test@example"

func fingerprintOf(t *testing.T, line string) string {
	t.Helper()
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(pub)
}

// (issue 23) Only the owner's key logs into a running instance (an
// admin's does not, nor a stopped instance); a session is asked of its
// node alone and claimed once; a user has at most 20 session groups open.
func TestSessionsBelongToTheOwnerAndItsNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	u := storetest.MustCreateUser(t, db, "u@example.com", gpuportal.RoleCustomer)
	admin := storetest.MustCreateUser(t, db, "admin@example.com", gpuportal.RoleAdmin)
	if _, err := db.AddSSHKey(ctx, u, "laptop", testKey); err != nil {
		t.Fatal(err)
	}
	inst, err := db.Launch(ctx, u, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	fp := fingerprintOf(t, testKey)
	if _, err := db.SessionUser(ctx, inst.ID, fp); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("a login while it is pending: %v", err)
	}
	tick(t, db, clock, clock.Now())
	(fakeAgent{t, db}).runAll()
	if who, err := db.SessionUser(ctx, inst.ID, fp); err != nil || who.ID != u.ID {
		t.Fatalf("the owner's key: %v %v", who, err)
	}
	if _, err := db.SessionUser(ctx, inst.ID, "SHA256:someone-else"); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("another key: %v", err)
	}
	if _, err := db.OpenSession(ctx, admin, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionShell, Group: "a"}, ""); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("an admin's session into a customer's container: %v", err)
	}
	if _, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionTCP, Port: 70000, Group: "a"}, ""); gpuportal.ErrorField(err) != "port" {
		t.Fatalf("a bad port: %v", err)
	}

	s, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionExec, Command: "nvidia-smi", Group: "g0"}, "http://portal-2:8080")
	if err != nil {
		t.Fatal(err)
	}
	i := getInstance(t, db, inst.ID)
	d, _ := db.DesiredFor(ctx, i.Node)
	if len(d.Sessions) != 1 || d.Sessions[0].ID != s.ID || d.Sessions[0].Command != "nvidia-smi" || d.Sessions[0].URL != "http://portal-2:8080" {
		t.Fatalf("the node is asked for %+v", d.Sessions)
	}
	other := "n-1"
	if i.Node == other {
		other = "n-0"
	}
	if d, _ := db.DesiredFor(ctx, other); len(d.Sessions) != 0 {
		t.Fatalf("another node is asked for %+v", d.Sessions)
	}
	if _, err := db.ClaimSession(ctx, other, s.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("another node claims the session: %v", err)
	}
	if got, err := db.ClaimSession(ctx, i.Node, s.ID); err != nil || got.Kind != gpuportal.SessionExec || got.InstanceID != inst.ID {
		t.Fatalf("claim: %+v %v", got, err)
	}
	if _, err := db.ClaimSession(ctx, i.Node, s.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Fatalf("a second claim: %v", err)
	}
	if open, _ := db.OpenSessions(ctx, inst.ID); len(open) != 1 {
		t.Fatalf("open sessions = %+v", open)
	}

	// 20 groups (g0 … g19); more streams of a group are fine, a 21st
	// group is not.
	for k := 1; k < gpuportal.MaxSessionsPerUser; k++ {
		if _, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionShell, Group: fmt.Sprintf("g%d", k)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionTCP, Port: 8888, Group: "g3"}, ""); err != nil {
		t.Fatalf("another stream of an open group: %v", err)
	}
	if _, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionShell, Group: "g20"}, ""); gpuportal.ErrorCode(err) != gpuportal.ERATELIMITED {
		t.Fatalf("a 21st session: %v", err)
	}
	// (issue 44, item 6) One connection holds at most
	// MaxStreamsPerConnection streams: 60 exec channels or 100 forwards
	// of one connection used to pass, each an agent stream and a row.
	for k := 2; k < gpuportal.MaxStreamsPerConnection; k++ { // g3 holds 2
		if _, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionTCP, Port: 8888, Group: "g3"}, ""); err != nil {
			t.Fatalf("stream %d of a connection: %v", k+1, err)
		}
	}
	if _, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionExec, Command: "true", Group: "g3"}, ""); gpuportal.ErrorCode(err) != gpuportal.ERATELIMITED {
		t.Fatalf("stream %d of one connection: %v", gpuportal.MaxStreamsPerConnection+1, err)
	}
	if err := db.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.OpenSession(ctx, u, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionShell, Group: "g20"}, ""); err != nil {
		t.Fatalf("once one closed: %v", err)
	}

	// (issue 45) Who entered which instance, when, is in the audit log:
	// once per connection (g0 … g19, then g20), not per stream of one.
	entries, err := db.Audit(ctx, store.AuditFilter{Action: "session.open", Subject: fmt.Sprintf("instance/%d", inst.ID), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != gpuportal.MaxSessionsPerUser+1 {
		t.Errorf("%d session.open entries, want %d", len(entries), gpuportal.MaxSessionsPerUser+1)
	}
	for _, e := range entries {
		if e.ActorID == nil || *e.ActorID != u.ID || !strings.Contains(string(e.NewValue), `"node":"`+i.Node+`"`) {
			t.Errorf("entry %+v", e)
			break
		}
	}

	// The instance ends: its sessions end with it, and none opens.
	if _, err := db.Stop(ctx, u, inst.ID); err != nil {
		t.Fatal(err)
	}
	(fakeAgent{t, db}).exit(getInstance(t, db, inst.ID))
	if got := getInstance(t, db, inst.ID); got.Status != gpuportal.InstanceStopped {
		t.Fatalf("status %s", got.Status)
	}
	if open, _ := db.OpenSessions(ctx, inst.ID); len(open) != 0 {
		t.Fatalf("sessions of an ended instance: %+v", open)
	}
	if _, err := db.SessionUser(ctx, inst.ID, fp); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("a login into a stopped instance: %v", err)
	}
	if _, err := db.CreateAppToken(ctx, u, inst.ID, 8888); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Fatalf("an app token for a stopped instance: %v", err)
	}
}
