package qr

import (
	"bytes"
	"image/color"
	"image/png"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// A pairing code as WhatsApp sends it: ref,noise key,identity key,adv secret.
const sample = "2@Vx3P1Ra3sA0YkGmQ0b9tPkmWb5hq2dC1H8f7nE9mQy0kLr6+Zk4uTq1J8xg==,n3ZbQm9gP0kqV1c3fW8hR2sT4uX6yZ8aB0cD2eF4gH0=,h7JkLm9nP1qR3sT5uV7wX9yZ1aB3cD5eF7gH9iJ1kL0=,Q2w3E4r5T6y7U8i9O0p1A2s3D4f5G6h7J8k9L0z1X2c="

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

func TestTerminalDrawsTwoRowsPerLineWithTheQuietZone(t *testing.T) {
	bm, err := Bitmap(sample)
	if err != nil {
		t.Fatal(err)
	}
	n := len(bm)
	out, err := Terminal(sample)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if want := (n + 1) / 2; len(lines) != want {
		t.Fatalf("%d lines for a %d-module code, want %d", len(lines), n, want)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, blackOnWhite) || !strings.HasSuffix(l, reset) {
			t.Fatalf("line %d does not set black on white and reset: %q", i, l)
		}
		plain := ansi.ReplaceAllString(l, "")
		if utf8.RuneCountInString(plain) != n {
			t.Fatalf("line %d is %d cells wide, want %d", i, utf8.RuneCountInString(plain), n)
		}
		r := []rune(plain)
		// Four light modules left and right of every line.
		if strings.TrimSpace(string(r[:QuietZone])) != "" || strings.TrimSpace(string(r[n-QuietZone:])) != "" {
			t.Fatalf("line %d has no quiet zone: %q", i, plain)
		}
	}
	// Four light module rows on top: the first two lines are blank.
	for i := 0; i < QuietZone/2; i++ {
		if strings.TrimSpace(ansi.ReplaceAllString(lines[i], "")) != "" {
			t.Fatalf("line %d should be quiet zone: %q", i, lines[i])
		}
	}
	// The finder pattern's top edge (7 dark modules) starts right after.
	row := []rune(ansi.ReplaceAllString(lines[QuietZone/2], ""))
	if got := string(row[QuietZone : QuietZone+7]); strings.Trim(got, "█▀") != "" {
		t.Fatalf("finder pattern missing at the top left: %q", got)
	}
	// The bitmap itself: quiet zone rows and columns are light.
	for i := 0; i < n; i++ {
		for j := 0; j < QuietZone; j++ {
			if bm[j][i] || bm[i][j] || bm[n-1-j][i] || bm[i][n-1-j] {
				t.Fatalf("bitmap module in the quiet zone is dark at %d,%d", i, j)
			}
		}
	}
}

func TestDifferentTextsRenderDifferently(t *testing.T) {
	a, err := Terminal(sample)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Terminal(sample + "x")
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two texts gave the same terminal code")
	}
	again, _ := Terminal(sample)
	if a != again {
		t.Fatal("the same text rendered differently twice")
	}
	pa, err := PNG(sample, 256)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := PNG(sample+"x", 256)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(pa, pb) {
		t.Fatal("two texts gave the same PNG")
	}
}

func TestPNGHasTheAskedSizeAndALightBorder(t *testing.T) {
	data, err := PNG(sample, 300)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 300 || b.Dy() != 300 {
		t.Fatalf("PNG is %v, want 300x300", b)
	}
	white := color.RGBAModel.Convert(color.White)
	for _, p := range [][2]int{{0, 0}, {299, 0}, {0, 299}, {299, 299}, {150, 2}} {
		if got := color.RGBAModel.Convert(img.At(p[0], p[1])); got != white {
			t.Fatalf("pixel %v is %v, want white (quiet zone)", p, got)
		}
	}
	dark := 0
	for y := 0; y < 300; y++ {
		for x := 0; x < 300; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) != white {
				dark++
			}
		}
	}
	if dark == 0 {
		t.Fatal("PNG has no dark module")
	}
}

func TestEmptyTextAndBadSizesAreErrors(t *testing.T) {
	if _, err := Terminal(""); err == nil {
		t.Fatal("Terminal(\"\") gave no error")
	}
	if _, err := PNG("", 256); err == nil {
		t.Fatal("PNG(\"\") gave no error")
	}
	for _, size := range []int{0, -5, 10, MaxPNGSize + 1} {
		if _, err := PNG(sample, size); err == nil {
			t.Fatalf("PNG size %d gave no error", size)
		}
	}
}
