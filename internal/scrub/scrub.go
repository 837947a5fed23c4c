// Package scrub removes secrets from text that came from outside the gateway
// (provider and MCP server errors, webhook answers, admin API errors) before
// it is returned, logged, stored, put in Temporal history or sent.
//
// Two things are removed:
//   - every secret value the gateway knows (provider keys, channel secrets and
//     header values, secrets store values, the JWT secret, API keys), which the
//     owners register with Register and keep current with (*Source).Set;
//   - credential-shaped strings even when nobody registered them: bearer and
//     basic credentials, sk-... style API keys, JWTs, well-known token
//     prefixes, secrets in URL query strings and user info, and "api_key":
//     "..." style pairs.
//
// The one-call API for code that handles outside text is String (or Error,
// Bytes, JSON). The registry is process-wide on purpose: an error text can
// reach a chokepoint (an activity's error, a log line) from code that has no
// handle on the configuration, and a secret removed by one gateway in a test
// binary harms no other.
package scrub

import (
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
)

// Redacted replaces every removed secret.
const Redacted = "[REDACTED]"

// MinSecretLen is the shortest registered value that is scrubbed; shorter
// values ("on", "1") would shred ordinary text and are no secret worth the
// name.
const MinSecretLen = 6

// Source is one owner's set of secret values (the configuration, the secrets
// store, the channel settings). Set replaces the whole set, so a reload that
// drops a value stops scrubbing it.
type Source struct {
	name string
	id   uint64
}

type registry struct {
	mu      sync.Mutex
	nextID  uint64
	sources map[uint64][]string
	// known is rebuilt on every change; String reads it without a lock.
	known atomic.Pointer[matcher]
}

var reg = &registry{sources: map[uint64][]string{}}

// Register returns a new, empty source named for diagnostics.
func Register(name string) *Source {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.nextID++
	return &Source{name: name, id: reg.nextID}
}

// Set replaces the source's secret values. Empty and too-short values are
// ignored.
func (s *Source) Set(values ...string) {
	if s == nil {
		return
	}
	kept := make([]string, 0, len(values))
	for _, v := range values {
		if len(strings.TrimSpace(v)) >= MinSecretLen {
			kept = append(kept, v)
		}
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.sources[s.id] = kept
	reg.rebuild()
}

// Add adds values to the source (a secret set through an API between two
// full refreshes).
func (s *Source) Add(values ...string) {
	if s == nil {
		return
	}
	reg.mu.Lock()
	cur := append([]string(nil), reg.sources[s.id]...)
	reg.mu.Unlock()
	s.Set(append(cur, values...)...)
}

// Close forgets the source's values.
func (s *Source) Close() {
	if s == nil {
		return
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	delete(reg.sources, s.id)
	reg.rebuild()
}

// rebuild makes the matcher of every registered value and its encoded forms
// (as it appears inside JSON strings and URL query strings). Longer values go
// first so that a secret containing another is removed whole.
func (r *registry) rebuild() {
	seen := map[string]bool{}
	var all []string
	add := func(v string) {
		if len(v) >= MinSecretLen && !seen[v] {
			seen[v] = true
			all = append(all, v)
		}
	}
	for _, vals := range r.sources {
		for _, v := range vals {
			add(v)
			add(strings.TrimSpace(v))
			if b, err := json.Marshal(v); err == nil {
				add(string(b[1 : len(b)-1]))
			}
			add(url.QueryEscape(v))
			add(url.PathEscape(v))
		}
	}
	if len(all) == 0 {
		r.known.Store(nil)
		return
	}
	r.known.Store(newMatcher(all))
}

// pattern is a credential shape: the groups before the secret are kept.
type pattern struct {
	re   *regexp.Regexp
	repl string
	// only, when set, is the group that must look like a credential (see
	// credentialLike) for the match to be replaced.
	only int
	// hints are lower-case literals of which every match contains at least
	// one: an ASCII text holding none of them cannot match, and the regexp
	// (the costly part of a scrub) is skipped.
	hints []string
}

// credentialLike tells a token from a word: it mixes letters and digits, or
// is long.
func credentialLike(s string) bool {
	if len(s) >= 24 {
		return true
	}
	return strings.ContainsAny(s, "0123456789") && strings.IndexFunc(s, func(r rune) bool {
		return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
	}) >= 0
}

func (p pattern) apply(s string) string {
	if p.only == 0 {
		return p.re.ReplaceAllString(s, p.repl)
	}
	return p.re.ReplaceAllStringFunc(s, func(m string) string {
		sub := p.re.FindStringSubmatch(m)
		if len(sub) <= p.only || !credentialLike(sub[p.only]) {
			return m
		}
		return p.re.ReplaceAllString(m, p.repl)
	})
}

// tokenChars are the characters of a token (base64, base64url, hex, JWT).
const tokenChars = `[A-Za-z0-9._~+/=-]`

var patterns = []pattern{
	// Authorization header values, with or without a scheme.
	{re: regexp.MustCompile(`(?i)(authorization\\?"?\s*[:=]\s*\\?"?)((?:bearer|basic|token|digest)\s+)?[^"\\\s,;&}{\[]{6,}`), repl: "${1}${2}" + Redacted,
		hints: []string{"authorization"}},
	// Bearer credentials: "Bearer xyz".
	{re: regexp.MustCompile(`(?i)\b(bearer)(\s+|%20)` + tokenChars + `{6,}`), repl: "${1}${2}" + Redacted,
		hints: []string{"bearer"}},
	// "Basic xyz", "token xyz" only when xyz looks like a credential, not a word
	// ("token budget").
	{re: regexp.MustCompile(`(?i)\b(basic|token)(\s+|%20)(` + tokenChars + `{8,})`), repl: "${1}${2}" + Redacted, only: 3,
		hints: []string{"basic", "token"}},
	// URL user info: scheme://user:password@host.
	{re: regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@"'<>]*:)[^/\s@"'<>]+@`), repl: "${1}" + Redacted + "@",
		hints: []string{"://"}},
	// Secrets in query strings and form bodies.
	{re: regexp.MustCompile(`(?i)([?&;](?:api[_-]?key|apikey|key|token|access[_-]?token|refresh[_-]?token|client[_-]?secret|secret|password|passwd|pwd|sig|signature|auth)=)[^&\s"'<>#]+`), repl: "${1}" + Redacted,
		hints: []string{"key=", "token=", "secret=", "password=", "passwd=", "pwd=", "sig=", "signature=", "auth="}},
	// "api_key": "value", x-api-key: value, password=value (JSON, headers, logs).
	{re: regexp.MustCompile(`(?i)((?:api[_-]?key|x-api-key|apikey|access[_-]?token|refresh[_-]?token|client[_-]?secret|secret[_-]?key|secret|password|passwd|x-goog-api-key)\\?"?\s*[:=]\s*\\?"?)([^"\\\s,;&}{\[]{6,})`), repl: "${1}" + Redacted,
		hints: []string{"key", "token", "secret", "passw"}},
	// Provider key shapes: sk-..., sk-ant-..., sk-proj-...
	{re: regexp.MustCompile(`\b(sk|pk|rk)-[A-Za-z0-9_-]{12,}`), repl: Redacted,
		hints: []string{"sk-", "pk-", "rk-"}},
	// JSON Web Tokens.
	{re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*`), repl: Redacted,
		hints: []string{"eyj"}},
	// Well-known token prefixes: GitHub, Slack, AWS access keys, Google API keys.
	{re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})`), repl: Redacted,
		hints: []string{"gh", "github_pat_", "xox", "akia", "aiza"}},
}

// mayMatch reports whether p's regexp can match lower, the lower-cased form
// of an ASCII text.
func (p pattern) mayMatch(lower string) bool {
	for _, h := range p.hints {
		if strings.Contains(lower, h) {
			return true
		}
	}
	return false
}

// asciiLower returns s lower-cased and whether s is all ASCII. Only then is
// the hint check exact: with (?i) the regexps also fold non-ASCII runes such
// as the Kelvin sign (K) onto ASCII letters, so other texts take every regexp.
func asciiLower(s string) (string, bool) {
	hasUpper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return "", false
		}
		hasUpper = hasUpper || ('A' <= c && c <= 'Z')
	}
	if !hasUpper {
		return s, true
	}
	return strings.ToLower(s), true
}

// String returns s with every registered secret value and every
// credential-shaped string replaced by [REDACTED].
func String(s string) string {
	if s == "" {
		return s
	}
	s = Secrets(s)
	lower, ascii := asciiLower(s)
	for _, p := range patterns {
		if ascii && !p.mayMatch(lower) {
			continue
		}
		s = p.apply(s)
		if ascii {
			// A replacement may have changed the text the next hints see.
			lower, _ = asciiLower(s)
		}
	}
	return s
}

// Bytes is String for a byte slice (a body about to be stored or sent). The
// input is not modified.
func Bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	out := String(string(b))
	if out == string(b) {
		return b
	}
	return []byte(out)
}

// JSON scrubs a JSON document and keeps it valid: when the text scrub would
// break it (a secret cut across an escape sequence), every string value is
// scrubbed on its own instead.
func JSON(b []byte) []byte {
	out := Bytes(b)
	if len(out) == len(b) && string(out) == string(b) {
		return b
	}
	if json.Valid(out) || !json.Valid(b) {
		return out
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return out
	}
	fixed, err := json.Marshal(Value(v))
	if err != nil {
		return out
	}
	return fixed
}

// Value scrubs every string inside a decoded JSON value (maps, slices,
// strings), returning a scrubbed copy.
func Value(v any) any {
	switch t := v.(type) {
	case string:
		return String(t)
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = Value(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = Value(x)
		}
		return s
	}
	return v
}

// Error returns err with its text scrubbed. errors.Is and errors.As still
// see the original chain (so the API maps it to the right status); only the
// text is replaced. nil stays nil; an error whose text holds no secret is
// returned as is.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := String(msg)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// Is lets a scrubbed error be recognised as scrubbed (tests).
func IsScrubbed(err error) bool {
	var s *scrubbed
	return errors.As(err, &s)
}

// Auto scrubs s as a JSON document when it is one (an event payload, a
// delivery body) and as text otherwise.
func Auto(s string) string {
	if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return string(JSON([]byte(s)))
	}
	return String(s)
}
