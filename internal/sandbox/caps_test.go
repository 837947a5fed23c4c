package sandbox

import (
	"testing"
	"time"
)

// TestCapsFromDefaults: a request's caps take the jail's (and the jail's
// the documented defaults) where they are zero, keep what they set, and
// either side's network grant opens the network.
func TestCapsFromDefaults(t *testing.T) {
	if got := (Caps{}).WithDefaults(); got != DefaultCaps() {
		t.Fatalf("zero caps with defaults: %+v", got)
	}
	j := NewJail(JailConfig{Caps: Caps{WallTime: 5 * time.Second, Processes: 8}})
	got := j.capsFor(Request{Caps: Caps{CPUTime: time.Second, MemoryBytes: 1 << 20, Network: true}})
	want := DefaultCaps()
	want.WallTime, want.Processes, want.CPUTime, want.MemoryBytes, want.Network = 5*time.Second, 8, time.Second, 1<<20, true
	if got != want {
		t.Fatalf("caps %+v, want %+v", got, want)
	}
	j = NewJail(JailConfig{Caps: Caps{Network: true}})
	if got := j.capsFor(Request{}); !got.Network || got.OutputBytes != DefaultCaps().OutputBytes {
		t.Fatalf("jail-wide network grant: %+v", got)
	}
}
