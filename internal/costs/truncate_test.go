package costs

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Long provider model names are cut on character boundaries (issue 18
// item 8): a byte cut left invalid UTF-8 in the ledger.
func TestTruncateKeepsUTF8(t *testing.T) {
	long := strings.Repeat("a", 190) + "模型名"
	got := truncate(long, 191)
	if !utf8.ValidString(got) || got != strings.Repeat("a", 190) {
		t.Fatalf("%q", got)
	}
	if got := truncate("ok\xff\xfe", 191); !utf8.ValidString(got) {
		t.Fatalf("invalid UTF-8 kept: %q", got)
	}
	if got := truncate("短い", 191); got != "短い" {
		t.Fatalf("%q", got)
	}
}
