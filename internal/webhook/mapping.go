// Package webhook is the inbound webhook trigger: it maps an arbitrary
// JSON payload to a chat message with the agent's webhook mapping, runs
// the agent synchronously through internal/chat, and makes repeats with
// the same Idempotency-Key return the first reply.
package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/jsonpath"
)

// FallbackTextPaths are tried, in order, when text_path is empty or yields
// nothing; after them the compact JSON of the whole payload is the text.
var FallbackTextPaths = []string{"text", "message", "body", "content", "issue.title", "alert.title"}

// ErrNotJSON: the body is not a JSON document.
var ErrNotJSON = fault.New(fault.KindInvalid, fault.CodeInvalid, "the webhook body is not valid JSON")

// Mapped is a payload mapped to a chat message.
type Mapped struct {
	Text     string
	UserID   string
	Username string
	ThreadID string
	// SessionID is the explicit session id (session_id_path), if any.
	SessionID string
	// TextFrom says where the text came from: the path used, or "$" for
	// the whole payload.
	TextFrom string
	// Raw is the compact JSON payload.
	Raw string
}

// Map applies a mapping (nil: the defaults) to a JSON payload.
//
// Path forms: dot notation (`issue.title`), an optional leading `$` or
// `$.` (`$.issue.title`), array indexes as a segment or in brackets
// (`items.0.text`, `items[0].text`, `$[0]`); `$` alone is the whole
// payload. A path yields nothing when a segment is missing, the value is
// null, or it is an empty string. A path that yields an object or array
// where text is expected yields its compact JSON (keys in payload order).
// Numbers and booleans yield their JSON text.
func Map(body []byte, m *agentdef.WebhookMapping) (*Mapped, error) {
	if !json.Valid(body) {
		return nil, ErrNotJSON
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return nil, ErrNotJSON
	}
	raw := json.RawMessage(compact.Bytes())
	if m == nil {
		m = &agentdef.WebhookMapping{}
	}
	out := &Mapped{Raw: compact.String()}
	var err error
	get := func(field, p string) string {
		if p == "" || err != nil {
			return ""
		}
		v, e := Lookup(raw, p)
		if e != nil {
			err = fmt.Errorf("webhook.%s: %w", field, e)
		}
		return v
	}
	if v := get("text_path", m.TextPath); v != "" {
		out.Text, out.TextFrom = v, m.TextPath
	}
	out.UserID = get("user_id_path", m.UserIDPath)
	out.Username = get("username_path", m.UsernamePath)
	out.ThreadID = get("thread_id_path", m.ThreadIDPath)
	out.SessionID = get("session_id_path", m.SessionIDPath)
	if err != nil {
		return nil, err
	}
	if out.Text == "" {
		for _, p := range FallbackTextPaths {
			if v, _ := Lookup(raw, p); v != "" {
				out.Text, out.TextFrom = v, p
				break
			}
		}
	}
	if out.Text == "" {
		out.Text, out.TextFrom = out.Raw, "$"
	}
	return out, nil
}

// Lookup resolves a path in a JSON document and renders the value as text
// (see Map). A syntactically bad path is an error; a path that finds
// nothing yields "".
func Lookup(doc json.RawMessage, p string) (string, error) {
	segs, err := jsonpath.Parse(p)
	if err != nil {
		return "", err
	}
	cur := doc
	for _, s := range segs {
		cur = step(cur, s)
		if cur == nil {
			return "", nil
		}
	}
	return render(cur), nil
}

// step descends one segment: a key of an object or an index of an array.
func step(cur json.RawMessage, seg string) json.RawMessage {
	cur = bytes.TrimSpace(cur)
	if len(cur) == 0 {
		return nil
	}
	switch cur[0] {
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil
		}
		v, ok := obj[seg]
		if !ok {
			return nil
		}
		return v
	case '[':
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 {
			return nil
		}
		var arr []json.RawMessage
		if json.Unmarshal(cur, &arr) != nil || i >= len(arr) {
			return nil
		}
		return arr[i]
	}
	return nil
}

// render turns a JSON value into text: strings unquoted, null and "" as
// nothing, objects and arrays as compact JSON, numbers and booleans as
// written.
func render(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return ""
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return ""
		}
		if strings.TrimSpace(s) == "" {
			return ""
		}
		return s
	case 'n':
		return ""
	case '{', '[':
		var b bytes.Buffer
		if json.Compact(&b, v) != nil {
			return ""
		}
		return b.String()
	}
	return string(v)
}
