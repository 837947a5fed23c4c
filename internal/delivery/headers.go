package delivery

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/signature"
)

// HeaderLine is one "Name: value" line of channels.webhook.headers.
type HeaderLine struct {
	Name  string
	Value string
}

// reservedHeaders are set by the sender; configured lines cannot replace
// them (signature headers, and what net/http computes itself).
var reservedHeaders = map[string]bool{
	signature.HeaderTimestamp: true, signature.HeaderSignature: true, signature.HeaderDelivery: true,
	"Content-Length": true, "Host": true, "Transfer-Encoding": true, "Connection": true,
}

// ParseHeaderLines reads multi-line "Name: value" text. Blank lines and
// lines starting with # are skipped. A line without a colon, with an
// invalid name or naming a reserved header (X-Agentry-*, Content-Length,
// Host, ...) is an error naming its line number; values are never quoted
// in errors (they may be credentials).
func ParseHeaderLines(text string) ([]HeaderLine, error) {
	var out []HeaderLine
	for i, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("headers line %d: expected \"Name: value\"", i+1)
		}
		if !validHeaderName(name) {
			return nil, fmt.Errorf("headers line %d: %q is not a valid header name", i+1, name)
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if reservedHeaders[canon] || strings.HasPrefix(canon, "X-Agentry-") {
			return nil, fmt.Errorf("headers line %d: %s is set by Agentry and cannot be configured", i+1, canon)
		}
		out = append(out, HeaderLine{Name: canon, Value: strings.TrimSpace(value)})
	}
	return out, nil
}

// Apply adds the lines to h (repeated names add values).
func Apply(h http.Header, lines []HeaderLine) {
	for _, l := range lines {
		h.Add(l.Name, l.Value)
	}
}

// validHeaderName: RFC 7230 token characters.
func validHeaderName(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return s != ""
}

// RedactHeaderLines renders header text for reading: every value becomes
// ******** (header values carry tokens; only the names are shown).
// Unparsable text is redacted entirely.
func RedactHeaderLines(text string) string {
	if strings.TrimSpace(text) == "" {
		return ""
	}
	lines, err := ParseHeaderLines(text)
	if err != nil {
		return config.Redacted
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		v := l.Value
		if v != "" {
			v = config.Redacted
		}
		out = append(out, l.Name+": "+v)
	}
	return strings.Join(out, "\n")
}

// MergeRedacted lets a client write back what it read: a line of next
// whose value is ******** keeps the value of the same header in prev.
func MergeRedacted(prev, next string) (string, error) {
	lines, err := ParseHeaderLines(next)
	if err != nil {
		return "", err
	}
	old, _ := ParseHeaderLines(prev)
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		if l.Value == config.Redacted {
			found := false
			for _, o := range old {
				if o.Name == l.Name {
					l.Value, found = o.Value, true
					break
				}
			}
			if !found {
				return "", fmt.Errorf("headers: %s has the redacted value %s and no earlier value to keep", l.Name, config.Redacted)
			}
		}
		out = append(out, l.Name+": "+l.Value)
	}
	return strings.Join(out, "\n"), nil
}

// HeaderValues are the values of "Name: value" header lines, registered as
// secrets with package scrub (they carry tokens): each value, and for
// "Scheme credential" values the credential alone.
func HeaderValues(text string) []string {
	lines, _ := ParseHeaderLines(text)
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, l.Value)
		if _, cred, ok := strings.Cut(l.Value, " "); ok {
			out = append(out, strings.TrimSpace(cred))
		}
	}
	return out
}
