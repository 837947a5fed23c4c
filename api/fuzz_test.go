package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzRequestBody: a JSON request body is refused (not UTF-8, NUL, too
// long, wrong type) or decoded; never a panic, and what is accepted is
// UTF-8, has no NUL byte and fits its limits.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{`{"agent_id":"a","text":"hi"}`, `{"text":"a\u0000b"}`, `{"overrides":{"model":"m","max_tokens":5}}`,
		`{"user_id":1}`, `[]`, `{"a\u0000":1}`, `{"text":"\ud800"}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if refuseBadText(body) != nil {
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("a body that is not UTF-8 passed: %q", body)
		}
		var b chatBody
		if json.Unmarshal(body, &b) != nil {
			return
		}
		if field, _ := tooLong(reflect.ValueOf(&b)); field != "" {
			return
		}
		var doc any
		if json.Unmarshal(body, &doc) == nil {
			if bad := nulPath(doc, ""); bad != "" {
				t.Fatalf("NUL at %s passed", bad)
			}
		}
	})
}
