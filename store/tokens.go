package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"gpuportal"
)

// CreateAPIToken creates a named API token for a user and returns it with
// its secret, which is never stored and cannot be shown again.
func (db *DB) CreateAPIToken(ctx context.Context, userID int64, name string) (*gpuportal.APIToken, string, error) {
	return db.CreateScopedToken(ctx, userID, name, 0, gpuportal.ScopeWrite)
}

// CreateScopedToken is CreateAPIToken for one team only (teamID > 0, of
// which the user must be a member) and/or for reading only.
func (db *DB) CreateScopedToken(ctx context.Context, userID int64, name string, teamID int64, scope string) (*gpuportal.APIToken, string, error) {
	name = strings.TrimSpace(name)
	if err := gpuportal.ValidateTokenName(name); err != nil {
		return nil, "", err
	}
	if scope == "" {
		scope = gpuportal.ScopeWrite
	}
	if scope != gpuportal.ScopeWrite && scope != gpuportal.ScopeRead {
		return nil, "", gpuportal.FieldErrorf(gpuportal.EINVALID, "scope", "A token's scope is read or write.")
	}
	var team sql.NullInt64
	if teamID != 0 {
		if _, err := db.teamOf(ctx, db.read, &gpuportal.User{ID: userID}, teamID); err != nil {
			return nil, "", gpuportal.FieldErrorf(gpuportal.ENOTFOUND, "team_id", "Team %d not found.", teamID)
		}
		team = sql.NullInt64{Int64: teamID, Valid: true}
	}
	secret := gpuportal.NewSecret("gpp_")
	t := &gpuportal.APIToken{UserID: userID, Name: name, Prefix: secret[:8], CreatedAt: db.now(), Scope: scope}
	if team.Valid {
		t.TeamID = &team.Int64
	}
	err := db.write.QueryRowContext(ctx, `INSERT INTO api_tokens (user_id, name, prefix, token_hash, created_at, team_id, scope) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		userID, t.Name, t.Prefix, gpuportal.HashSecret(secret), unix(t.CreatedAt), team, scope).Scan(&t.ID)
	if err != nil {
		return nil, "", fmt.Errorf("create api token: %w", err)
	}
	return t, secret, nil
}

// APITokens lists a user's live (unrevoked) tokens, newest first.
func (db *DB) APITokens(ctx context.Context, userID int64) ([]gpuportal.APIToken, error) {
	return db.tokensWhere(ctx, `user_id = ?`, userID)
}

// tokensWhere lists the live tokens a condition picks, newest first, with
// their makers' addresses.
func (db *DB) tokensWhere(ctx context.Context, cond string, args ...any) ([]gpuportal.APIToken, error) {
	list, err := scanAll(ctx, db.read, func(r *sql.Rows, t *gpuportal.APIToken) error {
		var created int64
		var used sql.NullInt64
		err := r.Scan(&t.ID, &t.UserID, &t.Name, &t.Prefix, &created, &used, &t.TeamID, &t.Scope, &t.MadeBy)
		t.CreatedAt, t.LastUsedAt = fromUnix(created), fromNullUnix(used)
		return err
	}, `SELECT t.id, t.user_id, t.name, t.prefix, t.created_at, t.last_used_at, t.team_id, t.scope, u.email FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.`+cond+` AND t.revoked_at IS NULL ORDER BY t.id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list api tokens: %w", err)
	}
	if list == nil {
		list = []gpuportal.APIToken{}
	}
	return list, nil
}

// TeamTokens are the live tokens members made for team id (its owners and
// admins see and revoke them all).
func (db *DB) TeamTokens(ctx context.Context, user *gpuportal.User, id int64) ([]gpuportal.APIToken, error) {
	if _, err := db.teamAllows(ctx, db.read, user, id, gpuportal.AreaMembers, true); err != nil {
		return nil, err
	}
	return db.tokensWhere(ctx, `team_id = ?`, id)
}

// RevokeTeamToken revokes a token made for team id (owners and admins);
// a token of another team is not_found.
func (db *DB) RevokeTeamToken(ctx context.Context, user *gpuportal.User, id, tokenID int64) error {
	return db.inTx(ctx, "revoke team token", func(tx *sql.Tx) error {
		if _, err := db.teamAllows(ctx, tx, user, id, gpuportal.AreaMembers, true); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND team_id = ? AND revoked_at IS NULL`, unix(db.now()), tokenID, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Token %d not found.", tokenID)
		}
		return db.teamAudit(ctx, tx, id, user.ID, "team.token_revoke", fmt.Sprintf("team/%d/token/%d", id, tokenID), nil, nil)
	})
}

// RevokeAPIToken revokes one of the user's tokens. Another user's token is
// not_found, exactly like a token that does not exist.
func (db *DB) RevokeAPIToken(ctx context.Context, userID, tokenID int64) error {
	res, err := db.write.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL`,
		unix(db.now()), tokenID, userID)
	if err != nil {
		return fmt.Errorf("revoke api token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "Token not found.")
	}
	return nil
}

// revokeAllAPITokens revokes every live token of the user in tx and says
// how many there were.
func (db *DB) revokeAllAPITokens(ctx context.Context, tx *sql.Tx, userID int64) (int64, error) {
	res, err := tx.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`, unix(db.now()), userID)
	if err != nil {
		return 0, fmt.Errorf("revoke api tokens: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// UserByAPIToken returns the owner of a live token; a wrong or revoked
// token is unauthorized.
func (db *DB) UserByAPIToken(ctx context.Context, secret string) (*gpuportal.User, error) {
	// One query for the token and its user: every API request makes it.
	var tokenID int64
	var used, team sql.NullInt64
	var scope string
	var u gpuportal.User
	var created int64
	err := db.read.QueryRowContext(ctx, `SELECT t.id, t.last_used_at, t.team_id, t.scope, u.id, u.email, u.name, u.phone, u.role, u.lang, u.created_at, u.session_version, u.disabled_at IS NOT NULL
		FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = ? AND t.revoked_at IS NULL`,
		gpuportal.HashSecret(secret)).Scan(&tokenID, &used, &team, &scope, &u.ID, &u.Email, &u.Name, &u.Phone, &u.Role, &u.Lang, &created, &u.SessionVersion, &u.Disabled)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && u.Disabled) {
		return nil, gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "The API token is invalid or has been revoked.")
	} else if err != nil {
		return nil, fmt.Errorf("look up api token: %w", err)
	}
	u.CreatedAt = fromUnix(created)
	if team.Valid || scope == gpuportal.ScopeRead {
		u.Token = &gpuportal.TokenLimits{TeamID: team.Int64, ReadOnly: scope == gpuportal.ScopeRead}
	}
	// Record use at most once a minute: scripts can call many times a second
	// and a write per request would compete with bookings for the writer.
	if now := db.now(); !used.Valid || now.Unix()-used.Int64 >= 60 {
		if _, err := db.write.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = ? WHERE id = ?`, unix(now), tokenID); storageFailure(err) {
			// A full disk must not lock scripts out of reading: "last
			// used" waits; the request's own writes say 503.
			db.writesFailing.Store(true)
		} else if err != nil {
			return nil, fmt.Errorf("touch api token: %w", err)
		}
	}
	return &u, nil
}
