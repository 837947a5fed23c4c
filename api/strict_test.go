package api

import "testing"

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

// The Bearer scheme is case-insensitive (RFC 7235); the credential is
// compared exactly.
func TestBearerToken(t *testing.T) {
	for h, want := range map[string]string{"Bearer k1": "k1", "bearer k1": "k1", "BEARER k1": "k1", "BeArEr  k1": "k1"} {
		if got, ok := bearerToken(h); !ok || got != want {
			t.Errorf("%q: %q %v", h, got, ok)
		}
	}
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic k1", "Bearer k1 ", "Bearer k1\t", "Bearer \tk1", "Bearer k1\u00a0", "Bearer\u00a0k1", "Bearerk1"} {
		if got, ok := bearerToken(h); ok {
			t.Errorf("%q accepted as %q", h, got)
		}
	}
}
