package chat

import (
	"errors"
	"fmt"
)

// Errors the API maps to status codes.
var (
	ErrAgentNotFound = errors.New("agent not found")
	ErrAgentDisabled = errors.New("agent is disabled")
	// ErrResponseNotFound: the feedback tuple does not match the action log.
	ErrResponseNotFound = errors.New("no such response for this agent, session and run")
	ErrSessionNotFound  = errors.New("session not found")
)

// InvalidError is bad input, naming the field.
type InvalidError struct {
	Field string
	Msg   string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ForbiddenError is a request the caller may not make (role or allowlist).
type ForbiddenError struct {
	Code string // forbidden, not_allowed
	Msg  string
}

func (e *ForbiddenError) Error() string { return e.Msg }
