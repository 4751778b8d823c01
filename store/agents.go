package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// Node liveness, enrollment and telemetry use real (wall-clock) time, passed
// in by the caller: moving the business clock must not mark nodes offline.

// CreateEnrollmentToken makes a one-time token that enrols one node in a
// region. Only its hash is kept.
func (db *DB) CreateEnrollmentToken(ctx context.Context, actor *gpuportal.User, region string) (string, error) {
	if actor != nil && !actor.IsAdmin() {
		return "", gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins can enrol nodes.")
	}
	if _, err := db.Region(ctx, region); err != nil {
		return "", gpuportal.FieldErrorf(gpuportal.EINVALID, "region", "Unknown region %q.", region)
	}
	token := gpuportal.NewSecret("gpe_")
	var actorID sql.NullInt64
	if actor != nil {
		actorID = sql.NullInt64{Int64: actor.ID, Valid: true}
	}
	err := db.inTx(ctx, "create enrollment token", func(tx *sql.Tx) error {
		// Expiry is real time: moving a test clock must not revive or
		// expire tokens.
		now := db.Wall.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO enrollment_tokens (token_hash, region_id, created_at, created_by, expires_at) VALUES (?, ?, ?, ?, ?)`,
			gpuportal.HashSecret(token), region, unix(now), actorID, unix(now.Add(db.enrollmentTTL()))); err != nil {
			return err
		}
		if actor != nil {
			return db.audit(ctx, tx, actor.ID, "node.enrollment_token", "region/"+region, nil, map[string]string{"token_prefix": token[:8]})
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("create enrollment token: %w", err)
	}
	return token, nil
}

// DefaultEnrollmentTokenTTL is how long an enrollment token works unless
// the portal is told otherwise (--enrollment-token-ttl).
const DefaultEnrollmentTokenTTL = 24 * time.Hour

func (db *DB) enrollmentTTL() time.Duration {
	if db.EnrollmentTokenTTL > 0 {
		return db.EnrollmentTokenTTL
	}
	return DefaultEnrollmentTokenTTL
}

// RegisterNode enrols a node with a one-time token: the node, its GPUs (those
// the catalog rents) and a node token, stored hashed and returned once.
func (db *DB) RegisterNode(ctx context.Context, reg gpuportal.AgentRegistration, now time.Time) (gpuportal.AgentCredentials, error) {
	var creds gpuportal.AgentCredentials
	if reg.EnrollToken == "" {
		return creds, gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "An enrollment token is required.")
	}
	host := strings.TrimSpace(reg.Hostname)
	if host == "" || len(host) > 253 {
		return creds, gpuportal.FieldErrorf(gpuportal.EINVALID, "hostname", "The hostname must be 1 to 253 characters.")
	}
	if len(reg.GPUs) > 64 {
		return creds, gpuportal.FieldErrorf(gpuportal.EINVALID, "gpus", "At most 64 GPUs per node.")
	}
	hb := reg.HeartbeatSeconds
	if hb < 1 || hb > 300 {
		hb = 10
	}
	err := db.inTx(ctx, "register node", func(tx *sql.Tx) error {
		var region string
		var used sql.NullInt64
		var expires int64
		err := tx.QueryRowContext(ctx, `SELECT region_id, used_at, coalesce(expires_at, created_at + ?) FROM enrollment_tokens WHERE token_hash = ?`,
			int64(DefaultEnrollmentTokenTTL/time.Second), gpuportal.HashSecret(reg.EnrollToken)).Scan(&region, &used, &expires)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && used.Valid) {
			return gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "The enrollment token is invalid or has been used.")
		} else if err != nil {
			return err
		}
		if now.Unix() >= expires {
			return gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "The enrollment token expired at %s; ask for a new one (portal enroll-token).", fromUnix(expires).Format(time.RFC3339))
		}
		if err := checkGPUsUnclaimed(ctx, tx, reg.GPUs, now); err != nil {
			return named("check GPUs unclaimed", err)
		}
		if reg.Region != "" && reg.Region != region {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "region", "This enrollment token is for region %s, not %s.", region, reg.Region)
		}
		creds.NodeID = "node-" + gpuportal.HashSecret(gpuportal.NewSecret(""))[:10]
		creds.NodeToken = gpuportal.NewSecret("gpn_")
		if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, hostname, region_id, token_hash, online, drain, last_heartbeat_at, created_at, heartbeat_seconds)
			VALUES (?, ?, ?, ?, 1, 0, ?, ?, ?)`, creds.NodeID, host, region, gpuportal.HashSecret(creds.NodeToken), now.Unix(), unix(db.now()), hb); err != nil {
			return err
		}
		for _, g := range reg.GPUs {
			model := gpuportal.CatalogModelFor(g.Name, g.MemoryTotalMiB)
			if model == "" || g.UUID == "" {
				continue // not a GPU the catalog rents
			}
			// A GPU seen before (the node lost its state and re-enrolled)
			// moves to the new node.
			if _, err := tx.ExecContext(ctx, `INSERT INTO gpus (uuid, node_id, idx, model_id, name, healthy, memory_total_mib) VALUES (?, ?, ?, ?, ?, 1, ?)
				ON CONFLICT (uuid) DO UPDATE SET node_id = excluded.node_id, idx = excluded.idx, model_id = excluded.model_id, name = excluded.name, memory_total_mib = excluded.memory_total_mib`,
				g.UUID, creds.NodeID, g.Index, model, g.Name, g.MemoryTotalMiB); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE enrollment_tokens SET used_at = ?, node_id = ? WHERE token_hash = ?`, unix(db.now()), creds.NodeID, gpuportal.HashSecret(reg.EnrollToken)); err != nil {
			return err
		}
		return recomputeCapacity(ctx, tx)
	})
	if err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
			return creds, fmt.Errorf("register node: %w", err)
		}
		return creds, err
	}
	db.Kick(ctx) // new GPUs: pending work and waiters may fit
	return creds, nil
}

// checkGPUsUnclaimed refuses a registration that names GPUs of another
// node that is still online: a node may take over a GPU only from a node
// that is gone (a machine re-enrolled after losing its state), never
// steal one from a live node by reporting its UUID.
func checkGPUsUnclaimed(ctx context.Context, tx *sql.Tx, gpus []gpuportal.AgentGPU, now time.Time) error {
	for _, g := range gpus {
		var node string
		var online bool
		err := tx.QueryRowContext(ctx, `SELECT n.id, n.online FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE g.uuid = ?`, g.UUID).Scan(&node, &online)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		} else if err != nil {
			return fmt.Errorf("check GPU owner: %w", err)
		}
		if online {
			return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "gpus", "GPU %s belongs to node %s, which is online; it can move to a new node only once that node is offline.", g.UUID, node)
		}
	}
	return nil
}

// NodeByToken returns the id of the node a token belongs to. A node in
// the middle of a token rotation is also known by its new token, and the
// first request made with that token retires the old one.
func (db *DB) NodeByToken(ctx context.Context, token string) (string, error) {
	hash := gpuportal.HashSecret(token)
	var id string
	var rotated bool
	err := db.read.QueryRowContext(ctx, `SELECT id, next_token_hash IS NOT NULL AND next_token_hash = ? FROM nodes WHERE token_hash = ? OR next_token_hash = ?`, hash, hash, hash).Scan(&id, &rotated)
	if errors.Is(err, sql.ErrNoRows) {
		return "", gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "The node token is invalid.")
	} else if err != nil {
		return "", fmt.Errorf("node by token: %w", err)
	}
	if rotated {
		err := db.inTx(ctx, "finish token rotation", func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE nodes SET token_hash = next_token_hash, next_token_hash = NULL, rotate_token = 0, token_rotated_at = ? WHERE id = ? AND next_token_hash = ?`,
				unix(db.Wall.Now()), id, hash)
			return err
		})
		if err != nil {
			return "", err
		}
	}
	return id, nil
}

// RotateNodeToken asks a node's agent to take a new token: its next
// heartbeat answer says so, the agent fetches one (NewNodeToken) and
// switches to it. The old token works until the new one is first used.
func (db *DB) RotateNodeToken(ctx context.Context, actor *gpuportal.User, nodeID string) error {
	return db.nodeTokenChange(ctx, actor, nodeID, "node.rotate_token", `UPDATE nodes SET rotate_token = 1, revision = revision + 1 WHERE id = ?`, nodeID)
}

// RevokeNodeToken makes a node's token (and any rotation under way)
// worthless at once: its agent is refused from its next request on and
// must be enrolled again with a new enrollment token.
func (db *DB) RevokeNodeToken(ctx context.Context, actor *gpuportal.User, nodeID string) error {
	if err := db.nodeTokenChange(ctx, actor, nodeID, "node.revoke_token",
		`UPDATE nodes SET token_hash = NULL, next_token_hash = NULL, rotate_token = 0, token_revoked_at = ? WHERE id = ?`, unix(db.Wall.Now()), nodeID); err != nil {
		return err
	}
	// A node whose token is revoked is fenced: whatever it still runs can
	// no longer reach the portal for work, and the administrator vouches
	// for it being gone. Instances waiting on it may restart.
	if _, err := db.write.ExecContext(ctx, `UPDATE instances SET unconfirmed_node = NULL, unconfirmed_since = NULL WHERE unconfirmed_node = ?`, nodeID); err != nil {
		return fmt.Errorf("release instances waiting on node %s: %w", nodeID, err)
	}
	db.Kick(ctx)
	return nil
}

func (db *DB) nodeTokenChange(ctx context.Context, actor *gpuportal.User, nodeID, action, update string, args ...any) error {
	if !actor.IsAdmin() {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
	}
	var revoked sql.NullInt64
	err := db.inTx(ctx, "node token change", func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT token_revoked_at FROM nodes WHERE id = ?`, nodeID).Scan(&revoked); errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Node %s not found.", nodeID)
		} else if err != nil {
			return err
		}
		if revoked.Valid {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "The token of node %s is revoked; enrol the node again with a new enrollment token.", nodeID)
		}
		if _, err := tx.ExecContext(ctx, update, args...); err != nil {
			return fmt.Errorf("%s: %w", action, err)
		}
		return db.audit(ctx, tx, actor.ID, action, "node/"+nodeID, nil, nil)
	})
	if err != nil {
		return err
	}
	db.wake(ctx, nodeID)
	return nil
}

// NewNodeToken gives a node asked to rotate its token a new one (shown
// once; kept hashed as the pending token). Asking again before using it
// replaces it, so a lost answer costs nothing.
func (db *DB) NewNodeToken(ctx context.Context, nodeID string) (string, error) {
	token := gpuportal.NewSecret("gpn_")
	err := db.inTx(ctx, "new node token", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE nodes SET next_token_hash = ? WHERE id = ? AND rotate_token = 1`, gpuportal.HashSecret(token), nodeID)
		if err != nil {
			return fmt.Errorf("store next token: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "No token rotation was asked for this node.")
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// RecordHeartbeat stores a node's liveness and telemetry. A node that was
// offline comes back; a GPU whose health changed changes the capacity.
// It returns the node's current desired-state revision.
//
// Almost every heartbeat changes telemetry only. That common case runs
// without the writer lock (on PostgreSQL, heartbeats from many portals run
// side by side): it touches its own node's rows alone, and its conditional
// UPDATEs see the latest committed state. A heartbeat that would change
// what can be rented — a node coming back, a GPU's health — is redone
// under the writer lock, since it recomputes the capacity.
func (db *DB) RecordHeartbeat(ctx context.Context, nodeID string, hb gpuportal.AgentHeartbeat, now time.Time) (int64, error) {
	var revision int64
	hbSec := hb.HeartbeatSeconds
	if hbSec < 1 || hbSec > 300 {
		hbSec = 10
	}
	err := db.inConcurrentTx(ctx, "record heartbeat", func(tx *sql.Tx) error {
		var err error
		revision, err = db.telemetryOnly(ctx, tx, nodeID, hb, hbSec, now)
		return err
	})
	if errors.Is(err, errCapacityChanges) {
		err = db.kickAfter(ctx, db.inTx(ctx, "record heartbeat", func(tx *sql.Tx) error {
			var err error
			revision, err = db.heartbeatChangingCapacity(ctx, tx, nodeID, hb, hbSec, now)
			return err
		}))
	}
	if err != nil {
		return 0, err
	}
	return revision, nil
}

// errCapacityChanges sends a heartbeat to the writer-locked path.
var errCapacityChanges = errors.New("the heartbeat changes the capacity")

// telemetryOnly records a heartbeat of an online node whose GPUs keep their
// health, or returns errCapacityChanges (and the caller rolls back).
func (db *DB) telemetryOnly(ctx context.Context, tx *sql.Tx, nodeID string, hb gpuportal.AgentHeartbeat, hbSec int, now time.Time) (int64, error) {
	var revision int64
	err := tx.QueryRowContext(ctx, `UPDATE nodes SET last_heartbeat_at = ?, heartbeat_seconds = ? WHERE id = ? AND online = 1 RETURNING revision`,
		now.Unix(), hbSec, nodeID).Scan(&revision)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, errCapacityChanges // offline (or unknown: the other path says so)
	} else if err != nil {
		return 0, err
	}
	if lost, err := unreportedWorkloads(ctx, tx, nodeID, hb); err != nil {
		return 0, err
	} else if lost {
		return 0, errCapacityChanges
	}
	if len(hb.GPUs) == 0 {
		return revision, nil
	}
	// One statement for all the node's GPUs (on PostgreSQL each statement
	// is a round trip). A GPU whose health changed, or that is not one of
	// ours, is not matched.
	var q strings.Builder
	q.WriteString(`UPDATE gpus SET memory_used_mib = v.column3, utilization_percent = v.column4, temperature_c = v.column5,
		power_w = v.column6, xid_errors = v.column7, last_xid = v.column8, ecc_uncorrected = v.column9 FROM (VALUES `)
	args := make([]any, 0, 10*len(hb.GPUs)+1)
	for i, g := range hb.GPUs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(`(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT))`)
		args = append(args, g.UUID, g.Healthy, g.MemoryUsedMiB, g.UtilizationPercent, g.TemperatureC, g.PowerW, g.XIDErrors, g.LastXID, g.ECCUncorrected, reportedFault(g))
	}
	// A failed GPU stays out of service (healthy 0) until it is returned,
	// whatever the node says of it now; what the node says is kept, and a
	// change of it takes the other path.
	q.WriteString(`) AS v WHERE gpus.uuid = v.column1 AND gpus.healthy = (CASE WHEN gpus.fault_at IS NULL THEN v.column2 ELSE 0 END)
		AND gpus.reported_fault = v.column10 AND gpus.node_id = ?`)
	res, err := tx.ExecContext(ctx, q.String(), append(args, nodeID)...)
	if err != nil {
		return 0, err
	}
	if n, _ := res.RowsAffected(); int(n) != len(hb.GPUs) {
		return 0, errCapacityChanges
	}
	return revision, nil
}

// heartbeatChangingCapacity records any heartbeat, recomputing the
// capacity when the node comes back or a GPU's health changed.
func (db *DB) heartbeatChangingCapacity(ctx context.Context, tx *sql.Tx, nodeID string, hb gpuportal.AgentHeartbeat, hbSec int, now time.Time) (int64, error) {
	var online bool
	var revision int64
	if err := tx.QueryRowContext(ctx, `SELECT online, revision FROM nodes WHERE id = ?`, nodeID).Scan(&online, &revision); err != nil {
		return 0, err
	}
	if !online {
		// Back from offline: attempts it does not report are gone, so the
		// instances restarted meanwhile may start (see confirmGone).
		if err := confirmGone(ctx, tx, nodeID, hb); err != nil {
			return 0, err
		}
	}
	healed, err := db.healUnreported(ctx, tx, nodeID, hb)
	if err != nil {
		return 0, fmt.Errorf("end workloads the node no longer reports: %w", err)
	}
	if healed {
		if err := bumpNode(ctx, tx, nodeID); err != nil {
			return 0, err
		}
		revision++
	}
	healthChanged := !online
	health := map[string]bool{}
	busy := map[string]bool{}    // left busy by an ended instance
	faulted := map[string]bool{} // failed, not yet returned
	rows, err := tx.QueryContext(ctx, `SELECT uuid, healthy, busy_after_instance IS NOT NULL, fault_at IS NOT NULL FROM gpus WHERE node_id = ?`, nodeID)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var u string
		var h, b, f bool
		if err := rows.Scan(&u, &h, &b, &f); err != nil {
			rows.Close()
			return 0, err
		}
		health[u], busy[u], faulted[u] = h, b, f
	}
	rows.Close()
	if _, err := tx.ExecContext(ctx, `UPDATE nodes SET last_heartbeat_at = ?, online = 1, heartbeat_seconds = ? WHERE id = ?`, now.Unix(), hbSec, nodeID); err != nil {
		return 0, err
	}
	for _, g := range hb.GPUs {
		was, ours := health[g.UUID]
		if !ours {
			continue // not a GPU we rent, or another node's
		}
		if busy[g.UUID] {
			if !gpuportal.GPUFreeAfterInstance(g.Healthy, g.MemoryUsedMiB) {
				g.Healthy = false // still held by what the ended instance left
			} else if _, err := tx.ExecContext(ctx, `UPDATE gpus SET busy_after_instance = NULL WHERE uuid = ?`, g.UUID); err != nil {
				return 0, err
			}
		}
		if fault := reportedFault(g); fault != "" && !faulted[g.UUID] {
			// It failed now: out of service at once, what ran on it ended
			// and its owner credited, in this transaction.
			if err := db.gpuFailed(ctx, tx, nodeID, g, db.now()); err != nil {
				return 0, fmt.Errorf("GPU %s failed: %w", g.UUID, err)
			}
			faulted[g.UUID] = true
		}
		if faulted[g.UUID] {
			g.Healthy = false
		}
		if _, err := tx.ExecContext(ctx, `UPDATE gpus SET memory_used_mib = ?, utilization_percent = ?, temperature_c = ?, power_w = ?,
			xid_errors = ?, last_xid = ?, ecc_uncorrected = ?, healthy = ?, reported_fault = ? WHERE uuid = ?`, g.MemoryUsedMiB, g.UtilizationPercent, g.TemperatureC, g.PowerW,
			g.XIDErrors, g.LastXID, g.ECCUncorrected, g.Healthy, reportedFault(g), g.UUID); err != nil {
			return 0, err
		}
		healthChanged = healthChanged || was != g.Healthy
	}
	if healthChanged {
		return revision, recomputeCapacity(ctx, tx)
	}
	return revision, nil
}

// confirmGone releases the instances waiting for nodeID to confirm that
// their old attempt is gone: every one its heartbeat does not report. One
// it still runs is released when its exit is reported (ApplyWorkloadReports).
func confirmGone(ctx context.Context, tx *sql.Tx, nodeID string, hb gpuportal.AgentHeartbeat) error {
	waiting, err := scanAll(ctx, tx, func(r *sql.Rows, id *int64) error { return r.Scan(id) },
		`SELECT id FROM instances WHERE unconfirmed_node = ?`, nodeID)
	if err != nil {
		return err
	}
	for _, id := range waiting {
		reported := false
		for _, w := range hb.Workloads {
			reported = reported || (w.InstanceID == id && w.State == gpuportal.WorkloadRunning)
		}
		if !reported {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET unconfirmed_node = NULL, unconfirmed_since = NULL WHERE id = ?`, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// liveOnNode is a started instance of a node, as the heal reads it.
type liveOnNode struct {
	id, attempt, missed int64
}

func liveInstancesOfNode(ctx context.Context, tx *sql.Tx, nodeID string) ([]liveOnNode, error) {
	return scanAll(ctx, tx, func(r *sql.Rows, l *liveOnNode) error { return r.Scan(&l.id, &l.attempt, &l.missed) },
		`SELECT id, attempt, unreported_heartbeats FROM instances WHERE node_id = ? AND status IN ('running', 'interrupting')`, nodeID)
}

func reportedIn(hb gpuportal.AgentHeartbeat, l liveOnNode) bool {
	for _, w := range hb.Workloads {
		if w.InstanceID == l.id && int64(w.Attempt) == l.attempt {
			return true
		}
	}
	return false
}

// unreportedWorkloads says whether the heartbeat leaves out a started
// instance of the node, or reports one that was missed before: either
// way the heal (under the writer lock) has something to write.
func unreportedWorkloads(ctx context.Context, tx *sql.Tx, nodeID string, hb gpuportal.AgentHeartbeat) (bool, error) {
	live, err := liveInstancesOfNode(ctx, tx, nodeID)
	if err != nil {
		return false, err
	}
	for _, l := range live {
		if reported := reportedIn(hb, l); !reported || l.missed > 0 {
			return true, nil
		}
	}
	return false, nil
}

// healUnreported counts the heartbeats that leave out each started
// instance of the node and ends those missed LostAfterHeartbeats times in
// a row: an agent that lost a workload (its exit report lost, its state
// gone) must not leave it billing forever with its GPUs held. It is billed
// up to the first heartbeat that missed it; its GPUs wait, out of service,
// until the node shows them idle (as after any exit the agent could not
// see clean). It reports whether it ended any.
func (db *DB) healUnreported(ctx context.Context, tx *sql.Tx, nodeID string, hb gpuportal.AgentHeartbeat) (bool, error) {
	live, err := liveInstancesOfNode(ctx, tx, nodeID)
	if err != nil {
		return false, err
	}
	now := db.now()
	ended := false
	for _, l := range live {
		if reportedIn(hb, l) {
			if l.missed > 0 {
				if _, err := tx.ExecContext(ctx, `UPDATE instances SET unreported_heartbeats = 0, unreported_at = NULL WHERE id = ?`, l.id); err != nil {
					return false, err
				}
			}
			continue
		}
		if l.missed+1 < gpuportal.LostAfterHeartbeats {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET unreported_heartbeats = unreported_heartbeats + 1, unreported_at = coalesce(unreported_at, ?) WHERE id = ?`, unix(now), l.id); err != nil {
				return false, err
			}
			continue
		}
		var since sql.NullInt64
		var stopAsked bool
		i, err := scanInstance(tx.QueryRowContext(ctx, `SELECT `+instanceColumns+`, unreported_at, stop_requested_at IS NOT NULL FROM instances WHERE id = ?`, l.id), &since, &stopAsked)
		if err != nil {
			return false, err
		}
		until := now
		if since.Valid {
			until = fromUnix(since.Int64)
		}
		outcome := gpuportal.WorkloadOutcome(i, stopAsked, gpuportal.WorkloadStatus{Error: gpuportal.LostWorkloadError})
		if i.Kind != gpuportal.KindReserved {
			if err := holdBusyGPUs(ctx, tx, i); err != nil {
				return false, err
			}
		}
		if err := db.finishAttempt(ctx, tx, i, outcome, nil, gpuportal.LostWorkloadError, stopAsked, endWorkloadLost, until); err != nil {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET unreported_heartbeats = 0, unreported_at = NULL WHERE id = ?`, l.id); err != nil {
			return false, err
		}
		ended = true
	}
	return ended, nil
}

// NodeRevision returns a node's desired-state revision.
func (db *DB) NodeRevision(ctx context.Context, nodeID string) (int64, error) {
	var rev int64
	err := db.read.QueryRowContext(ctx, `SELECT revision FROM nodes WHERE id = ?`, nodeID).Scan(&rev)
	return rev, err
}

// MarkStaleNodesOffline takes offline every node that has missed
// gpuportal.MissedHeartbeatsOffline heartbeats, and returns their ids. Only
// heartbeats missed while the portal listened count: a node needs that
// many heartbeats' time after listeningSince (when the leading portal
// could hear it, grace included) without one before it is offline.
func (db *DB) MarkStaleNodesOffline(ctx context.Context, now, listeningSince time.Time) ([]string, error) {
	var ids []string
	err := db.inTx(ctx, "mark stale nodes offline", func(tx *sql.Tx) error {
		missed := gpuportal.MissedHeartbeatsOffline
		rows, err := tx.QueryContext(ctx, `SELECT id FROM nodes WHERE online = 1 AND last_heartbeat_at < ? - ? * heartbeat_seconds AND ? <= ? - ? * heartbeat_seconds`,
			now.Unix(), missed, listeningSince.Unix(), now.Unix(), missed)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if len(ids) == 0 {
			return nil
		}
		// Heartbeats do not wait for the writer lock: one may have come
		// since the SELECT, and the condition is checked again on the row.
		stale := ids[:0]
		for _, id := range ids {
			res, err := tx.ExecContext(ctx, `UPDATE nodes SET online = 0 WHERE id = ? AND online = 1 AND last_heartbeat_at < ? - ? * heartbeat_seconds`, id, now.Unix(), missed)
			if err != nil {
				return named("update nodes", err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				stale = append(stale, id)
			}
		}
		ids = stale
		return recomputeCapacity(ctx, tx)
	})
	return ids, err
}

// SetDrain drains (or undrains) a node: a draining node keeps its running
// workloads but its GPUs are no longer offered. Audited.
func (db *DB) SetDrain(ctx context.Context, actor *gpuportal.User, nodeID string, drain bool) error {
	if !actor.IsAdmin() {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins can drain nodes.")
	}
	err := db.inTx(ctx, "set drain", func(tx *sql.Tx) error {
		var old bool
		err := tx.QueryRowContext(ctx, `SELECT drain FROM nodes WHERE id = ?`, nodeID).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Node %s not found.", nodeID)
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE nodes SET drain = ?, drain_note = '' WHERE id = ?`, drain, nodeID); err != nil {
			return named("update nodes", err)
		}
		if err := db.audit(ctx, tx, actor.ID, "node.drain", "node/"+nodeID, map[string]bool{"drain": old}, map[string]bool{"drain": drain}); err != nil {
			return named("audit", err)
		}
		return recomputeCapacity(ctx, tx)
	})
	return db.kickAfter(ctx, err)
}

// Nodes lists the fleet with each node's GPUs and their latest telemetry.
func (db *DB) Nodes(ctx context.Context) ([]gpuportal.Node, error) {
	return db.nodesOf(ctx, nil, true)
}

// NodesByID is Nodes for some nodes only (a page of the fleet), in the
// fleet's order.
func (db *DB) NodesByID(ctx context.Context, ids []string) ([]gpuportal.Node, error) {
	if len(ids) == 0 {
		return []gpuportal.Node{}, nil
	}
	return db.nodesOf(ctx, ids, true)
}

// FleetGlance is the whole fleet at a glance: every node, and of its GPUs
// only their UUID, index and health — what the fleet page counts and
// filters by, a fraction of Nodes' read at 10,000 GPUs.
func (db *DB) FleetGlance(ctx context.Context) ([]gpuportal.Node, error) {
	return db.nodesOf(ctx, nil, false)
}

// nodesOf reads the nodes ids names (nil: all), with their GPUs' whole
// telemetry when full, else only their UUID, index and health.
func (db *DB) nodesOf(ctx context.Context, ids []string, full bool) ([]gpuportal.Node, error) {
	nodeWhere, gpuWhere, args := "", "", anys(ids)
	if ids != nil {
		in := "IN (?" + repeatArg(len(ids)-1) + ")"
		nodeWhere, gpuWhere = "WHERE id "+in, "WHERE node_id "+in
	}
	rows, err := db.read.QueryContext(ctx, `SELECT id, hostname, region_id, online, drain, last_heartbeat_at,
		CASE WHEN token_revoked_at IS NOT NULL THEN 'revoked' WHEN rotate_token = 1 THEN 'rotating' ELSE 'active' END, token_rotated_at, drain_note
		FROM nodes `+nodeWhere+` ORDER BY region_id, hostname, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := []gpuportal.Node{}
	index := map[string]int{}
	for rows.Next() {
		var n gpuportal.Node
		var online, drain bool
		var hb, rotated sql.NullInt64
		if err := rows.Scan(&n.ID, &n.Hostname, &n.Region, &online, &drain, &hb, &n.TokenState, &rotated, &n.DrainNote); err != nil {
			rows.Close()
			return nil, err
		}
		n.State = nodeState(online, drain)
		n.LastHeartbeatAt = fromNullUnix(hb)
		n.TokenRotatedAt = fromNullUnix(rotated)
		n.GPUs = []gpuportal.GPU{}
		index[n.ID] = len(nodes)
		nodes = append(nodes, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Of each GPU: all of it, or (at a glance, counted and not shown, in
	// any order) its UUID, index and health.
	query := `SELECT uuid, node_id, idx, healthy, model_id, name, memory_total_mib, memory_used_mib, utilization_percent, temperature_c, power_w, busy_after_instance,
		fault_reason, fault_xid, fault_at FROM gpus ` + gpuWhere + ` ORDER BY node_id, idx`
	if !full {
		query = `SELECT uuid, node_id, idx, healthy FROM gpus`
	}
	grows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list gpus: %w", err)
	}
	defer grows.Close()
	for grows.Next() {
		var g gpuportal.GPU
		var node string
		var busy, faultAt sql.NullInt64
		dest := []any{&g.UUID, &node, &g.Index, &g.Healthy}
		if full {
			dest = append(dest, &g.Model, &g.Name, &g.MemoryTotalMiB, &g.MemoryUsedMiB, &g.UtilizationPercent, &g.TemperatureC, &g.PowerW, &busy,
				&g.Health.Reason, &g.Health.XID, &faultAt)
		}
		if err := grows.Scan(dest...); err != nil {
			return nil, err
		}
		g.Health.Healthy, g.Health.At = !faultAt.Valid, fromNullUnix(faultAt)
		if busy.Valid {
			g.BusyAfterInstance = &busy.Int64
		}
		if i, ok := index[node]; ok {
			nodes[i].GPUs = append(nodes[i].GPUs, g)
		}
	}
	return nodes, grows.Err()
}

func nodeState(online, drain bool) string {
	switch {
	case !online:
		return gpuportal.NodeOffline
	case drain:
		return gpuportal.NodeDraining
	}
	return gpuportal.NodeOnline
}

// GPUUses is, by GPU UUID, what every GPU in use does now: the instance on
// it and the active reservation holding it, with their owner (a GPU doing
// nothing is not listed).
func (db *DB) GPUUses(ctx context.Context) (map[string]gpuportal.GPUUse, error) {
	type row struct {
		uuid                         string
		instance, instanceUser       sql.NullInt64
		kind                         sql.NullString
		reservation, reservationUser sql.NullInt64
	}
	rows, err := scanAll(ctx, db.read, func(r *sql.Rows, x *row) error {
		return r.Scan(&x.uuid, &x.instance, &x.kind, &x.instanceUser, &x.reservation, &x.reservationUser)
	}, `SELECT g.uuid, i.id, i.kind, i.user_id, ar.id, ar.user_id FROM gpus g
		LEFT JOIN instance_gpus ig ON ig.gpu_uuid = g.uuid LEFT JOIN instances i ON i.id = ig.instance_id
		LEFT JOIN reservation_gpus rg ON rg.gpu_uuid = g.uuid LEFT JOIN reservations ar ON ar.id = rg.reservation_id AND ar.status = 'active'
		WHERE i.id IS NOT NULL OR ar.id IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("GPU uses: %w", err)
	}
	out := map[string]gpuportal.GPUUse{}
	owners := map[int64]*gpuportal.User{}
	for _, r := range rows {
		u := out[r.uuid]
		if r.instance.Valid {
			u.InstanceID, u.InstanceKind, u.UserID = r.instance.Int64, gpuportal.InstanceKind(r.kind.String), r.instanceUser.Int64
		}
		if r.reservation.Valid {
			u.ReservationID = r.reservation.Int64
			if u.UserID == 0 {
				u.UserID = r.reservationUser.Int64
			}
		}
		owners[u.UserID] = nil
		out[r.uuid] = u
	}
	for id := range owners {
		if owners[id], err = db.UserByID(ctx, id); err != nil {
			return nil, err
		}
	}
	for k, u := range out {
		if o := owners[u.UserID]; o != nil {
			u.UserName, u.UserEmail = o.Name, o.Email
			out[k] = u
		}
	}
	return out, nil
}
