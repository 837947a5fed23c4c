package agentry

import (
	"errors"
	"fmt"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
)

// renderQR draws text as a QR code for a terminal. It is the one place the
// client renders codes: internal/channels/qr (the console's renderer,
// written alongside) has the same Terminal function, and this can call it
// once both are on one branch.
//
// Two module rows per line with the half blocks ▀ ▄ █, black on white set
// explicitly: a code drawn in the terminal's own foreground colour comes
// out inverted on a dark theme, which many phone scanners refuse. Medium
// error correction keeps WhatsApp's ~250-byte codes inside 80 columns; the
// bitmap carries the 4-module quiet zone scanners need.
func renderQR(text string) (string, error) {
	if text == "" {
		return "", errors.New("qr: nothing to encode (empty text)")
	}
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return "", fmt.Errorf("qr: encode: %w", err)
	}
	bm := q.Bitmap()
	var b strings.Builder
	for y := 0; y < len(bm); y += 2 {
		b.WriteString("\x1b[30;47m")
		for x := range bm[y] {
			top, bottom := bm[y][x], y+1 < len(bm) && bm[y+1][x]
			switch {
			case top && bottom:
				b.WriteRune('█')
			case top:
				b.WriteRune('▀')
			case bottom:
				b.WriteRune('▄')
			default:
				b.WriteByte(' ')
			}
		}
		b.WriteString("\x1b[0m\n")
	}
	return b.String(), nil
}
