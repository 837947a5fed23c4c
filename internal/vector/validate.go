package vector

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/agentryhq/agentry/internal/fault"
)

// Limits of what a backend stores; longer ids or texts are refused as
// invalid input (the columns hold them on both databases).
const (
	MaxBaseBytes     = 191
	MaxDocumentBytes = 1024
	MaxVersionBytes  = 191
	// MaxChunkBytes bounds one chunk's text (chunking makes them far
	// smaller; this only stops a runaway).
	MaxChunkBytes = 1 << 20
	// MaxDimensions bounds a vector's length.
	MaxDimensions = 8192
)

// CheckSlot validates the ids of a document version (version may be
// omitted with "-", for calls that take none).
func CheckSlot(base, document, version string) error {
	if err := checkID("base", base, MaxBaseBytes); err != nil {
		return err
	}
	if err := checkID("document", document, MaxDocumentBytes); err != nil {
		return err
	}
	if version == "-" {
		return nil
	}
	return checkID("version", version, MaxVersionBytes)
}

func checkID(field, v string, n int) error {
	switch {
	case v == "":
		return &fault.Invalid{Field: field, Msg: "is required"}
	case len(v) > n:
		return &fault.Invalid{Field: field, Msg: fmt.Sprintf("is longer than %d bytes", n)}
	case !utf8.ValidString(v):
		return &fault.Invalid{Field: field, Msg: "is not valid UTF-8"}
	}
	return nil
}

// CheckChunks validates chunks before they are staged: positions >= 0 and
// distinct, texts valid UTF-8 within MaxChunkBytes, vectors within
// MaxDimensions with finite values.
func CheckChunks(chunks []Chunk) error {
	seen := make(map[int]bool, len(chunks))
	for i, c := range chunks {
		switch {
		case c.Position < 0:
			return &fault.Invalid{Field: fmt.Sprintf("chunks[%d].position", i), Msg: "is negative"}
		case seen[c.Position]:
			return &fault.Invalid{Field: fmt.Sprintf("chunks[%d].position", i), Msg: fmt.Sprintf("%d appears twice", c.Position)}
		case len(c.Text) > MaxChunkBytes:
			return &fault.Invalid{Field: fmt.Sprintf("chunks[%d].text", i), Msg: fmt.Sprintf("is longer than %d bytes", MaxChunkBytes)}
		case !utf8.ValidString(c.Text):
			return &fault.Invalid{Field: fmt.Sprintf("chunks[%d].text", i), Msg: "is not valid UTF-8"}
		case len(c.Vector) > MaxDimensions:
			return &fault.Invalid{Field: fmt.Sprintf("chunks[%d].vector", i), Msg: fmt.Sprintf("has more than %d dimensions", MaxDimensions)}
		}
		for _, f := range c.Vector {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return &fault.Invalid{Field: fmt.Sprintf("chunks[%d].vector", i), Msg: "holds a value that is not a finite number"}
			}
		}
		seen[c.Position] = true
	}
	return nil
}
