package knowledge

import (
	"strings"
	"unicode/utf8"
)

// Chunk cuts text into passages of at most size characters (runes), each
// starting with up to overlap characters of the end of the one before.
// Cuts fall on paragraph boundaries where a paragraph fits, else on
// sentence ends, else on spaces, else anywhere. The cut is deterministic
// (a crashed ingestion re-chunks to the same passages). Empty text gives
// no chunks.
func Chunk(text string, size, overlap int) []string {
	if size < 1 {
		size = 1000
	}
	if overlap < 0 || overlap >= size {
		overlap = 0
	}
	text = strings.TrimSpace(text)
	var out []string
	for text != "" {
		if utf8.RuneCountInString(text) <= size {
			out = append(out, text)
			break
		}
		end := cutPoint(text, size)
		piece := strings.TrimSpace(text[:end])
		if piece != "" {
			out = append(out, piece)
		}
		next := end
		if overlap > 0 {
			next = overlapStart(text, end, overlap)
		}
		if next <= 0 || next >= end {
			next = end
		}
		text = strings.TrimSpace(text[next:])
	}
	return out
}

// cutPoint is the byte offset to end a chunk at, within the first size
// runes of text.
func cutPoint(text string, size int) int {
	limit := byteOffset(text, size)
	window := text[:limit]
	// Not before half the window, so chunks stay near size.
	floor := len(window) / 2
	if i := strings.LastIndex(window, "\n\n"); i > floor {
		return i + 2
	}
	best := -1
	for _, sep := range []string{". ", "? ", "! ", ".\n", "?\n", "!\n", "\n"} {
		if i := strings.LastIndex(window, sep); i > floor && i+len(sep) > best {
			best = i + len(sep)
		}
	}
	if best > 0 {
		return best
	}
	if i := strings.LastIndexAny(window, " \t"); i > floor {
		return i + 1
	}
	return limit
}

// overlapStart is where the next chunk starts: about overlap runes before
// end, moved forward to a word start.
func overlapStart(text string, end, overlap int) int {
	start := end
	for n := 0; n < overlap && start > 0; n++ {
		_, w := utf8.DecodeLastRuneInString(text[:start])
		start -= w
	}
	if i := strings.IndexAny(text[start:end], " \n\t"); i >= 0 && start+i+1 < end {
		start += i + 1
	}
	return start
}

func byteOffset(s string, runes int) int {
	n := 0
	for i := range s {
		if n == runes {
			return i
		}
		n++
	}
	return len(s)
}
