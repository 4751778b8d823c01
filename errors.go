// Package gpuportal is the vocabulary of the GPU rental platform: the domain
// types, error codes, the clock and the pure rules (pricing, cancellation
// fees, validation). It imports nothing from HTTP, SQL or templates; the
// subpackages implement persistence (store), the web portal (web), the
// scheduler and the node agent on top of it.
package gpuportal

import (
	"errors"
	"fmt"
)

// Error codes. The web layer maps each to one HTTP status (see DESIGN §6).
const (
	EINVALID      = "invalid_input"
	EUNAUTHORIZED = "unauthorized"
	EFORBIDDEN    = "forbidden"
	ENOTFOUND     = "not_found"
	ECONFLICT     = "conflict"
	ECAPACITY     = "capacity_unavailable"
	EGONE         = "gone"
	EPOLICY       = "policy_violation"
	EFUNDS        = "insufficient_funds" // 402: top up first
	ERATELIMITED  = "rate_limited"
	ETOOLARGE     = "too_large"   // 413: more than the room left (a volume's free space)
	EUNAVAILABLE  = "unavailable" // 503: the portal cannot do it now (its database disk is full); nothing changed
	EINTERNAL     = "internal"
)

// Error is an error a user can act on: a code, a human message and, for
// policy violations and invalid input, the field at fault.
type Error struct {
	Code    string
	Message string
	Field   string
	// Format and Args are Message before formatting, so the web layer can
	// translate it (the English format string is the translation key).
	Format string
	Args   []any
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("gpuportal error: code=%s field=%s message=%s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("gpuportal error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Format: format, Args: args}
}

// FieldErrorf returns an *Error about one input field.
func FieldErrorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...), Format: format, Args: args}
}

// ErrorCode returns the code of an *Error in err's chain, or EINTERNAL for
// any other non-nil error.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the user-facing message of err. Internal errors are
// never shown to users: they get a generic message and the details go to
// the log.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

// ErrorField returns the field of an *Error in err's chain, if any.
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// ValidationErrors is every problem found in one input (a policies
// document), each naming its field. Its code, message and field are those
// of the first problem.
type ValidationErrors []*Error

func (e ValidationErrors) Error() string {
	if len(e) == 0 {
		return "gpuportal error: invalid input"
	}
	return fmt.Sprintf("%d problems, first: %s", len(e), e[0].Error())
}

// Unwrap lets errors.As find the first problem.
func (e ValidationErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, x := range e {
		out[i] = x
	}
	return out
}
