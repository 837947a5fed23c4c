// Package qr renders QR codes (the WhatsApp pairing code) for a terminal
// and as a PNG for the console. The encoding is github.com/skip2/go-qrcode;
// this package only draws its bitmap.
package qr

import (
	"errors"
	"fmt"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
)

// Level is the error correction used: Medium (15 %) keeps WhatsApp's
// ~250-byte pairing codes small enough for an 80-column terminal.
const level = qrcode.Medium

// MaxPNGSize bounds PNG's size argument (pixels per side).
const MaxPNGSize = 4096

// QuietZone is the light border, in modules, around every code: the four
// modules the QR specification asks for, so scanners find the code on any
// background.
const QuietZone = 4

var errEmpty = errors.New("qr: nothing to encode (empty text)")

// Bitmap returns the code's modules (true = dark) with the quiet zone.
func Bitmap(text string) ([][]bool, error) {
	if text == "" {
		return nil, errEmpty
	}
	q, err := qrcode.New(text, level)
	if err != nil {
		return nil, fmt.Errorf("qr: encode: %w", err)
	}
	// go-qrcode's bitmap includes a 4-module border unless DisableBorder.
	return q.Bitmap(), nil
}

// ANSI colours: black on white, set explicitly so the code reads the same
// on dark and light terminal themes (a code drawn only with blocks in the
// terminal's own foreground colour comes out inverted on a dark theme,
// which many phone scanners refuse).
const (
	blackOnWhite = "\x1b[30;47m"
	reset        = "\x1b[0m"
)

// Terminal renders text as a QR code for a terminal: two module rows per
// line with the half-block characters ▀ ▄ █, black on a white background,
// quiet zone included. Each line is blackOnWhite + modules + reset.
func Terminal(text string) (string, error) {
	bm, err := Bitmap(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for y := 0; y < len(bm); y += 2 {
		b.WriteString(blackOnWhite)
		for x := range bm[y] {
			top := bm[y][x]
			bottom := y+1 < len(bm) && bm[y+1][x]
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
		b.WriteString(reset)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// PNG renders text as a size×size PNG (black on white, quiet zone
// included). size must hold at least one pixel per module; 256 suits the
// console.
func PNG(text string, size int) ([]byte, error) {
	bm, err := Bitmap(text)
	if err != nil {
		return nil, err
	}
	if size < len(bm) || size > MaxPNGSize {
		return nil, fmt.Errorf("qr: PNG size %d out of range: this code needs %d to %d pixels", size, len(bm), MaxPNGSize)
	}
	q, err := qrcode.New(text, level)
	if err != nil {
		return nil, fmt.Errorf("qr: encode: %w", err)
	}
	return q.PNG(size)
}
