package scrub

import (
	"math/rand"
	"strings"
	"testing"
)

// The hint check may only skip a pattern that cannot match: for texts built
// from the pieces credentials are made of (keywords in any case, separators,
// token characters), whenever a pattern's regexp matches an ASCII text its
// hints must be present.
func TestHintsNeverSkipAMatch(t *testing.T) {
	pieces := []string{
		"authorization", "Authorization", "AUTHORIZATION", "bearer", "Bearer", "BEARER", "basic", "Basic", "token", "Token",
		"digest", "api_key", "api-key", "apikey", "API_KEY", "x-api-key", "X-Goog-Api-Key", "key", "KEY", "access_token",
		"Refresh-Token", "client_secret", "secret_key", "secret", "SECRET", "password", "Passwd", "pwd", "sig", "signature",
		"auth", "sk-", "pk-", "rk-", "eyJ", "EYJ", "ghp_", "github_pat_", "xoxb-", "AKIA", "AIza", "https://", "HTTP://",
		"://", ":", "=", "?", "&", ";", "@", "\"", "\\\"", " ", "\t", "%20", ".", "/", "-", "_", ",", "{", "}",
		"abcdefghijklmnop", "eyJhbGciOi.", "eyJzdWIiOi.", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "0123456789abcdef", "user", "host.example", "https://u:p@", "?key=", "&Access-Token=", ";SIG=", "?client_secret=", "://user:", "pw@",
	}
	rng := rand.New(rand.NewSource(1))
	matched := make([]int, len(patterns))
	for i := 0; i < 15000; i++ {
		var b strings.Builder
		for n := 1 + rng.Intn(8); n > 0; n-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		s := b.String()
		lower, ascii := asciiLower(s)
		if !ascii || lower != strings.ToLower(s) {
			t.Fatalf("asciiLower(%q) = %q, %v", s, lower, ascii)
		}
		for j, p := range patterns {
			if p.re.MatchString(s) {
				matched[j]++
				if !p.mayMatch(lower) {
					t.Fatalf("pattern %d (%s) matches %q but its hints %v are absent", j, p.re, s, p.hints)
				}
			}
		}
	}
	for j, n := range matched {
		if n == 0 {
			t.Errorf("pattern %d (%s) never matched: the generator does not exercise it", j, patterns[j].re)
		}
	}
}

// A text with a non-ASCII rune takes every regexp: (?i) folds the Kelvin
// sign onto k, which the lower-cased hint check would miss.
func TestNonASCIITakesEveryPattern(t *testing.T) {
	in := "api_\u212Aey: abcdef123456"
	if _, ascii := asciiLower(in); ascii {
		t.Fatal("non-ASCII text taken for ASCII")
	}
	if got := String(in); !strings.Contains(got, Redacted) {
		t.Fatalf("String(%q) = %q, want the value redacted", in, got)
	}
}

func BenchmarkStringPlainText(b *testing.B) {
	texts := []string{"POST /api/v1/chat", "chat llama3.2", "http://127.0.0.1:11434/api/chat", "cost admission", "llama3.2", "succeeded"}
	for i := 0; i < b.N; i++ {
		for _, s := range texts {
			String(s)
		}
	}
}
