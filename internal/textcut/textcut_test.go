package textcut

import (
	"testing"
	"unicode/utf8"
)

func TestPrefixNeverSplitsACharacter(t *testing.T) {
	s := "aé€😀b" // 1 + 2 + 3 + 4 + 1 bytes
	want := map[int]string{-1: "", 0: "", 1: "a", 2: "a", 3: "aé", 4: "aé", 5: "aé", 6: "aé€", 9: "aé€", 10: "aé€😀", 11: s, 50: s}
	for n, w := range want {
		got := Prefix(s, n)
		if got != w || !utf8.ValidString(got) {
			t.Errorf("Prefix(%q, %d) = %q, want %q", s, n, got, w)
		}
	}
}

func FuzzPrefix(f *testing.F) {
	f.Add("aé€😀b", 4)
	f.Add("0000000\xb0\xb0\xb0\xb0", 10) // stray continuation bytes
	f.Add("ǩ", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Prefix(s, n)
		if len(got) > max(n, 0) && got != s {
			t.Fatalf("Prefix(%q, %d) = %q: longer than %d", s, n, got, n)
		}
		if len(s) > n && n >= 0 && len(got) < n-utf8.UTFMax+1 {
			t.Fatalf("Prefix(%q, %d) = %q: cut more than one character", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Prefix(%q, %d) = %q: invalid UTF-8", s, n, got)
		}
	})
}
