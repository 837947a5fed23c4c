package chat

import (
	"fmt"

	"github.com/agentryhq/agentry/internal/fault"
)

// Errors of a chat request, in the fault vocabulary (the API maps them).
var (
	ErrAgentNotFound = fault.NotFound("agent not found")
	ErrAgentDisabled = fault.Conflict("agent_disabled", "agent is disabled")
	// ErrResponseNotFound: the feedback tuple does not match the action log.
	ErrResponseNotFound = fault.NotFound("no such response for this agent, session and run")
	ErrSessionNotFound  = fault.NotFound("session not found")
)

// invalid is bad input, naming the field (400).
func invalid(field, format string, args ...any) error {
	return &fault.Invalid{Field: field, Msg: fmt.Sprintf(format, args...)}
}
