package gpuportal

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/mail"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// Roles a user can have.
const (
	RoleCustomer = "customer"
	RoleAdmin    = "admin"
)

// Languages the portal speaks.
const (
	LangEnglish = "en"
	LangChinese = "zh-CN"
)

// User is an account: a customer or an admin.
type User struct {
	ID        int64     `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	Phone     string    `json:"phone,omitempty"`
	Role      string    `json:"role"`
	Lang      string    `json:"lang"`
	CreatedAt time.Time `json:"created_at"`
	// SessionVersion is stamped into every session cookie; bumping it
	// (logout, password change, promotion) ends all of them.
	SessionVersion int64 `json:"-"`
	// Disabled: an admin closed the account; it cannot sign in.
	Disabled bool `json:"disabled,omitempty"`
	// EmailVerified, PhoneVerified: the address answered its link, the
	// phone its code; nothing but that is sent to them before.
	EmailVerified bool `json:"email_verified"`
	PhoneVerified bool `json:"phone_verified"`
	// Acting: this is a team's account, and a member acts for it (the
	// request named the team); nil for one's own account.
	Acting *Acting `json:"-"`
	// Token: the limits of the API token the request came with, if any.
	Token *TokenLimits `json:"-"`
}

// IsAdmin reports whether the user administers the platform.
func (u *User) IsAdmin() bool { return u != nil && u.Role == RoleAdmin }

// CanSee says whether the user may see an object that ownerID owns: its
// owner and admins may, and nil (the system itself) sees everything. The
// store answers not_found for another customer's object, never
// forbidden, so ids tell nothing of what others have.
func (u *User) CanSee(ownerID int64) bool {
	return u == nil || u.ID == ownerID || u.IsAdmin()
}

// SignUp is what a new customer submits.
type SignUp struct {
	Email    string `json:"email" form:"email"`
	Password string `json:"password" form:"password"`
	Name     string `json:"name" form:"name"`
	Phone    string `json:"phone" form:"phone"`
}

// MinPasswordLength is the shortest password accepted.
const MinPasswordLength = 10

// Normalize trims the fields and lower-cases the email.
func (s *SignUp) Normalize() {
	s.Email = NormalizeEmail(s.Email)
	s.Name = strings.TrimSpace(s.Name)
	s.Phone = strings.TrimSpace(s.Phone)
}

// Validate checks a sign-up, reporting every field at fault at once (a
// ValidationErrors when more than one is), so a person fixes them in one go.
func (s *SignUp) Validate() error {
	var errs ValidationErrors
	add := func(err error) {
		var e *Error
		if errors.As(err, &e) {
			errs = append(errs, e)
		}
	}
	add(ValidateEmail(s.Email))
	add(ValidatePassword(s.Password))
	if s.Name == "" {
		add(FieldErrorf(EINVALID, "name", "Please enter your name."))
	} else if utf8.RuneCountInString(s.Name) > 100 {
		add(FieldErrorf(EINVALID, "name", "The name must be at most 100 characters."))
	}
	add(ValidatePhone(s.Phone))
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errs
}

// NormalizeEmail trims and lower-cases an email address.
func NormalizeEmail(email string) string {
	return strings.ToLower(strings.TrimSpace(email))
}

// ValidateEmail checks that email is a plain address like "a@b.cn".
func ValidateEmail(email string) error {
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Address != email || len(email) > 254 || !strings.Contains(email[strings.LastIndexByte(email, '@'):], ".") {
		return FieldErrorf(EINVALID, "email", "Please enter a valid email address.")
	}
	return nil
}

// ValidatePassword checks the password length (bcrypt reads at most 72 bytes).
func ValidatePassword(pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLength {
		return FieldErrorf(EINVALID, "password", "The password must be at least %d characters.", MinPasswordLength)
	}
	if len(pw) > 72 {
		return FieldErrorf(EINVALID, "password", "The password must be at most 72 bytes.")
	}
	return nil
}

// ValidatePhone accepts an empty phone or an international number like
// "+8613800138000" (digits, optional leading +, 6–16 digits).
func ValidatePhone(phone string) error {
	if phone == "" {
		return nil
	}
	digits := strings.TrimPrefix(phone, "+")
	if len(digits) < 6 || len(digits) > 16 {
		return FieldErrorf(EINVALID, "phone", "Please enter a phone number like +8613800138000.")
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return FieldErrorf(EINVALID, "phone", "Please enter a phone number like +8613800138000.")
		}
	}
	return nil
}

// ValidLang reports whether lang is a language the portal speaks.
func ValidLang(lang string) bool { return lang == LangEnglish || lang == LangChinese }

// PasswordCost is bcrypt's work factor. Tests lower it to bcrypt.MinCost
// (hashing at the default cost dominates a suite under -race); nothing else
// should change it.
var PasswordCost = bcrypt.DefaultCost

// HashPassword hashes a password with bcrypt.
func HashPassword(pw string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), PasswordCost)
	return string(h), err
}

// CheckPassword reports whether pw matches the bcrypt hash.
func CheckPassword(hash, pw string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) == nil
}

// dummyHash is compared against when an account does not exist, so that a
// login for an unknown email takes as long as one with a wrong password:
// made at PasswordCost, when first needed (not at every program's start).
var dummyHash struct {
	sync.Mutex
	cost int
	hash []byte
}

// WasteHashTime spends the time a password check would take.
func WasteHashTime(pw string) {
	dummyHash.Lock()
	if dummyHash.hash == nil || dummyHash.cost != PasswordCost {
		dummyHash.hash, _ = bcrypt.GenerateFromPassword([]byte("not a real password"), PasswordCost)
		dummyHash.cost = PasswordCost
	}
	hash := dummyHash.hash
	dummyHash.Unlock()
	_ = bcrypt.CompareHashAndPassword(hash, []byte(pw))
}

// APIToken is a named bearer token of a user. The secret is shown once at
// creation; only its hash is stored.
type APIToken struct {
	ID         int64      `json:"id"`
	UserID     int64      `json:"-"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	// TeamID: the token acts for this team only; Scope: "write" (the
	// default) or "read" (403 on every change).
	TeamID *int64 `json:"team_id,omitempty"`
	Scope  string `json:"scope"`
	// MadeBy is its maker's address (on a team's list of tokens).
	MadeBy string `json:"made_by,omitempty"`
}

// Token scopes.
const (
	ScopeWrite = "write"
	ScopeRead  = "read"
)

// TokenLimits is what the API token a request came with allows: one
// team only (TeamID), and reading only.
type TokenLimits struct {
	TeamID   int64
	ReadOnly bool
}

// NewSecret returns a random token with a recognisable prefix, e.g.
// "gpp_…" for API tokens, "gpn_…" for node tokens.
func NewSecret(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// HashSecret is how tokens are stored: SHA-256, since they are random and
// long (no need for a slow hash), hex encoded.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ValidateTokenName checks the name a user gives an API token.
func ValidateTokenName(name string) error {
	if strings.TrimSpace(name) == "" {
		return FieldErrorf(EINVALID, "name", "Please name the token (for example, the script that uses it).")
	}
	if utf8.RuneCountInString(name) > 64 {
		return FieldErrorf(EINVALID, "name", "The token name must be at most 64 characters.")
	}
	return nil
}
