// Package fault is the error vocabulary of the domain: a small set of kinds
// (invalid, not found, conflict, forbidden, budget, overloaded, upstream,
// unavailable, timeout) that every domain package returns, so the API maps
// an error to its HTTP status and envelope in one place (api/errors.go)
// instead of asking each feature in turn.
//
// Three shapes cover the domain:
//
//   - *Error: a failure with a fixed text, usually a sentinel a package
//     exports for errors.Is (`var ErrAgentNotFound = fault.NotFound(...)`)
//     and wraps with context (`fmt.Errorf("%w: %s", ErrX, detail)`);
//   - *Invalid and *Forbidden: bad input naming its field, and a refusal
//     naming its code, built where they happen;
//   - any domain type with context of its own (an approval already decided,
//     a cost rejection with its estimate) implements Fault itself.
//
// The package is a leaf: it imports nothing of the project and knows no
// HTTP; the kind decides the status in api/errors.go.
package fault

import (
	"errors"
	"time"
)

// Kind is what went wrong, as the caller sees it. The API turns it into
// the HTTP status (api/errors.go).
type Kind uint8

// The kinds of the vocabulary, with the status the API answers.
const (
	// KindInvalid: the request is wrong (400).
	KindInvalid Kind = iota + 1
	// KindBudget: a hard budget is exhausted (402).
	KindBudget
	// KindForbidden: the caller's role, a permission or a policy refuses (403).
	KindForbidden
	// KindNotFound: what the request names does not exist (404).
	KindNotFound
	// KindConflict: the current state refuses the request (409).
	KindConflict
	// KindOverloaded: a limit of the caller or of a provider is reached;
	// come back after RetryAfter (429).
	KindOverloaded
	// KindUpstream: a system the gateway called failed (a provider, an MCP
	// server, a git host) (502).
	KindUpstream
	// KindUnavailable: a part of the gateway is not available now (Temporal,
	// a feature turned off, the database writer's queue) (503).
	KindUnavailable
	// KindTimeout: the work did not finish in time (504).
	KindTimeout
)

var kindNames = [...]string{"", "invalid", "budget", "forbidden", "not_found", "conflict", "overloaded", "upstream", "unavailable", "timeout"}

// String names the kind (for logs and tests).
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "unknown"
}

// Codes the vocabulary's constructors use; a fault may carry any other.
const (
	CodeInvalid             = "invalid"
	CodeNotFound            = "not_found"
	CodeForbidden           = "forbidden"
	CodeNotEnabled          = "not_enabled"
	CodeTemporalUnavailable = "temporal_unavailable"
)

// TemporalRetry is the Retry-After of a request refused because the
// workflow engine did not answer: it is usually back within seconds.
const TemporalRetry = 5 * time.Second

// Fault is implemented by every error of the vocabulary.
type Fault interface {
	error
	// Fault describes the failure for the caller.
	Fault() Detail
}

// Detail is what the caller is told of a fault: the API renders it as
// {"error": Message, "code": Code, <Fields>...} with the kind's status and,
// when RetryAfter is set, a Retry-After header.
type Detail struct {
	Kind Kind
	// Code is the envelope's machine-readable code ("" leaves it out).
	Code string
	// Message is the envelope's text; "" takes the text of the whole error,
	// the fault with the context wrapped around it.
	Message string
	// Fields are context fields of the envelope (field, server, estimate ...).
	Fields map[string]any
	// RetryAfter, when set, tells the caller when to try again.
	RetryAfter time.Duration
}

// As returns the first fault in err's chain, if any.
func As(err error) (Fault, bool) {
	var f Fault
	if errors.As(err, &f) {
		return f, true
	}
	return nil, false
}
