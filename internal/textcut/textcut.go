// Package textcut shortens text to a byte budget without splitting a
// character: a column size, a log or error excerpt, a capped tool result.
// A cut inside a multi-byte character would leave invalid UTF-8, which
// PostgreSQL refuses and JSON encoders replace.
package textcut

import "unicode/utf8"

// Prefix returns the longest prefix of s that is at most n bytes and does
// not end inside a character (s itself when it fits).
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	// A character starts at most UTFMax-1 bytes before the cut; in text that
	// is not UTF-8 anyway, cut where asked rather than eat a run of stray
	// continuation bytes.
	for cut := n; cut >= 0 && cut > n-utf8.UTFMax; cut-- {
		if utf8.RuneStart(s[cut]) {
			return s[:cut]
		}
	}
	return s[:n]
}
