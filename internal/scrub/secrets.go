package scrub

import (
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"
)

// matcher finds the registered secret values in a text in one pass. At each
// position the first two bytes are looked up in a bitset (one load and a
// mask); only a position whose pair starts some value compares values, the
// longest first. A reply of ordinary text against a few dozen random-looking
// keys hits the bitset about once in a hundred bytes, so a scrub costs about
// a nanosecond per byte whatever the number of secrets (BenchmarkSecrets).
//
// Matching is leftmost, and at one position the longest value wins, so a
// secret containing another is removed whole. The positions are what the
// stream scrubber needs to decide what it may already emit (Stream).
type matcher struct {
	// longest is the length of the longest value.
	longest int
	pairs   [1 << 16 / 64]uint64
	byPair  map[uint16][]string
}

func pairOf(a, b byte) uint16 { return uint16(a)<<8 | uint16(b) }

// newMatcher indexes values (each at least MinSecretLen bytes, distinct).
func newMatcher(values []string) *matcher {
	m := &matcher{byPair: map[uint16][]string{}}
	sorted := append([]string(nil), values...)
	sort.Slice(sorted, func(i, j int) bool {
		if len(sorted[i]) != len(sorted[j]) {
			return len(sorted[i]) > len(sorted[j])
		}
		return sorted[i] < sorted[j]
	})
	for _, v := range sorted {
		p := pairOf(v[0], v[1])
		m.pairs[p/64] |= 1 << (p % 64)
		m.byPair[p] = append(m.byPair[p], v)
		m.longest = max(m.longest, len(v))
	}
	return m
}

// at returns the length of the longest value starting at s[i:], or 0.
func (m *matcher) at(s string, i int) int {
	if i+1 >= len(s) {
		return 0
	}
	p := pairOf(s[i], s[i+1])
	if m.pairs[p/64]&(1<<(p%64)) == 0 {
		return 0
	}
	for _, v := range m.byPair[p] {
		if strings.HasPrefix(s[i:], v) {
			return len(v)
		}
	}
	return 0
}

// replace scrubs s[from:limit) onto b: every value starting before limit
// is replaced (it may end after limit). It returns b and where it stopped
// (limit, or the end of a value that crossed it). b stays nil as long as
// nothing was replaced, so a clean text costs no allocation.
func (m *matcher) replace(b []byte, s string, from, limit int) ([]byte, int) {
	i, last := from, from
	for i < limit {
		n := m.at(s, i)
		if n == 0 {
			i++
			continue
		}
		if b == nil {
			b = make([]byte, 0, len(s)+len(Redacted))
		}
		b = append(b, s[last:i]...)
		b = append(b, Redacted...)
		i += n
		last = i
	}
	if b != nil {
		b = append(b, s[last:i]...)
	}
	return b, i
}

// Secrets returns s with every registered secret value (and its encoded
// forms) replaced by [REDACTED], and nothing else changed: the scrub for
// text that is content rather than an error, such as a provider's reply or
// a tool's output, where the credential shapes String also removes ("sk-…",
// "password=…") can be legitimate text (a code example) and are left alone.
// A text without a registered value is returned as it is, unallocated.
func Secrets(s string) string {
	m := reg.known.Load()
	if m == nil || len(s) < MinSecretLen {
		return s
	}
	b, _ := m.replace(nil, s, 0, len(s))
	if b == nil {
		return s
	}
	return string(b)
}

// SecretsJSON is Secrets for a JSON document (a tool call's arguments): it
// keeps the document valid when a replacement would break it (a value cut
// across an escape sequence) by scrubbing every string value on its own.
func SecretsJSON(raw []byte) []byte {
	out := Secrets(string(raw))
	if out == string(raw) {
		return raw
	}
	if json.Valid([]byte(out)) || !json.Valid(raw) {
		return []byte(out)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return []byte(out)
	}
	fixed, err := json.Marshal(secretsValue(v))
	if err != nil {
		return []byte(out)
	}
	return fixed
}

func secretsValue(v any) any {
	switch t := v.(type) {
	case string:
		return Secrets(t)
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[Secrets(k)] = secretsValue(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = secretsValue(x)
		}
		return s
	}
	return v
}

// Stream scrubs text that arrives in pieces (a provider's streamed reply)
// before passing it on. A secret can be cut across two pieces, so Stream
// holds back the end of what it has seen: as many bytes as the longest
// registered value minus one (less a partial character), never more than a
// value that may still be completing. Write passes on what is decided;
// Flush passes on the rest once the text is complete. A Stream is not safe
// for concurrent use (a provider delivers its deltas in order).
type Stream struct {
	emit func(string) error
	held string
}

// NewStream returns a Stream that passes scrubbed text to emit.
func NewStream(emit func(string) error) *Stream { return &Stream{emit: emit} }

// Write takes the next piece of text.
func (st *Stream) Write(piece string) error {
	text := st.held + piece
	m := reg.known.Load()
	if m == nil {
		// Nothing registered: nothing to hold back.
		st.held = ""
		return st.send(text)
	}
	limit := len(text) - (m.longest - 1)
	if limit <= 0 {
		st.held = text
		return nil
	}
	// Cut at a character boundary: a delta is sent as a JSON string, where
	// half a character would become U+FFFD.
	for limit > 0 && !utf8.RuneStart(text[limit]) {
		limit--
	}
	// Every value starting before limit ends inside text (it is at most
	// longest bytes long), so what precedes the stop is decided.
	b, stop := m.replace(nil, text, 0, limit)
	st.held = text[stop:]
	if b != nil {
		return st.send(string(b))
	}
	return st.send(text[:stop])
}

// Flush passes on the held text, scrubbed: the text is complete.
func (st *Stream) Flush() error {
	text := st.held
	st.held = ""
	return st.send(Secrets(text))
}

// Cut passes on the held text of a stream that ended early (the provider
// failed mid-answer), scrubbed, less any end that could be the start of a
// configured value: what came before the failure reaches the caller as it
// did without scrubbing, and no partial secret does.
func (st *Stream) Cut() error {
	text := Secrets(st.held)
	st.held = ""
	if m := reg.known.Load(); m != nil {
		for n := min(len(text), m.longest-1); n > 1; n-- {
			if m.startsValue(text[len(text)-n:]) {
				text = text[:len(text)-n]
				break
			}
		}
	}
	return st.send(text)
}

// startsValue reports whether some value begins with s (at least two
// bytes: one character of a secret tells nothing).
func (m *matcher) startsValue(s string) bool {
	for _, v := range m.byPair[pairOf(s[0], s[1])] {
		if strings.HasPrefix(v, s) {
			return true
		}
	}
	return false
}

func (st *Stream) send(s string) error {
	if s == "" {
		return nil
	}
	return st.emit(s)
}
