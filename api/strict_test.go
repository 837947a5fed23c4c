package api

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/chat"
)

// Ids are canonical decimal only (issue 18 item 8): DELETE /tasks/+1 must not
// delete task 1.
func TestParseIDIsCanonical(t *testing.T) {
	for raw, want := range map[string]int64{"1": 1, "42": 42, "9223372036854775807": 9223372036854775807} {
		if n, ok := parseID(raw); !ok || n != want {
			t.Errorf("%q: %d %v", raw, n, ok)
		}
	}
	for _, raw := range []string{"", "0", "+1", "01", "-1", " 1", "1 ", "1e3", "0x1", "１", "9223372036854775808"} {
		if n, ok := parseID(raw); ok {
			t.Errorf("%q accepted as %d", raw, n)
		}
	}
	for _, raw := range []string{"+5", "05", "-0", "5 "} {
		if _, ok := parseCanonicalInt(raw); ok {
			t.Errorf("query int %q accepted", raw)
		}
	}
}

// The Bearer scheme is case-insensitive (RFC 7235); ASCII blanks (space,
// tab) around scheme and credential are ignored alike (#42: the server
// already dropped a trailing space but not a tab); the credential is
// otherwise compared exactly.
func TestBearerToken(t *testing.T) {
	for h, want := range map[string]string{"Bearer k1": "k1", "bearer k1": "k1", "BEARER k1": "k1", "BeArEr  k1": "k1",
		"Bearer k1 ": "k1", "Bearer k1\t": "k1", "Bearer \tk1": "k1", "Bearer\tk1": "k1"} {
		if got, ok := bearerToken(h); !ok || got != want {
			t.Errorf("%q: %q %v", h, got, ok)
		}
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic k1", "Bearer k\t1", "Bearer k1\n", "Bearer k1\u00a0", "Bearer\u00a0k1", "Bearerk1"} {
		if got, ok := bearerToken(h); ok {
			t.Errorf("%q accepted as %q", h, got)
		}
	}
}

// A body that is not UTF-8 is refused whole: decoded, each bad byte would
// become U+FFFD and the request would change the text it was sent.
func TestBodiesThatAreNotUTF8AreRefused(t *testing.T) {
	for body, refused := range map[string]bool{
		"{\"title\":\"a\xff\xfeb\"}": true,
		"{\"text\":\"\xc3\"}":        true, // a cut multi-byte sequence
		`{"title":"é ✓ 😀"}`:          false,
		`{"text":"\ud800"}`:          false, // an escape, decoded by encoding/json's rules
	} {
		if err := refuseBadText([]byte(body)); (err != nil) != refused {
			t.Errorf("%q: refused %v, want %v", body, err != nil, refused)
		}
	}
}

// NUL bytes are refused in every JSON string (issue 18 item 8), and free
// strings have their documented length limits.
func TestStrictStrings(t *testing.T) {
	for body, want := range map[string]string{
		`{"text":"a\u0000b"}`:               "text",
		`{"overrides":{"model":"m\u0000"}}`: "overrides.model",
		`{"tags":["ok","x\u0000"]}`:         "tags[1]",
		`{"a\u0000":1}`:                     "body (a key)",
		`{"text":"a\\u0000b"}`:              "",
		`{"text":"plain"}`:                  "",
	} {
		err := refuseNUL([]byte(body))
		got := ""
		if err != nil {
			got = err.(*Error).Fields["field"].(string)
		}
		if got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
	long := strings.Repeat("é", 192)
	for want, b := range map[string]chatBody{"user_id": {UserID: long}, "username": {Username: long}, "overrides.model": {Overrides: &chat.Overrides{Model: long}}} {
		if field, limit := tooLong(reflect.ValueOf(&b)); field != want || limit != 191 {
			t.Errorf("%+v: refused at %q (limit %d), want %q (191)", b, field, limit, want)
		}
	}
	ok := chatBody{UserID: strings.Repeat("é", 191), Text: strings.Repeat("x", 100000), Overrides: &chat.Overrides{Model: "llama3.2"}}
	if field, _ := tooLong(reflect.ValueOf(&ok)); field != "" {
		t.Errorf("%s refused", field)
	}
}

// BenchmarkTooLong is the length check of a chat request's body (every
// chat request pays it).
func BenchmarkTooLong(b *testing.B) {
	body := chatBody{AgentID: "bench", UserID: "u", Text: "Hello, how are you today?", Overrides: &chat.Overrides{Model: "m"}}
	b.ReportAllocs()
	for b.Loop() {
		if field, _ := tooLong(reflect.ValueOf(&body)); field != "" {
			b.Fatal(field)
		}
	}
}
