package sqlitewriter

import (
	"strings"
	"testing"
)

func TestBoxStableKeepsTheValue(t *testing.T) {
	agent := strings.Repeat("agent", 3) // made at run time, like a configured value
	if BoxStable(agent) != any(agent) || BoxStable("") != any("") {
		t.Fatal("a boxed string differs from the string")
	}
	if n := testing.AllocsPerRun(100, func() { _ = BoxStable(agent) }); n != 0 {
		t.Fatalf("boxing the same string again allocated %v times", n)
	}
	// A different string with equal bytes, and strings sharing a prefix of
	// the same bytes, box their own contents.
	other := strings.Repeat("agent", 3)
	if BoxStable(other) != any(agent) {
		t.Fatal("equal strings at different addresses box differently")
	}
	long := "agentagentagent-and-more"
	for n := 1; n <= len(long); n++ {
		if got := BoxStable(long[:n]); got != any(long[:n]) {
			t.Fatalf("prefix of %d bytes boxed as %q", n, got)
		}
	}
}

func BenchmarkBoxStable(b *testing.B) {
	agent := strings.Repeat("agent", 3)
	b.ReportAllocs()
	for range b.N {
		_ = BoxStable(agent)
	}
}
