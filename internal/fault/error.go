package fault

import "time"

// Error is a failure with a fixed text. Packages export such values as
// sentinels (errors.Is matches them through any wrapping) and wrap them with
// context; the caller is told the whole wrapped text, unless Opaque.
type Error struct {
	Kind Kind
	Code string
	Msg  string
	// Field names the input at fault (the envelope's "field"), if any.
	Field string
	// Fields are further context fields of the envelope.
	Fields map[string]any
	// RetryAfter, when set, tells the caller when to try again.
	RetryAfter time.Duration
	// Opaque: the caller is told Msg alone, never the context wrapped
	// around it (which quotes internals such as a Temporal client's error).
	Opaque bool
	// Err is a sentinel this error is an instance of (errors.Is matches it);
	// it is not part of the text.
	Err error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the sentinel this error is an instance of, if any.
func (e *Error) Unwrap() error { return e.Err }

// Fault implements Fault.
func (e *Error) Fault() Detail {
	d := Detail{Kind: e.Kind, Code: e.Code, RetryAfter: e.RetryAfter}
	if e.Opaque {
		d.Message = e.Msg
	}
	if e.Field != "" || len(e.Fields) > 0 {
		d.Fields = make(map[string]any, len(e.Fields)+1)
		for k, v := range e.Fields {
			d.Fields[k] = v
		}
		if e.Field != "" {
			d.Fields["field"] = e.Field
		}
	}
	return d
}

// New is a failure of kind with code and text.
func New(kind Kind, code, msg string) *Error { return &Error{Kind: kind, Code: code, Msg: msg} }

// NotFound is a 404 "not_found" with text msg.
func NotFound(msg string) *Error { return New(KindNotFound, CodeNotFound, msg) }

// Conflict is a 409 whose code says which state refuses.
func Conflict(code, msg string) *Error { return New(KindConflict, code, msg) }

// NotEnabled is a feature this gateway does not run (503 "not_enabled").
func NotEnabled(msg string) *Error { return New(KindUnavailable, CodeNotEnabled, msg) }

// TemporalUnavailable is a request the workflow engine did not take (503
// "temporal_unavailable", Retry-After TemporalRetry). It is opaque: what it
// wraps is logged, not shown.
func TemporalUnavailable(msg string) *Error {
	return &Error{Kind: KindUnavailable, Code: CodeTemporalUnavailable, Msg: msg, RetryAfter: TemporalRetry, Opaque: true}
}

// ErrTemporalUnavailable wraps failures to reach Temporal; the packages
// that start workflows (taskruns, approvals, schedules) share it.
var ErrTemporalUnavailable = TemporalUnavailable("the workflow engine (Temporal) is unavailable; try again shortly")
