package jsonpath

import (
	"strings"
	"testing"
)

// FuzzParse: any path either parses into non-empty segments or is an error;
// never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"$", "$.a.b", "a..b", "items[0].text", "items[0", "x[]", "a.", "$[0]", `a["k"]`, "\x00", "[[[", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		segs, err := Parse(p)
		if err != nil {
			return
		}
		for _, s := range segs {
			if s == "" {
				t.Fatalf("%q parsed with an empty segment: %q", p, segs)
			}
		}
		if strings.Contains(p, "..") && !strings.Contains(p, "[") {
			t.Fatalf("%q (an empty segment) was accepted: %q", p, segs)
		}
	})
}
