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
