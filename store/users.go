package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"gpuportal"
)

const userColumns = `id, email, name, phone, role, lang, created_at, session_version, disabled_at IS NOT NULL, email_verified_at IS NOT NULL, phone_verified_at IS NOT NULL`

func scanUser(row interface{ Scan(...any) error }) (*gpuportal.User, error) {
	var u gpuportal.User
	var created int64
	if err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Phone, &u.Role, &u.Lang, &created, &u.SessionVersion, &u.Disabled, &u.EmailVerified, &u.PhoneVerified); err != nil {
		return nil, err
	}
	u.CreatedAt = fromUnix(created)
	return &u, nil
}

// CreateUser validates a sign-up and creates the account with the given
// role. A taken email is a conflict.
func (db *DB) CreateUser(ctx context.Context, s gpuportal.SignUp, role string, lang string) (*gpuportal.User, error) {
	s.Normalize()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if lang != "" && !gpuportal.ValidLang(lang) {
		lang = ""
	}
	hash, err := gpuportal.HashPassword(s.Password)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	return db.createUser(ctx, s, role, lang, hash)
}

// noLogin is the password hash of an account nobody can log in to: no
// password matches it (it is not a bcrypt hash).
const noLogin = "!no-login"

// CreateLoginlessUser creates an account nobody can log in to, for the
// simulator's customers (a throwaway store; hashing a password for each
// would only cost time).
func (db *DB) CreateLoginlessUser(ctx context.Context, email, name, role string) (*gpuportal.User, error) {
	s := gpuportal.SignUp{Email: email, Name: name, Password: noLogin + "-unused"}
	s.Normalize()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return db.createUser(ctx, s, role, "", noLogin)
}

func (db *DB) createUser(ctx context.Context, s gpuportal.SignUp, role, lang, hash string) (*gpuportal.User, error) {
	var u *gpuportal.User
	err := db.inTx(ctx, "create user", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE email = ?`, s.Email).Scan(&n); err != nil {
			return named("read users", err)
		}
		if n > 0 {
			return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "email", "An account with this email already exists; please log in.")
		}
		row := tx.QueryRowContext(ctx, `INSERT INTO users (email, name, phone, password_hash, role, lang, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING `+userColumns,
			s.Email, s.Name, s.Phone, hash, role, lang, unix(db.now()))
		var err error
		if u, err = scanUser(row); err != nil {
			return err
		}
		// Every user has an account (migration 0009 gave one to those before).
		if _, err = tx.ExecContext(ctx, `INSERT INTO accounts (user_id) VALUES (?)`, u.ID); err != nil {
			return err
		}
		// An operator's admin (and the simulator's customers) need no
		// proof of their address; a customer's email gets its link.
		if role == gpuportal.RoleAdmin || hash == noLogin {
			now := unix(db.Wall.Now())
			if _, err := tx.ExecContext(ctx, `UPDATE users SET email_verified_at = ?, phone_verified_at = CASE WHEN phone <> '' THEN CAST(? AS BIGINT) END WHERE id = ?`, now, now, u.ID); err != nil {
				return named("update users", err)
			}
			u.EmailVerified, u.PhoneVerified = true, u.Phone != ""
			return nil
		}
		if db.Channels[gpuportal.ChannelEmail] {
			return db.queueEmailVerification(ctx, tx, u.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// EnsureAdmin makes sure an admin with this email exists and has this
// password (the PORTAL_ADMIN_EMAIL/PASSWORD bootstrap and `portal admin
// create`). An existing admin gets the password (and loses its sessions).
// An existing customer account is promoted only when promote is set —
// anyone may have registered that email first — and a promotion ends
// every session of the account and revokes its API tokens, so nothing the
// customer held carries admin rights.
func (db *DB) EnsureAdmin(ctx context.Context, email, password, name string, promote bool) (*gpuportal.User, error) {
	email = gpuportal.NormalizeEmail(email)
	if err := gpuportal.ValidateEmail(email); err != nil {
		return nil, err
	}
	if err := gpuportal.ValidatePassword(password); err != nil {
		return nil, err
	}
	existing, err := db.UserByEmail(ctx, email)
	if gpuportal.ErrorCode(err) == gpuportal.ENOTFOUND {
		if name == "" {
			name = "Administrator"
		}
		return db.CreateUser(ctx, gpuportal.SignUp{Email: email, Password: password, Name: name}, gpuportal.RoleAdmin, "")
	} else if err != nil {
		return nil, err
	}
	if existing.IsAdmin() {
		// Already an admin with this password (every start with
		// PORTAL_ADMIN_EMAIL): nothing changes, no session ends.
		if _, err := db.Authenticate(ctx, email, password); err == nil {
			return existing, nil
		}
	}
	if !existing.IsAdmin() && !promote {
		return nil, gpuportal.FieldErrorf(gpuportal.ECONFLICT, "email", "%s is a customer account (created %s); promoting it to admin needs --promote (PORTAL_ADMIN_PROMOTE=1), which also ends its sessions and revokes its API tokens.",
			email, existing.CreatedAt.Format("2006-01-02"))
	}
	hash, err := gpuportal.HashPassword(password)
	if err != nil {
		return nil, err
	}
	err = db.inTx(ctx, "ensure admin", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE users SET role = 'admin', password_hash = ?, session_version = session_version + 1 WHERE id = ?`, hash, existing.ID); err != nil {
			return fmt.Errorf("promote admin: %w", err)
		}
		if existing.IsAdmin() {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`, unix(db.now()), existing.ID); err != nil {
			return fmt.Errorf("revoke the promoted account's tokens: %w", err)
		}
		return db.audit(ctx, tx, 0, "user.promote_admin", fmt.Sprintf("user/%d", existing.ID),
			map[string]string{"role": existing.Role}, map[string]string{"role": gpuportal.RoleAdmin, "sessions": "ended", "api_tokens": "revoked"})
	})
	if err != nil {
		return nil, err
	}
	return db.UserByID(ctx, existing.ID)
}

// UserByID returns a user, or not_found.
func (db *DB) UserByID(ctx context.Context, id int64) (*gpuportal.User, error) {
	u, err := scanUser(db.read.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "User not found.")
	}
	return u, err
}

// UserByEmail returns a user, or not_found.
func (db *DB) UserByEmail(ctx context.Context, email string) (*gpuportal.User, error) {
	u, err := scanUser(db.read.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE email = ?`, gpuportal.NormalizeEmail(email)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "User not found.")
	}
	return u, err
}

// ErrDisabled answers the right password of a disabled account.
var ErrDisabled = gpuportal.Errorf(gpuportal.EFORBIDDEN, "This account is disabled; contact support.")

// ErrBadCredentials is the one answer to a wrong email or a wrong password,
// so that a login form does not reveal which accounts exist.
var ErrBadCredentials = gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "Wrong email or password.")

// Authenticate checks an email and password.
func (db *DB) Authenticate(ctx context.Context, email, password string) (*gpuportal.User, error) {
	var id int64
	var hash string
	err := db.read.QueryRowContext(ctx, `SELECT id, password_hash FROM users WHERE email = ?`, gpuportal.NormalizeEmail(email)).Scan(&id, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		gpuportal.WasteHashTime(password)
		return nil, ErrBadCredentials
	} else if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if !gpuportal.CheckPassword(hash, password) {
		return nil, ErrBadCredentials
	}
	u, err := db.UserByID(ctx, id)
	if err == nil && u.Disabled {
		return nil, ErrDisabled
	}
	return u, err
}

// ProfileUpdate is what a user can change in their settings.
type ProfileUpdate struct {
	Name  string `json:"name" form:"name"`
	Phone string `json:"phone" form:"phone"`
}

// UpdateProfile changes a user's name and phone.
func (db *DB) UpdateProfile(ctx context.Context, userID int64, p ProfileUpdate) (*gpuportal.User, error) {
	p.Name = strings.TrimSpace(p.Name)
	p.Phone = strings.TrimSpace(p.Phone)
	s := gpuportal.SignUp{Email: "x@example.com", Password: strings.Repeat("x", gpuportal.MinPasswordLength), Name: p.Name, Phone: p.Phone}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	// A new phone number is unverified until its code comes back.
	if _, err := db.write.ExecContext(ctx, `UPDATE users SET name = ?, phone_verified_at = CASE WHEN phone = ? THEN phone_verified_at END, phone = ? WHERE id = ?`,
		p.Name, p.Phone, p.Phone, userID); err != nil {
		return nil, fmt.Errorf("update profile: %w", err)
	}
	return db.UserByID(ctx, userID)
}

// SetUserLang remembers a user's language.
func (db *DB) SetUserLang(ctx context.Context, userID int64, lang string) error {
	if !gpuportal.ValidLang(lang) {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "lang", "Unknown language %q.", lang)
	}
	_, err := db.write.ExecContext(ctx, `UPDATE users SET lang = ? WHERE id = ?`, lang, userID)
	return err
}
