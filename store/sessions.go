package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// Sessions are kept in real time (db.Wall), not the business clock: they
// are live connections, and their staleness is measured in wall seconds.

// sessionOpenSQL is the condition for a session row that is open now:
// not closed, marked seen by its portal lately, its instance still
// running. (An instance's end needs no hook: its sessions stop counting.)
const sessionOpenSQL = `s.closed_at IS NULL AND s.seen_at >= ? AND (s.kind IN ('log', 'volume') OR i.status IN ('running', 'interrupting'))`

// SessionUser authorises a login into an instance: the key (by its
// fingerprint) must be one its owner registered, the owner's account
// active and the instance running. Every refusal reads the same to the
// client (which instance exists is not its business); err says why, for
// the log.
func (db *DB) SessionUser(ctx context.Context, instanceID int64, fingerprint string) (*gpuportal.User, error) {
	var userID int64
	var status gpuportal.InstanceStatus
	err := db.read.QueryRowContext(ctx, `SELECT i.user_id, i.status FROM instances i
		JOIN ssh_keys k ON k.user_id = i.user_id AND k.fingerprint = ?
		JOIN users u ON u.id = i.user_id AND u.disabled_at IS NULL
		WHERE i.id = ?`, fingerprint, instanceID).Scan(&userID, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return db.teamSessionUser(ctx, instanceID, fingerprint)
	} else if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	if !gpuportal.AcceptsSessions(status) {
		return nil, notRunning(instanceID, status)
	}
	return db.UserByID(ctx, userID)
}

// teamSessionUser is SessionUser for a team's instance: the member whose
// key it is, when they may enter it (TeamMayChangeInstance).
func (db *DB) teamSessionUser(ctx context.Context, instanceID int64, fingerprint string) (*gpuportal.User, error) {
	type holder struct {
		person, owner int64
		status        gpuportal.InstanceStatus
		createdBy     *int64
	}
	list, err := scanAll(ctx, db.read, func(r *sql.Rows, h *holder) error { return r.Scan(&h.person, &h.owner, &h.status, &h.createdBy) },
		`SELECT k.user_id, i.user_id, i.status, i.created_by FROM ssh_keys k JOIN instances i ON i.id = ? JOIN users u ON u.id = k.user_id AND u.disabled_at IS NULL
		WHERE k.fingerprint = ?`, instanceID, fingerprint)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	for _, h := range list {
		if mayEnter(ctx, db.read, &gpuportal.User{ID: h.person}, instanceID, h.owner, h.createdBy) != nil {
			continue
		}
		if !gpuportal.AcceptsSessions(h.status) {
			return nil, notRunning(instanceID, h.status)
		}
		return db.UserByID(ctx, h.person)
	}
	return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Instance %d not found.", instanceID)
}

// sessionTarget reads the instance a session of kind goes into and
// returns its node: the user's own instance (admins included: nobody but
// the owner gets into a container), running — or, for its log, one that
// has run somewhere (the log stays on that node after the end too).
func sessionTarget(ctx context.Context, tx *sql.Tx, user *gpuportal.User, instanceID int64, kind string) (string, error) {
	var owner int64
	var status gpuportal.InstanceStatus
	var node sql.NullString
	var createdBy *int64
	err := tx.QueryRowContext(ctx, `SELECT user_id, status, coalesce(node_id, last_node_id), created_by FROM instances WHERE id = ?`, instanceID).Scan(&owner, &status, &node, &createdBy)
	if err == nil {
		// A team's instance: entered by its owners and admins, and by the
		// member who made it (acting for the team, or by their own key).
		err = mayEnter(ctx, tx, user, instanceID, owner, createdBy)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", gpuportal.Errorf(gpuportal.ENOTFOUND, "Instance %d not found.", instanceID)
	case gpuportal.ErrorCode(err) != gpuportal.EINTERNAL && err != nil:
		return "", err
	case err != nil:
		return "", fmt.Errorf("session instance: %w", err)
	case kind == gpuportal.SessionLog && !node.Valid:
		return "", gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d has not run yet: there is no log.", instanceID)
	case kind != gpuportal.SessionLog && (!gpuportal.AcceptsSessions(status) || !node.Valid):
		return "", notRunning(instanceID, status)
	}
	return node.String, nil
}

func notRunning(instanceID int64, status gpuportal.InstanceStatus) error {
	return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d is %s: sessions open only while it runs.", instanceID, status)
}

// OpenSession records a session its owner opens into a running instance
// and asks the instance's node (through its desired state) to connect out
// to url for it. A user has at most gpuportal.MaxSessionsPerUser groups
// open at once.
func (db *DB) OpenSession(ctx context.Context, user *gpuportal.User, instanceID int64, req gpuportal.SessionRequest, url string) (gpuportal.Session, error) {
	s := gpuportal.Session{InstanceID: instanceID, UserID: user.ID, Kind: req.Kind, Port: req.Port}
	switch req.Kind {
	case gpuportal.SessionShell, gpuportal.SessionTerminal, gpuportal.SessionExec, gpuportal.SessionSFTP, gpuportal.SessionLog, gpuportal.SessionVolume:
	case gpuportal.SessionTCP:
		if req.Port < 1 || req.Port > 65535 {
			return s, gpuportal.FieldErrorf(gpuportal.EINVALID, "port", "A port is a number from 1 to 65535.")
		}
		host, ok := gpuportal.ForwardHost(req.Host)
		if !ok {
			return s, gpuportal.FieldErrorf(gpuportal.EINVALID, "host", "%q is not a host name or an IP address.", req.Host)
		}
		req.Host = host
	default:
		return s, gpuportal.Errorf(gpuportal.EINVALID, "Unknown session kind %q.", req.Kind)
	}
	s.ID = req.ID
	if s.ID == "" {
		s.ID = gpuportal.NewSessionID()
	} else if len(s.ID) != 32 || strings.Trim(s.ID, "0123456789abcdef") != "" {
		return s, gpuportal.Errorf(gpuportal.EINVALID, "A session id is 32 hex digits.")
	}
	tty := ""
	if req.TTY != nil {
		raw, _ := json.Marshal(req.TTY)
		tty = string(raw)
	}
	env := ""
	if len(req.Env) > gpuportal.MaxSessionEnv {
		return s, gpuportal.Errorf(gpuportal.EINVALID, "A session sets at most %d variables.", gpuportal.MaxSessionEnv)
	}
	for _, kv := range req.Env {
		if name, value, _ := strings.Cut(kv, "="); !gpuportal.SessionEnvAllowed(name, value) {
			return s, gpuportal.Errorf(gpuportal.EINVALID, "A session may set its locale (LANG, LC_*) and TERM, not %q.", name)
		}
	}
	if len(req.Env) > 0 {
		raw, _ := json.Marshal(req.Env)
		env = string(raw)
	}
	now := db.Wall.Now()
	s.OpenedAt = now.Truncate(time.Second)
	err := db.inTx(ctx, "open session", func(tx *sql.Tx) error {
		var err error
		if req.Kind == gpuportal.SessionVolume {
			s.Node, err = db.volumeTarget(ctx, tx, user, req.VolumeID)
		} else {
			s.Node, err = sessionTarget(ctx, tx, user, instanceID, req.Kind)
		}
		if err != nil {
			return err
		}
		var groups int
		if err := tx.QueryRowContext(ctx, `SELECT count(DISTINCT s.grp) FROM `+db.indexedAs("sessions", "s", "sessions_open_by_user")+` LEFT JOIN instances i ON i.id = s.instance_id
			WHERE s.user_id = ? AND s.grp <> ? AND `+sessionOpenSQL, user.ID, req.Group, unix(now.Add(-gpuportal.SessionStaleAfter))).Scan(&groups); err != nil {
			return fmt.Errorf("count sessions: %w", err)
		}
		if groups >= gpuportal.MaxSessionsPerUser {
			return gpuportal.Errorf(gpuportal.ERATELIMITED, "You have %d sessions open, the most at once; close one first.", groups)
		}
		// The streams of this connection, and of the node, count too.
		stale := unix(now.Add(-gpuportal.SessionStaleAfter))
		var inGroup, onNode int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+db.indexedAs("sessions", "s", "sessions_open_by_user")+` LEFT JOIN instances i ON i.id = s.instance_id
			WHERE s.user_id = ? AND s.grp = ? AND `+sessionOpenSQL, user.ID, req.Group, stale).Scan(&inGroup); err != nil {
			return fmt.Errorf("count the connection's streams: %w", err)
		}
		if inGroup >= gpuportal.MaxStreamsPerConnection {
			return gpuportal.Errorf(gpuportal.ERATELIMITED, "This connection has %d channels open, the most at once; close one first.", inGroup)
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+db.indexedAs("sessions", "s", "sessions_open_by_node")+` LEFT JOIN instances i ON i.id = s.instance_id
			WHERE s.node_id = ? AND `+sessionOpenSQL, s.Node, stale).Scan(&onNode); err != nil {
			return fmt.Errorf("count the node's streams: %w", err)
		}
		if onNode >= gpuportal.MaxStreamsPerNode {
			return gpuportal.Errorf(gpuportal.EUNAVAILABLE, "The node this runs on has too many sessions open right now; try again shortly.")
		}
		var instance, volume sql.NullInt64
		if req.Kind == gpuportal.SessionVolume {
			volume = sql.NullInt64{Int64: req.VolumeID, Valid: true}
			s.InstanceID, s.VolumeID = 0, req.VolumeID
		} else {
			instance = sql.NullInt64{Int64: instanceID, Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, instance_id, volume_id, user_id, node_id, kind, command, port, tty, grp, url, opened_at, seen_at, env, agent_forward, host, log_offset)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			s.ID, instance, volume, user.ID, s.Node, req.Kind, req.Command, req.Port, tty, req.Group, url, unix(now), unix(now), env, req.AgentForward, req.Host, req.LogOffset); err != nil {
			return fmt.Errorf("open session: %w", err)
		}
		// Who entered which instance, when: once per connection (its
		// first stream), not per channel or forward of it.
		if inGroup == 0 {
			subject := fmt.Sprintf("instance/%d", instanceID)
			if req.Kind == gpuportal.SessionVolume {
				subject = fmt.Sprintf("volume/%d", req.VolumeID)
			}
			if err := db.audit(ctx, tx, user.ID, "session.open", subject, nil, map[string]string{"kind": req.Kind, "node": s.Node, "session": s.ID}); err != nil {
				return named("audit", err)
			}
		}
		return bumpNode(ctx, tx, s.Node)
	})
	if err != nil {
		return s, err
	}
	db.wake(ctx, s.Node)
	return s, nil
}

// ClaimSession is the agent of node connecting out for session id: it is
// that node's, not claimed before, not closed, and its instance still
// runs. A session is claimed once; what the agent is to run comes from
// the row, never from the agent.
func (db *DB) ClaimSession(ctx context.Context, node, id string) (gpuportal.DesiredSession, error) {
	var d gpuportal.DesiredSession
	err := db.inTx(ctx, "claim session", func(tx *sql.Tx) error {
		now := db.Wall.Now()
		var tty, env string
		err := tx.QueryRowContext(ctx, `SELECT `+desiredSessionColumns+` FROM sessions s LEFT JOIN instances i ON i.id = s.instance_id LEFT JOIN volumes v ON v.id = s.volume_id
			WHERE s.id = ? AND s.node_id = ? AND (s.kind = 'log' OR i.node_id = s.node_id OR (s.kind = 'volume' AND v.deleted_at IS NULL)) AND s.connected_at IS NULL AND `+sessionOpenSQL, id, node, unix(now.Add(-gpuportal.SessionStaleAfter))).
			Scan(&d.ID, &d.InstanceID, &d.Attempt, &d.Kind, &d.Command, &d.Port, &tty, &d.URL, &d.VolumeID, &d.VolumeSizeGiB, &d.VolumeReadOnly, &env, &d.AgentForward, &d.Host, &d.LogOffset)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "No session %s waits for this node.", id)
		} else if err != nil {
			return fmt.Errorf("read session: %w", err)
		}
		if env != "" {
			if err := json.Unmarshal([]byte(env), &d.Env); err != nil {
				return fmt.Errorf("session env: %w", err)
			}
		}
		if tty != "" {
			d.TTY = &gpuportal.TTY{}
			if err := json.Unmarshal([]byte(tty), d.TTY); err != nil {
				return fmt.Errorf("session tty: %w", err)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET connected_at = ? WHERE id = ?`, unix(now), id)
		return err
	})
	return d, err
}

// CheckAgentForward says whether node may open a connection to the
// client's SSH agent for session id: the session asked for forwarding,
// node claimed it, and it is still open.
func (db *DB) CheckAgentForward(ctx context.Context, node, id string) error {
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE id = ? AND node_id = ? AND agent_forward <> 0
		AND connected_at IS NOT NULL AND closed_at IS NULL`, id, node).Scan(&n); err != nil {
		return fmt.Errorf("read session: %w", err)
	}
	if n == 0 {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "No session %s of this node forwards an SSH agent.", id)
	}
	return nil
}

// CloseSession ends a session (its customer or its agent went away).
func (db *DB) CloseSession(ctx context.Context, id string) error {
	_, err := db.write.ExecContext(ctx, `UPDATE sessions SET closed_at = ? WHERE id = ? AND closed_at IS NULL`, unix(db.Wall.Now()), id)
	if err != nil {
		return fmt.Errorf("close session: %w", err)
	}
	return nil
}

// SeeSessions marks the sessions a portal holds as alive (every
// gpuportal.SessionSeenEvery), so that those of a portal that died stop
// counting once they go stale.
func (db *DB) SeeSessions(ctx context.Context, ids []string) error {
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 500)]
		ids = ids[len(batch):]
		args := []any{unix(db.Wall.Now())}
		for _, id := range batch {
			args = append(args, id)
		}
		if _, err := db.write.ExecContext(ctx, `UPDATE sessions SET seen_at = ? WHERE closed_at IS NULL AND id IN (?`+strings.Repeat(", ?", len(batch)-1)+`)`, args...); err != nil {
			return fmt.Errorf("see sessions: %w", err)
		}
	}
	return nil
}

// OpenSessions lists the sessions open now into an instance, oldest first.
func (db *DB) OpenSessions(ctx context.Context, instanceID int64) ([]gpuportal.Session, error) {
	out, err := scanAll(ctx, db.read, func(r *sql.Rows, s *gpuportal.Session) error {
		var opened int64
		err := r.Scan(&s.ID, &s.InstanceID, &s.UserID, &s.Node, &s.Kind, &s.Port, &opened)
		s.OpenedAt = fromUnix(opened)
		return err
	}, `SELECT s.id, s.instance_id, s.user_id, s.node_id, s.kind, s.port, s.opened_at FROM sessions s JOIN instances i ON i.id = s.instance_id
		WHERE s.instance_id = ? AND s.connected_at IS NOT NULL AND `+sessionOpenSQL+` ORDER BY s.opened_at, s.id`, instanceID, unix(db.Wall.Now().Add(-gpuportal.SessionStaleAfter)))
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	if out == nil {
		out = []gpuportal.Session{}
	}
	return out, nil
}

// desiredSessionColumns are what an agent is told of a session (a
// volume's has no instance, an instance's no volume).
const desiredSessionColumns = `s.id, coalesce(s.instance_id, 0), coalesce(i.attempt, 0), s.kind, s.command, s.port, s.tty, s.url, coalesce(s.volume_id, 0), coalesce(v.size_gib, 0), v.suspended_at IS NOT NULL, s.env, s.agent_forward <> 0, s.host, s.log_offset`

// desiredSessions lists the sessions node's agent should connect out for:
// opened, not yet claimed, still waiting (younger than the connect
// timeout).
func (db *DB) desiredSessions(ctx context.Context, node string) ([]gpuportal.DesiredSession, error) {
	now := db.Wall.Now()
	return scanAll(ctx, db.read, func(r *sql.Rows, d *gpuportal.DesiredSession) error {
		var tty, env string
		if err := r.Scan(&d.ID, &d.InstanceID, &d.Attempt, &d.Kind, &d.Command, &d.Port, &tty, &d.URL, &d.VolumeID, &d.VolumeSizeGiB, &d.VolumeReadOnly, &env, &d.AgentForward, &d.Host, &d.LogOffset); err != nil {
			return err
		}
		if env != "" {
			if err := json.Unmarshal([]byte(env), &d.Env); err != nil {
				return err
			}
		}
		if tty != "" {
			d.TTY = &gpuportal.TTY{}
			return json.Unmarshal([]byte(tty), d.TTY)
		}
		return nil
	}, `SELECT `+desiredSessionColumns+` FROM `+db.indexedAs("sessions", "s", "sessions_open_by_node")+` LEFT JOIN instances i ON i.id = s.instance_id LEFT JOIN volumes v ON v.id = s.volume_id
		WHERE s.node_id = ? AND s.connected_at IS NULL AND s.opened_at >= ? AND `+sessionOpenSQL+` ORDER BY s.opened_at, s.id`,
		node, unix(now.Add(-gpuportal.SessionConnectTimeout)), unix(now.Add(-gpuportal.SessionStaleAfter)))
}

// AppTokenTTL is how long a handed-over web-app token works (once).
const AppTokenTTL = 60 * time.Second

// CreateAppToken hands the owner of a running instance a one-time token
// for the origin of one of its ports (gpuportal.AppTokenTTL, once).
func (db *DB) CreateAppToken(ctx context.Context, user *gpuportal.User, instanceID int64, port int) (string, error) {
	if port < 1 || port > 65535 {
		return "", gpuportal.FieldErrorf(gpuportal.EINVALID, "port", "A port is a number from 1 to 65535.")
	}
	token := gpuportal.NewSecret("gpa_")
	now := db.Wall.Now()
	err := db.inTx(ctx, "create app token", func(tx *sql.Tx) error {
		if _, err := sessionTarget(ctx, tx, user, instanceID, gpuportal.SessionTCP); err != nil {
			return err
		}
		// Tokens long expired are of no use to anyone.
		if _, err := tx.ExecContext(ctx, `DELETE FROM app_tokens WHERE expires_at < ?`, unix(now.Add(-time.Hour))); err != nil {
			return named("delete from app_tokens", err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO app_tokens (token_hash, user_id, instance_id, port, expires_at) VALUES (?, ?, ?, ?, ?)`,
			gpuportal.HashSecret(token), user.ID, instanceID, port, unix(now.Add(AppTokenTTL)))
		return err
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// RedeemAppToken takes a handed-over token for an instance's port, once:
// it returns the user it was made for.
func (db *DB) RedeemAppToken(ctx context.Context, token string, instanceID int64, port int) (int64, error) {
	var userID int64
	err := db.inTx(ctx, "redeem app token", func(tx *sql.Tx) error {
		now := db.Wall.Now()
		err := tx.QueryRowContext(ctx, `UPDATE app_tokens SET used_at = ? WHERE token_hash = ? AND instance_id = ? AND port = ? AND used_at IS NULL AND expires_at >= ? RETURNING user_id`,
			unix(now), gpuportal.HashSecret(token), instanceID, port, unix(now)).Scan(&userID)
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "This link was used already or has expired: open the port again from the instance's page.")
		}
		return err
	})
	return userID, err
}
