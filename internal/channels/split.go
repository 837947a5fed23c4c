package channels

import (
	"strings"
	"unicode/utf8"
)

// Split cuts a reply into parts of at most max runes, at the last
// paragraph break, else line break, else space in the second half of a
// part, else hard (a very long word). Parts are never empty; an empty
// text gives none.
func Split(text string, max int) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if max <= 0 {
		return []string{text}
	}
	var parts []string
	for utf8.RuneCountInString(text) > max {
		cut := byteIndexOfRune(text, max)
		window := text[:cut]
		at := -1
		for _, sep := range []string{"\n\n", "\n", " "} {
			if i := strings.LastIndex(window, sep); i >= len(window)/2 {
				at = i
				break
			}
		}
		if at < 0 {
			at = cut
		}
		if part := strings.TrimSpace(text[:at]); part != "" {
			parts = append(parts, part)
		}
		text = strings.TrimSpace(text[at:])
	}
	if text != "" {
		parts = append(parts, text)
	}
	return parts
}

// byteIndexOfRune is the byte offset of rune n of s (len(s) past the end).
func byteIndexOfRune(s string, n int) int {
	i := 0
	for j := range s {
		if i == n {
			return j
		}
		i++
	}
	return len(s)
}
