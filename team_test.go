package gpuportal

import "testing"

// The one rule of who may do what in a team, over every role, area and
// kind of action (DESIGN §6 "roles").
func TestTeamMay(t *testing.T) {
	type want struct{ read, change bool }
	table := map[string]map[TeamArea]want{
		TeamOwner:   {AreaResources: {true, true}, AreaMoney: {true, true}, AreaMembers: {true, true}},
		TeamAdmin:   {AreaResources: {true, true}, AreaMoney: {true, false}, AreaMembers: {true, true}},
		TeamBilling: {AreaResources: {false, false}, AreaMoney: {true, true}, AreaMembers: {true, false}},
		TeamMember:  {AreaResources: {true, true}, AreaMoney: {false, false}, AreaMembers: {true, false}},
		TeamViewer:  {AreaResources: {true, false}, AreaMoney: {false, false}, AreaMembers: {true, false}},
		"stranger":  {AreaResources: {false, false}, AreaMoney: {false, false}, AreaMembers: {false, false}},
	}
	for role, areas := range table {
		for area, w := range areas {
			if got := TeamMay(role, area, false); got != w.read {
				t.Errorf("%s reads %s: %v, want %v", role, area, got, w.read)
			}
			if got := TeamMay(role, area, true); got != w.change {
				t.Errorf("%s changes %s: %v, want %v", role, area, got, w.change)
			}
		}
	}
	for _, c := range []struct {
		area   TeamArea
		change bool
		want   string
	}{{AreaResources, true, TeamMember}, {AreaResources, false, TeamViewer}, {AreaMoney, true, TeamBilling}, {AreaMembers, true, TeamAdmin}} {
		if got := TeamRoleFor(c.area, c.change); got != c.want {
			t.Errorf("the least role that may (%s, change %v) = %s, want %s", c.area, c.change, got, c.want)
		}
	}
	me, other := int64(7), int64(8)
	for _, c := range []struct {
		role string
		by   *int64
		want bool
	}{{TeamOwner, &other, true}, {TeamAdmin, &other, true}, {TeamMember, &me, true}, {TeamMember, &other, false}, {TeamMember, nil, false}, {TeamViewer, &me, false}, {TeamBilling, &me, false}} {
		if got := TeamMayChangeInstance(c.role, me, c.by); got != c.want {
			t.Errorf("%s changes an instance made by %v: %v, want %v", c.role, c.by, got, c.want)
		}
	}
}

// A team that lends: within one's share a run is one's own and takes back
// what others borrowed; past it, it borrows only what is idle.
func TestAdmitTeamRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		g     TeamGPUs
		count int
		want  Lending
		err   bool
	}{
		{"within the share, the team idle", TeamGPUs{Quota: 8, Share: 4}, 4, Lending{}, false},
		{"within the share, others borrowed", TeamGPUs{Quota: 8, Share: 4, TeamOwn: 4, Lent: 4}, 2, Lending{Reclaim: 2}, false},
		{"within the share, borrowed already leaving", TeamGPUs{Quota: 8, Share: 4, TeamOwn: 4, Lent: 2, Leaving: 2}, 2, Lending{}, false},
		{"within the share, room beside the borrowed", TeamGPUs{Quota: 8, Share: 4, TeamOwn: 2, Lent: 2}, 4, Lending{}, false},
		{"the share full: borrows what is idle", TeamGPUs{Quota: 8, Share: 2, MemberOwn: 2, TeamOwn: 2}, 3, Lending{Borrowed: true}, false},
		{"an instance fits its share whole or borrows", TeamGPUs{Quota: 8, Share: 2, MemberOwn: 1, TeamOwn: 1}, 2, Lending{Borrowed: true}, false},
		{"no share: every run borrows", TeamGPUs{Quota: 8}, 1, Lending{Borrowed: true}, false},
		{"borrowing past the idle GPUs", TeamGPUs{Quota: 8, Share: 2, MemberOwn: 2, TeamOwn: 6, Lent: 1}, 2, Lending{}, true},
		{"leaving GPUs are not idle yet", TeamGPUs{Quota: 8, TeamOwn: 6, Leaving: 2}, 1, Lending{}, true},
		{"shares past a lowered quota", TeamGPUs{Quota: 4, Share: 4, TeamOwn: 4}, 1, Lending{}, true},
	} {
		got, err := AdmitTeamRun(c.g, c.count)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v, error %v", c.name, got, err, c.want, c.err)
		}
		if err != nil && ErrorField(err) != "quota" {
			t.Errorf("%s: field %q", c.name, ErrorField(err))
		}
	}
}
