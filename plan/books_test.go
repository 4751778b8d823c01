package plan

import (
	"reflect"
	"testing"
	"time"

	"gpuportal"
)

func TestIdleStops(t *testing.T) {
	t.Parallel()
	watch := func(id int64, idleFor time.Duration, inUse bool) IdleInstance {
		i := IdleInstance{ID: id, UserID: 7, Node: "n1", Pool: a100, Kind: gpuportal.KindOnDemand, Count: 1, Minutes: 30, InUse: inUse}
		if idleFor >= 0 {
			i.IdleSince = t0.Add(-idleFor)
		}
		return i
	}
	s := Snapshot{Pools: map[PoolKey]*Pool{}, Idle: []IdleInstance{
		watch(1, -1, false),             // first seen idle: idle from now
		watch(2, -1, true),              // in use, as before: nothing
		watch(3, 10*time.Minute, true),  // in use again
		watch(4, 29*time.Minute, false), // idle, not long enough
		watch(5, 30*time.Minute, false), // idle for its 30 minutes: stopped
	}}
	got := Plan(s, t0)
	wantMarks := []IdleMark{{InstanceID: 1, Since: t0}, {InstanceID: 3}}
	if !reflect.DeepEqual(got.IdleMarks, wantMarks) {
		t.Errorf("marks %+v, want %+v", got.IdleMarks, wantMarks)
	}
	if len(got.IdleStops) != 1 || got.IdleStops[0].ID != 5 {
		t.Errorf("stops %+v, want instance 5's", got.IdleStops)
	}
}

func TestBudgetNotices(t *testing.T) {
	t.Parallel()
	shanghai := time.FixedZone("CST", 8*3600)
	// 2026-11-30 20:00 UTC: December already, site time.
	now := time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)
	s := Snapshot{Pools: map[PoolKey]*Pool{}, Location: shanghai,
		Budgets: []BudgetWatch{
			{UserID: 1, Monthly: 1000_00, Spent: 799_00},                         // under 80 %
			{UserID: 2, Monthly: 1000_00, Spent: 800_00},                         // 80 %: told
			{UserID: 3, Monthly: 1000_00, Spent: 850_00, Noticed: "2026-12:80"},  // told already
			{UserID: 4, Monthly: 1000_00, Spent: 1000_00, Noticed: "2026-12:80"}, // 100 % after 80 %
			{UserID: 5, Monthly: 1000_00, Spent: 900_00, Noticed: "2026-11:100"}, // last month's notice
		},
		Limits: []LimitWatch{
			{TeamID: 9, Member: 6, Limit: 500_00, Spent: 400_00},
			{TeamID: 9, Member: 7, Limit: 500_00, Spent: 500_00, Noticed: "2026-12:80"},
		}}
	got := Plan(s, now)
	var told []int64
	for _, n := range got.BudgetNotices {
		told = append(told, n.UserID)
		if level := n.Budget.Level(); n.Noticed != gpuportal.BudgetNoticed("2026-12", level) {
			t.Errorf("user %d: remembered as %q at level %d", n.UserID, n.Noticed, level)
		}
	}
	if want := []int64{2, 4, 5}; !reflect.DeepEqual(told, want) {
		t.Errorf("budget notices to %v, want %v", told, want)
	}
	if len(got.LimitNotices) != 2 || got.LimitNotices[0].TellOwners || !got.LimitNotices[1].TellOwners || got.LimitNotices[1].Noticed != "2026-12:100" {
		t.Errorf("limit notices %+v: want member 6 at 80 %% alone, member 7 at 100 %% with the owners", got.LimitNotices)
	}
}
