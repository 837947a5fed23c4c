package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzRequestBody: a JSON request body is refused (NUL, too long, wrong
// type) or decoded; never a panic, and what is accepted has no NUL byte and
// fits its limits.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{`{"agent_id":"a","text":"hi"}`, `{"text":"a\u0000b"}`, `{"overrides":{"model":"m","max_tokens":5}}`,
		`{"user_id":1}`, `[]`, `{"a\u0000":1}`, `{"text":"\ud800"}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if refuseNUL(body) != nil {
			return
		}
		var b chatBody
		if json.Unmarshal(body, &b) != nil {
			return
		}
		if field, _ := tooLong(reflect.ValueOf(&b), ""); field != "" {
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
