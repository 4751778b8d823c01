package store

import (
	"context"
	"database/sql"
	"sync"

	"gpuportal"
)

// accountSum is one account's live spot and on-demand runs summed: how
// many could be stopped, whether a balance stop is under way, what they
// cost an hour and when the earliest started, beside the account's money
// and whether it was told its balance runs low.
type accountSum struct {
	userID          int64
	stoppable       int
	stopping        bool
	burn            gpuportal.Fen
	earliest        sql.NullInt64 // the earliest start of a running one
	balance, credit gpuportal.Fen
	noted           bool
}

// accountSums keeps each account's sums between ticks, under its row in
// live_account_revisions (migration 0052), which triggers renew at every
// change of what is summed and remove once the account has no live run.
// The tick reads the revisions (one small row per account with live
// runs) and sums again only the accounts whose revision moved: a tick
// that places or ends a few runs sums a few accounts, not every one. As in
// kept (kept.go), a sum is kept only when its account's revision did not
// change while it was read.
type accountSums struct {
	mu   sync.Mutex
	kept map[int64]keptSum
}

type keptSum struct {
	revision int64
	sum      *accountSum // nil: every live run of the account was asked to stop (the sums leave it out)
}

// read returns the sums of the accounts with a live run not yet asked to
// stop, by user.
func (a *accountSums) read(ctx context.Context, db *DB, q queryer) ([]accountSum, error) {
	revisions, err := liveAccountRevisions(ctx, q, nil)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	kept := a.kept
	a.mu.Unlock()
	var changed []any
	for _, r := range revisions {
		if k, ok := kept[r.user]; !ok || k.revision != r.revision {
			changed = append(changed, r.user)
		}
	}
	if len(changed) == 0 && len(kept) == len(revisions) {
		return sumsOf(revisions, kept, nil), nil
	}
	keep := make(map[int64]keptSum, len(revisions))
	for _, r := range revisions {
		if k, ok := kept[r.user]; ok && k.revision == r.revision {
			keep[r.user] = k
		}
	}
	// The changed accounts' sums: used now, and kept unless the account
	// changed again while they were read.
	fresh := map[int64]*accountSum{}
	if len(changed) > 0 {
		// Many changed (the first tick, a round of billing): all at once,
		// cheaper than a long list of accounts.
		only := changed
		if len(changed) > 200 || 2*len(changed) > len(revisions) {
			only = nil
		}
		sums, err := db.sumAccounts(ctx, q, only)
		if err != nil {
			return nil, err
		}
		for k := range sums {
			fresh[sums[k].userID] = &sums[k]
		}
		after, err := liveAccountRevisions(ctx, q, only)
		if err != nil {
			return nil, err
		}
		was := make(map[int64]int64, len(revisions))
		for _, r := range revisions {
			was[r.user] = r.revision
		}
		for _, r := range after {
			if _, known := keep[r.user]; !known && was[r.user] == r.revision {
				keep[r.user] = keptSum{revision: r.revision, sum: fresh[r.user]}
			}
		}
	}
	a.mu.Lock()
	a.kept = keep
	a.mu.Unlock()
	return sumsOf(revisions, keep, fresh), nil
}

// sumsOf lists the sums of the accounts revisions names, in their order
// (by user): the kept one at its revision, else the one just read.
func sumsOf(revisions []accountRevision, kept map[int64]keptSum, fresh map[int64]*accountSum) []accountSum {
	out := make([]accountSum, 0, len(revisions))
	for _, r := range revisions {
		sum := fresh[r.user]
		if k, ok := kept[r.user]; ok && k.revision == r.revision {
			sum = k.sum
		}
		if sum != nil {
			out = append(out, *sum)
		}
	}
	return out
}

type accountRevision struct{ user, revision int64 }

// liveAccountRevisions reads the revisions of the accounts with live
// runs, by user; of only those users when only is not nil.
func liveAccountRevisions(ctx context.Context, q queryer, only []any) ([]accountRevision, error) {
	where := ""
	if only != nil {
		where = ` WHERE user_id IN (?` + repeatArg(len(only)-1) + `)`
	}
	return scanAll(ctx, q, func(r *sql.Rows, x *accountRevision) error { return r.Scan(&x.user, &x.revision) },
		`SELECT user_id, revision FROM live_account_revisions`+where+` ORDER BY user_id`, only...)
}

// sumAccounts is one aggregate over the live instances: each account's
// sums (of only those users when only is not nil), for the accounts with
// a live run not yet asked to stop.
func (db *DB) sumAccounts(ctx context.Context, q queryer, only []any) ([]accountSum, error) {
	where := ""
	if only != nil {
		where = ` AND user_id IN (?` + repeatArg(len(only)-1) + `)`
	}
	return scanAll(ctx, q, func(r *sql.Rows, a *accountSum) error {
		return r.Scan(&a.userID, &a.stoppable, &a.stopping, &a.burn, &a.earliest, &a.balance, &a.credit, &a.noted)
	}, `SELECT l.user_id, l.stoppable, l.stopping, l.burn, l.earliest,
			coalesce(a.balance_fen, 0), coalesce(a.credit_limit_fen, 0), u.low_balance_noted_at IS NOT NULL
		FROM (SELECT user_id,
				count(CASE WHEN stop_requested_at IS NULL AND status <> 'interrupting' THEN 1 END) AS stoppable,
				count(CASE WHEN status = 'interrupting' AND coalesce(interrupt_reason, '') = ? THEN 1 END) > 0 AS stopping,
				CAST(coalesce(sum(CASE WHEN status <> 'pending' THEN price_fen * `+billedUnits+` END), 0) AS BIGINT) AS burn,
				min(CASE WHEN status <> 'pending' THEN started_at END) AS earliest
			FROM `+db.indexed("instances", "instances_live_accounts")+` WHERE kind IN ('spot', 'on_demand') AND status IN ('pending', 'running', 'interrupting')`+where+`
			GROUP BY user_id HAVING count(CASE WHEN stop_requested_at IS NULL THEN 1 END) > 0) l
		JOIN users u ON u.id = l.user_id LEFT JOIN accounts a ON a.user_id = l.user_id
		ORDER BY l.user_id`, append([]any{gpuportal.ReasonBalance}, only...)...)
}
