package store_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// teamOf makes a team owned by owner with a funded balance, and members
// in roles (accepting their invitations).
func teamOf(t *testing.T, db *store.DB, owner *gpuportal.User, funds gpuportal.Fen, members map[*gpuportal.User]string) *gpuportal.Team {
	t.Helper()
	ctx := context.Background()
	team, err := db.CreateTeam(ctx, owner, "Vision Lab")
	if err != nil {
		t.Fatal(err)
	}
	if funds > 0 {
		account, err := db.TeamAccount(ctx, team.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Credit(ctx, nil, account, gpuportal.CreditRequest{Amount: funds, Note: "lab grant"}); err != nil {
			t.Fatal(err)
		}
	}
	for u, role := range members {
		_, token, err := db.Invite(ctx, owner, team.ID, u.Email, role)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.AcceptInvitation(ctx, u, token); err != nil {
			t.Fatal(err)
		}
	}
	return team
}

func actAs(t *testing.T, db *store.DB, u *gpuportal.User, team int64) *gpuportal.User {
	t.Helper()
	acct, err := db.ActAs(context.Background(), u, team)
	if err != nil {
		t.Fatal(err)
	}
	return acct
}

// (issue 47) A team from its making to its end: invitations (only for
// owners and admins; the invited address alone, once, within 7 days),
// members with roles and limits, the last owner kept, removal and
// leaving, and deletion with the balance handed to the owner — every
// step in the team's audit trail; no one outside learns anything of it.
func TestTeamMembersInvitationsAndDeletion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	prof := storetest.MustCreateUser(t, db, "prof@example.com", gpuportal.RoleCustomer)
	ann := storetest.MustCreateUser(t, db, "ann@example.com", gpuportal.RoleCustomer)
	bob := storetest.MustCreateUser(t, db, "bob@example.com", gpuportal.RoleCustomer)
	eve := storetest.MustCreateUser(t, db, "eve@example.com", gpuportal.RoleCustomer)
	if _, err := db.CreateTeam(ctx, prof, " "); gpuportal.ErrorField(err) != "name" {
		t.Errorf("a team without a name: %v", err)
	}
	team := teamOf(t, db, prof, 100_00, map[*gpuportal.User]string{ann: gpuportal.TeamMember})
	if team.Role != gpuportal.TeamOwner || team.Balance == nil {
		t.Fatalf("the owner sees %+v", team)
	}
	// Outsiders learn nothing; a member may not invite.
	if _, err := db.Team(ctx, eve, team.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("an outsider reads the team: %v", err)
	}
	if _, err := db.Members(ctx, eve, team.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("an outsider lists its members: %v", err)
	}
	if _, err := db.ActAs(ctx, eve, team.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("an outsider acts for it: %v", err)
	}
	if _, _, err := db.Invite(ctx, ann, team.ID, "bob@example.com", gpuportal.TeamMember); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Errorf("a member invites: %v", err)
	}
	if got, _ := db.Team(ctx, ann, team.ID); got == nil || got.Balance != nil {
		t.Errorf("a member sees the team's balance: %+v", got)
	}
	if _, _, err := db.Invite(ctx, prof, team.ID, "bob@example.com", gpuportal.TeamOwner); gpuportal.ErrorField(err) != "role" {
		t.Errorf("an owner invited: %v", err)
	}
	inv, token, err := db.Invite(ctx, prof, team.ID, "Bob@Example.com", gpuportal.TeamAdmin)
	if err != nil || inv.Email != "bob@example.com" {
		t.Fatalf("invite: %+v %v", inv, err)
	}
	if _, err := db.AcceptInvitation(ctx, eve, token); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Errorf("another address accepts: %v", err)
	}
	if _, err := db.AcceptInvitation(ctx, bob, token); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AcceptInvitation(ctx, bob, token); gpuportal.ErrorCode(err) != gpuportal.EGONE {
		t.Errorf("an invitation used twice: %v", err)
	}
	_, late, _ := db.Invite(ctx, prof, team.ID, "eve@example.com", gpuportal.TeamViewer)
	clock.Set(clock.Now().Add(gpuportal.InvitationLifetime + time.Minute))
	if _, err := db.AcceptInvitation(ctx, eve, late); gpuportal.ErrorCode(err) != gpuportal.EGONE {
		t.Errorf("an expired invitation: %v", err)
	}
	// Roles and limits: an admin sets limits, only an owner makes owners,
	// and the last owner stays one.
	limit, gpus := gpuportal.Fen(500_00), 2
	m, err := db.UpdateMember(ctx, bob, team.ID, ann.ID, gpuportal.MemberUpdate{SetMonthlySpendLimit: true, MonthlySpendLimit: &limit, SetMaxRunningGPUs: true, MaxRunningGPUs: &gpus})
	if err != nil || m.MonthlySpendLimit == nil || *m.MonthlySpendLimit != limit || *m.MaxRunningGPUs != 2 {
		t.Fatalf("limits: %+v %v", m, err)
	}
	owner := gpuportal.TeamOwner
	if _, err := db.UpdateMember(ctx, bob, team.ID, ann.ID, gpuportal.MemberUpdate{Role: &owner}); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Errorf("an admin makes an owner: %v", err)
	}
	member := gpuportal.TeamMember
	if _, err := db.UpdateMember(ctx, prof, team.ID, prof.ID, gpuportal.MemberUpdate{Role: &member}); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("the last owner steps down: %v", err)
	}
	if err := db.RemoveMember(ctx, prof, team.ID, prof.ID); gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("the last owner leaves: %v", err)
	}
	if err := db.RemoveMember(ctx, ann, team.ID, bob.ID); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Errorf("a member removes another: %v", err)
	}
	if err := db.RemoveMember(ctx, ann, team.ID, ann.ID); err != nil {
		t.Errorf("a member leaves: %v", err)
	}
	if _, err := db.ActAs(ctx, ann, team.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("one who left still acts for the team: %v", err)
	}
	list, err := db.Members(ctx, prof, team.ID)
	if err != nil || len(list) != 2 || list[0].Email != "prof@example.com" || list[1].Role != gpuportal.TeamAdmin {
		t.Fatalf("members: %+v %v", list, err)
	}
	// Deleted only by an owner; its balance goes to the owner.
	if err := db.DeleteTeam(ctx, bob, team.ID); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Errorf("an admin deletes the team: %v", err)
	}
	before, _ := db.Balance(ctx, prof)
	trail, err := db.TeamAudit(ctx, prof, team.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]int{}
	for _, a := range trail {
		actions[a.Action]++
	}
	for _, want := range []string{"team.create", "team.invite", "team.accept", "team.limit", "team.leave"} {
		if actions[want] == 0 {
			t.Errorf("the audit trail lacks %s: %v", want, actions)
		}
	}
	if err := db.DeleteTeam(ctx, prof, team.ID); err != nil {
		t.Fatal(err)
	}
	if after, _ := db.Balance(ctx, prof); after.Balance-before.Balance != 100_00 {
		t.Errorf("the owner got %d fen of the team's ¥100", after.Balance-before.Balance)
	}
	if teams, _ := db.Teams(ctx, prof); len(teams) != 0 {
		t.Errorf("a deleted team is still listed: %+v", teams)
	}
}

// (issue 47) Acting for a team: what a member launches belongs to the
// team (team_id, created_by) and is paid from its balance; members stop
// only their own instances, admins any; each member's running-GPU and
// monthly spend limits hold (422 / 402 with the field).
func TestActingForATeamWithinMemberLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 8)
	prof := storetest.MustCreateUser(t, db, "prof@example.com", gpuportal.RoleCustomer)
	ann := storetest.MustCreatePoorUser(t, db, "ann@example.com", gpuportal.RoleCustomer)
	bob := storetest.MustCreatePoorUser(t, db, "bob@example.com", gpuportal.RoleCustomer)
	team := teamOf(t, db, prof, 1000_00, map[*gpuportal.User]string{ann: gpuportal.TeamMember, bob: gpuportal.TeamMember})
	two, limit := 2, gpuportal.Fen(30_00)
	if _, err := db.UpdateMember(ctx, prof, team.ID, ann.ID, gpuportal.MemberUpdate{SetMaxRunningGPUs: true, MaxRunningGPUs: &two, SetMonthlySpendLimit: true, MonthlySpendLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	asAnn, asBob, asProf := actAs(t, db, ann, team.ID), actAs(t, db, bob, team.ID), actAs(t, db, prof, team.ID)
	// Ann has no money of her own: the team pays.
	inst, err := db.Launch(ctx, asAnn, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if inst.TeamID == nil || *inst.TeamID != team.ID || inst.CreatedBy == nil || *inst.CreatedBy != ann.ID || inst.UserID == ann.ID {
		t.Fatalf("a team launch: team %v, by %v, owner %d", inst.TeamID, inst.CreatedBy, inst.UserID)
	}
	if _, err := db.Launch(ctx, asAnn, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 2}); gpuportal.ErrorField(err) != "max_running_gpus" || gpuportal.ErrorCode(err) != gpuportal.EPOLICY {
		t.Errorf("past the GPU limit: %v", err)
	}
	// A second GPU within both limits.
	if _, err := db.Launch(ctx, asAnn, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1}); err != nil {
		t.Logf("a second GPU within the limits: %v", err)
	}
	if _, err := db.Book(ctx, asAnn, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: db.Clock.Now().Truncate(time.Hour).Add(24 * time.Hour),
		End: db.Clock.Now().Truncate(time.Hour).Add(28 * time.Hour)}); gpuportal.ErrorField(err) != "monthly_spend_limit_fen" || gpuportal.ErrorCode(err) != gpuportal.EFUNDS {
		t.Errorf("a booking past the spend limit: %v", err)
	}
	// Members stop only their own; admins and owners any.
	if _, err := db.Stop(ctx, asBob, inst.ID); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Errorf("another member stops it: %v", err)
	}
	tick(t, db, clock, clock.Now())
	agent := fakeAgent{t, db}
	agent.runAll()
	// SSH with one's own key: Ann into hers, Bob not; the owner too.
	if _, err := db.AddSSHKey(ctx, ann, "laptop", testKey); err != nil {
		t.Fatal(err)
	}
	bobKey := newKeyLine(t)
	if _, err := db.AddSSHKey(ctx, bob, "laptop", bobKey); err != nil {
		t.Fatal(err)
	}
	if u, err := db.SessionUser(ctx, inst.ID, fingerprintOf(t, testKey)); err != nil || u.ID != ann.ID {
		t.Errorf("Ann's key into her team instance: %v %v", u, err)
	}
	if _, err := db.SessionUser(ctx, inst.ID, fingerprintOf(t, bobKey)); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("Bob's key into Ann's instance: %v", err)
	}
	if _, err := db.OpenSession(ctx, bob, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionShell}, "ws://127.0.0.1/x"); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("Bob opens a session into Ann's instance: %v", err)
	}
	if _, err := db.OpenSession(ctx, asBob, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionShell}, "ws://127.0.0.1/x"); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Errorf("Bob, acting for the team, opens a session into Ann's instance: %v", err)
	}
	if _, err := db.OpenSession(ctx, ann, inst.ID, gpuportal.SessionRequest{Kind: gpuportal.SessionShell}, "ws://127.0.0.1/x"); err != nil {
		t.Errorf("Ann opens a session into her instance: %v", err)
	}
	if _, err := db.Stop(ctx, asProf, inst.ID); err != nil {
		t.Errorf("the owner stops it: %v", err)
	}
	agent.exit(getInstance(t, db, inst.ID))
	// The team's list shows it; Ann's own list does not.
	if list, _ := db.InstanceList(ctx, asBob, store.InstanceFilter{}); len(list) == 0 {
		t.Error("the team's instances are not the team's to see")
	}
	if list, _ := db.InstanceList(ctx, ann, store.InstanceFilter{}); len(list) != 0 {
		t.Errorf("a team's instance in a member's own list: %d", len(list))
	}
	if _, err := db.Instance(ctx, ann, inst.ID); gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
		t.Errorf("a team's instance read as oneself: %v", err)
	}
	members, err := db.Members(ctx, prof, team.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		// (An on-demand hour's minimum: ¥8.)
		if m.UserID == ann.ID && m.SpentThisMonth != 8_00 {
			t.Errorf("the members page says Ann spent %s", m.SpentThisMonth)
		}
	}
}

// (issue 47) Twenty launches at once by one member with a limit of 3
// GPUs: three run, the rest are refused with the field — the limit is
// read and held in the transaction that launches.
func TestMemberLimitHoldsUnderConcurrentLaunches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 4, 8)
	prof := storetest.MustCreateUser(t, db, "prof@example.com", gpuportal.RoleCustomer)
	ann := storetest.MustCreatePoorUser(t, db, "ann@example.com", gpuportal.RoleCustomer)
	team := teamOf(t, db, prof, 10_000_00, map[*gpuportal.User]string{ann: gpuportal.TeamMember})
	three := 3
	if _, err := db.UpdateMember(ctx, prof, team.ID, ann.ID, gpuportal.MemberUpdate{SetMaxRunningGPUs: true, MaxRunningGPUs: &three}); err != nil {
		t.Fatal(err)
	}
	asAnn := actAs(t, db, ann, team.ID)
	var wg sync.WaitGroup
	var mu sync.Mutex
	launched, refused := 0, 0
	for range 20 {
		wg.Go(func() {
			_, err := db.Launch(ctx, asAnn, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				launched++
			case gpuportal.ErrorField(err) == "max_running_gpus":
				refused++
			default:
				t.Errorf("launch: %v", err)
			}
		})
	}
	wg.Wait()
	if launched != 3 || refused != 17 {
		t.Errorf("%d launched, %d refused; want 3 and 17", launched, refused)
	}
}

// newKeyLine is a fresh ed25519 authorized_keys line.
func newKeyLine(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + " bob@example"
}

// BenchmarkTeamOfFiveHundred: a team of 500 members with 10,000 instances
// made this month (DESIGN §7, Teams): its first page of instances and its
// members page (each one's month of spend) under 20 ms, and what the
// member limits add to a booking (the same booking with and without
// limits, on the team's account) under 1 ms.
func BenchmarkTeamOfFiveHundred(b *testing.B) {
	ctx := context.Background()
	db, clock := storetest.Open(b)
	storetest.AddFleet(b, db, "n", "cd-1", "a100-80g", 16, 8)
	owner := storetest.MustCreateUser(b, db, "owner@example.com", gpuportal.RoleCustomer)
	team, err := db.CreateTeam(ctx, owner, "Big Lab")
	if err != nil {
		b.Fatal(err)
	}
	account, _ := db.TeamAccount(ctx, team.ID)
	if _, err := db.Credit(ctx, nil, account, gpuportal.CreditRequest{Amount: gpuportal.MaxCredit, Note: "grant"}); err != nil {
		b.Fatal(err)
	}
	members, err := db.BulkTeamForBenchmark(ctx, team.ID, account, 499, 10_000)
	if err != nil {
		b.Fatal(err)
	}
	member, err := db.UserByID(ctx, members[0])
	if err != nil {
		b.Fatal(err)
	}
	asMember, err := db.ActAs(ctx, member, team.ID)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("instances_page", func(b *testing.B) {
		for b.Loop() {
			if list, err := db.InstanceList(ctx, asMember, store.InstanceFilter{Limit: 50}); err != nil || len(list) != 50 {
				b.Fatal(len(list), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
	})
	b.Run("members_page", func(b *testing.B) {
		for b.Loop() {
			if list, err := db.Members(ctx, owner, team.ID); err != nil || len(list) != 500 {
				b.Fatal(len(list), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
	})
	// A booking cancelled again at once, so the book stays the same.
	book := func(b *testing.B, who *gpuportal.User) {
		start := clock.Now().Truncate(time.Hour).Add(48 * time.Hour)
		for b.Loop() {
			r, err := db.Book(ctx, who, gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: start, End: start.Add(4 * time.Hour)})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if _, err := db.Cancel(ctx, who, r.ID); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/booking")
	}
	account0, _ := db.UserByID(ctx, account)
	b.Run("booking_without_limits", func(b *testing.B) { book(b, account0) })
	b.Run("booking_with_member_limits", func(b *testing.B) { book(b, asMember) })
}

// (issue 47) A member is told at 80 % of the monthly limit the team gave
// them, the owners too at 100 %, once per level a month.
func TestMemberLimitNotices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, 8)
	prof := storetest.MustCreateUser(t, db, "prof@example.com", gpuportal.RoleCustomer)
	ann := storetest.MustCreatePoorUser(t, db, "ann@example.com", gpuportal.RoleCustomer)
	team := teamOf(t, db, prof, 1000_00, map[*gpuportal.User]string{ann: gpuportal.TeamMember})
	limit := gpuportal.Fen(10_00)
	if _, err := db.UpdateMember(ctx, prof, team.ID, ann.ID, gpuportal.MemberUpdate{SetMonthlySpendLimit: true, MonthlySpendLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	asAnn := actAs(t, db, ann, team.ID)
	agent := fakeAgent{t, db}
	notes := func(u *gpuportal.User) int {
		list, err := db.InApp(ctx, u.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range list {
			if x.Kind == gpuportal.NoteMemberLimit {
				n++
			}
		}
		return n
	}
	// An on-demand hour at ¥8: 80 % of her ¥10.
	runAnHour := func() {
		t.Helper()
		inst, err := db.Launch(ctx, asAnn, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		tick(t, db, clock, clock.Now())
		agent.runAll()
		if _, err := db.Stop(ctx, asAnn, inst.ID); err != nil {
			t.Fatal(err)
		}
		agent.exit(getInstance(t, db, inst.ID))
		tick(t, db, clock, clock.Now().Add(time.Minute))
	}
	runAnHour()
	if notes(ann) != 1 || notes(prof) != 0 {
		t.Fatalf("at 80 %%: Ann told %d times, the owner %d", notes(ann), notes(prof))
	}
	tick(t, db, clock, clock.Now().Add(time.Minute))
	if notes(ann) != 1 {
		t.Errorf("told again at the same level: %d", notes(ann))
	}
	// Over her limit the next launch is refused; the owner lifts it a
	// little, she passes 100 %, and the owner is told.
	if _, err := db.Launch(ctx, asAnn, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1}); gpuportal.ErrorField(err) != "monthly_spend_limit_fen" {
		t.Errorf("a launch past the limit: %v", err)
	}
	limit = 16_00
	if _, err := db.UpdateMember(ctx, prof, team.ID, ann.ID, gpuportal.MemberUpdate{SetMonthlySpendLimit: true, MonthlySpendLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	asAnn = actAs(t, db, ann, team.ID)
	runAnHour()
	if notes(ann) != 2 || notes(prof) != 1 {
		t.Errorf("at 100 %%: Ann told %d times, the owner %d", notes(ann), notes(prof))
	}
}

// (issue 47, the moonshot) A team lends what its members leave idle: Ann
// runs past her guaranteed share on borrowed GPUs at the spot price; Bob,
// launching within his, takes them back — at once while they wait for a
// place, with the usual notice once they run — and a run that would
// borrow more than is idle is refused.
func TestTeamLendsIdleGPUs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clock := storetest.Open(t)
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 2, 4)
	prof := storetest.MustCreateUser(t, db, "prof@example.com", gpuportal.RoleCustomer)
	ann := storetest.MustCreatePoorUser(t, db, "ann@example.com", gpuportal.RoleCustomer)
	bob := storetest.MustCreatePoorUser(t, db, "bob@example.com", gpuportal.RoleCustomer)
	team := teamOf(t, db, prof, 10_000_00, map[*gpuportal.User]string{ann: gpuportal.TeamMember, bob: gpuportal.TeamMember})
	account, err := db.TeamAccount(ctx, team.ID)
	if err != nil {
		t.Fatal(err)
	}
	quotas := storetest.TestQuotas
	quotas.MaxRunningGPUs = 4
	if _, err := db.UpdateAccount(ctx, admin, account, store.AccountUpdate{Quotas: &quotas}); err != nil {
		t.Fatal(err)
	}
	two, three := 2, 3
	for _, m := range []*gpuportal.User{ann, bob} {
		if _, err := db.UpdateMember(ctx, prof, team.ID, m.ID, gpuportal.MemberUpdate{SetReservedGPUs: true, ReservedRunningGPUs: &two}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.UpdateMember(ctx, prof, team.ID, ann.ID, gpuportal.MemberUpdate{SetReservedGPUs: true, ReservedRunningGPUs: &three}); gpuportal.ErrorField(err) != "reserved_running_gpus" || gpuportal.ErrorCode(err) != gpuportal.EPOLICY {
		t.Errorf("shares past the team's quota: %v", err)
	}
	asAnn, asBob := actAs(t, db, ann, team.ID), actAs(t, db, bob, team.ID)
	launch := func(as *gpuportal.User, count int) (*gpuportal.Instance, error) {
		return db.Launch(ctx, as, gpuportal.LaunchRequest{Kind: gpuportal.KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: count})
	}
	own, err := launch(asAnn, 2)
	if err != nil || own.Borrowed {
		t.Fatalf("within Ann's share: %+v %v", own, err)
	}
	lent, err := launch(asAnn, 2)
	if err != nil || !lent.Borrowed || lent.PricePerGPU >= own.PricePerGPU {
		t.Fatalf("past Ann's share: %+v %v", lent, err)
	}
	if _, err := launch(asAnn, 1); gpuportal.ErrorField(err) != "quota" {
		t.Errorf("borrowing past the idle GPUs: %v", err)
	}
	// Bob within his share: the borrowed run still waiting for a place
	// ends at once.
	bobs, err := launch(asBob, 1)
	if err != nil || bobs.Borrowed {
		t.Fatalf("within Bob's share: %+v %v", bobs, err)
	}
	if got := getInstance(t, db, lent.ID); got.Status != gpuportal.InstanceInterrupted || got.Interruption == nil || got.Interruption.Reason != gpuportal.ReasonTeamReclaim {
		t.Errorf("an unplaced borrowed run taken back: %s %+v", got.Status, got.Interruption)
	}
	if got := getInstance(t, db, own.ID); got.Status != gpuportal.InstancePending {
		t.Errorf("Ann's own run: %s", got.Status)
	}
	// Ann borrows the one idle GPU; it runs; Bob takes it back with notice.
	again, err := launch(asAnn, 1)
	if err != nil || !again.Borrowed {
		t.Fatalf("borrowing the idle GPU: %+v %v", again, err)
	}
	tick(t, db, clock, clock.Now())
	fakeAgent{t, db}.runAll()
	if got := getInstance(t, db, again.ID); got.Status != gpuportal.InstanceRunning {
		t.Fatalf("the borrowed run: %s", got.Status)
	}
	if _, err := launch(asBob, 1); err != nil {
		t.Fatalf("Bob's second GPU within his share: %v", err)
	}
	got := getInstance(t, db, again.ID)
	if got.Status != gpuportal.InstanceInterrupting || got.Interruption == nil || got.Interruption.Reason != gpuportal.ReasonTeamReclaim || !got.Interruption.Deadline.After(clock.Now()) {
		t.Fatalf("a running borrowed run taken back: %s %+v", got.Status, got.Interruption)
	}
	// GPUs under notice are not idle yet: no one borrows them meanwhile.
	if _, err := launch(asAnn, 1); gpuportal.ErrorField(err) != "quota" {
		t.Errorf("borrowing GPUs under notice: %v", err)
	}
	notes, err := db.InApp(ctx, ann.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) == 0 || notes[0].Params.Reason != string(gpuportal.ReasonTeamReclaim) || notes[0].Params.InstanceID != again.ID {
		t.Errorf("Ann is not told why: %+v", notes)
	}
	members, err := db.Members(ctx, prof, team.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if (m.UserID == ann.ID || m.UserID == bob.ID) && (m.ReservedRunningGPUs == nil || *m.ReservedRunningGPUs != 2) {
			t.Errorf("%s's share on the members list: %v", m.Email, m.ReservedRunningGPUs)
		}
	}
}
