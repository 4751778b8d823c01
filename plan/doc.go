// Package plan holds the scheduler's decisions and nothing else: the
// snapshot a tick decides over (Snapshot, loaded by the store), the pure
// planner (Plan) and the pool rules it shares with the store's launches
// (SpotLaunchFits, SpotRoom), and the decisions it returns (Decisions),
// which the store applies. It does no I/O and knows no clock but the one
// it is given; the runner that calls it every minute and on every kick
// is package scheduler, above the store (Nomad's scheduler/ and
// plan_apply split).
package plan
