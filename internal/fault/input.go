package fault

// Invalid is bad input, naming the field at fault: the one invalid-input
// type of every package (400 "invalid" with "field").
type Invalid struct {
	// Field is the input at fault (a JSON field, a query parameter, a
	// settings key); "" when the whole request is wrong.
	Field string
	// Msg says what is wrong with it.
	Msg string
}

// Error is "field: msg", or msg alone without a field.
func (e *Invalid) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Fault implements Fault: the envelope quotes the error itself, not the
// context wrapped around it.
func (e *Invalid) Fault() Detail {
	d := Detail{Kind: KindInvalid, Code: CodeInvalid, Message: e.Error()}
	if e.Field != "" {
		d.Fields = map[string]any{"field": e.Field}
	}
	return d
}

// Forbidden is a request the caller may not make: its role, an allowlist
// or a deployment policy refuses it (403; Code says which).
type Forbidden struct {
	Code string // forbidden, not_allowed, policy ...
	Msg  string
}

func (e *Forbidden) Error() string { return e.Msg }

// Fault implements Fault.
func (e *Forbidden) Fault() Detail {
	return Detail{Kind: KindForbidden, Code: e.Code, Message: e.Msg}
}
