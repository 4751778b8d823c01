package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

// A team lends its idle GPUs: the rule is gpuportal.AdmitTeamRun; here is
// what it reads, the shares it checks and the borrowed runs it takes back.

// setShare sets a member's guaranteed share of the team's running GPUs
// (nil: none). The shares together stay within the team's quota, so every
// member can always have theirs.
func (db *DB) setShare(ctx context.Context, tx *sql.Tx, t *gpuportal.Team, memberID int64, share *int) error {
	if share != nil {
		var others int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(reserved_running_gpus), 0) FROM team_members WHERE team_id = ? AND user_id <> ?`, t.ID, memberID).Scan(&others); err != nil {
			return fmt.Errorf("the other shares: %w", err)
		}
		quotas, err := db.quotasOf(ctx, tx, t.AccountID)
		if err != nil {
			return err
		}
		if others+*share > quotas.MaxRunningGPUs {
			return gpuportal.FieldErrorf(gpuportal.EPOLICY, "reserved_running_gpus", "The team runs at most %d GPUs at once and the other members' shares take %d of them: a share is at most %d.",
				quotas.MaxRunningGPUs, others, max(quotas.MaxRunningGPUs-others, 0))
		}
	}
	_, err := tx.ExecContext(ctx, `UPDATE team_members SET reserved_running_gpus = ? WHERE team_id = ? AND user_id = ?`, intOrNull(share), t.ID, memberID)
	return err
}

// teamLends reports whether a team's account lends: some member of its
// team has a guaranteed share.
func teamLends(ctx context.Context, q queryer, teamID int64) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM team_members WHERE team_id = ? AND reserved_running_gpus IS NOT NULL`, teamID).Scan(&n)
	return n > 0, err
}

// admitQuota holds a run of count GPUs to its account's running-GPU quota.
// For a member acting for a team that lends, the run is within their share
// or borrows what the team leaves idle (gpuportal.AdmitTeamRun).
func (db *DB) admitQuota(ctx context.Context, tx *sql.Tx, user *gpuportal.User, count int) (gpuportal.Lending, error) {
	a := user.Acting
	if a == nil || a.Member == nil {
		return gpuportal.Lending{}, db.checkRunningQuota(ctx, tx, user.ID, count)
	}
	lends, err := teamLends(ctx, tx, a.TeamID)
	if err != nil {
		return gpuportal.Lending{}, fmt.Errorf("team shares: %w", err)
	}
	if !lends {
		return gpuportal.Lending{}, db.checkRunningQuota(ctx, tx, user.ID, count)
	}
	quotas, err := db.quotasOf(ctx, tx, user.ID)
	if err != nil {
		return gpuportal.Lending{}, err
	}
	g := gpuportal.TeamGPUs{Quota: quotas.MaxRunningGPUs}
	if a.ReservedRunningGPUs != nil {
		g.Share = *a.ReservedRunningGPUs
	}
	err = tx.QueryRowContext(ctx, `SELECT coalesce(sum(CASE WHEN borrowed = 0 AND created_by = ? THEN count END), 0), coalesce(sum(CASE WHEN borrowed = 0 THEN count END), 0),
		coalesce(sum(CASE WHEN borrowed <> 0 AND status <> 'interrupting' THEN count END), 0), coalesce(sum(CASE WHEN borrowed <> 0 AND status = 'interrupting' THEN count END), 0)
		FROM instances WHERE user_id = ? AND kind IN ('spot', 'on_demand') AND status IN ('pending', 'running', 'interrupting')`, a.Member.ID, user.ID).Scan(&g.MemberOwn, &g.TeamOwn, &g.Lent, &g.Leaving)
	if err != nil {
		return gpuportal.Lending{}, fmt.Errorf("the team's running GPUs: %w", err)
	}
	return gpuportal.AdmitTeamRun(g, count)
}

// reclaimBorrowed takes back at least gpus GPUs of the team account's
// borrowed runs, newest first: a placed one gets the usual spot notice, one
// still waiting for a place ends at once.
func (db *DB) reclaimBorrowed(ctx context.Context, tx *sql.Tx, account int64, gpus int, now time.Time) ([]string, error) {
	if gpus <= 0 {
		return nil, nil
	}
	list, err := scanEach(ctx, tx, scanOneInstance, `SELECT `+instanceColumns+` FROM instances WHERE user_id = ? AND borrowed <> 0 AND status IN ('pending', 'running') ORDER BY id DESC`, account)
	if err != nil {
		return nil, fmt.Errorf("borrowed runs: %w", err)
	}
	pol, err := db.policies(ctx, tx)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, i := range list {
		if gpus <= 0 {
			break
		}
		gpus -= i.Count
		p := pol.For(i.Model)
		if i.Node != "" {
			asked, err := askedNotice(ctx, tx, i.ID)
			if err != nil {
				return nil, err
			}
			if err := db.interrupt(ctx, tx, i, gpuportal.ReasonTeamReclaim, now, now.Add(time.Duration(p.NoticeFor(asked))*time.Second), p.SpotGraceSeconds); err != nil {
				return nil, err
			}
			nodes = append(nodes, i.Node)
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'interrupted', notice_at = ?, deadline_at = ?, interrupt_reason = ?, ended_at = ? WHERE id = ? AND status = 'pending' AND node_id IS NULL`,
			unix(now), unix(now), gpuportal.ReasonTeamReclaim, unix(now), i.ID); err != nil {
			return nil, err
		}
		if err := db.emitInstance(ctx, tx, i.ID, gpuportal.EventInstanceInterrupted); err != nil {
			return nil, err
		}
		if err := db.notify(ctx, tx, i.UserID, gpuportal.NoteSpotInterruption, gpuportal.NoteParams{InstanceID: i.ID, Model: i.Model, Region: i.Region, Count: i.Count, Deadline: now, Reason: string(gpuportal.ReasonTeamReclaim), Kind: string(i.Kind)}); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}
