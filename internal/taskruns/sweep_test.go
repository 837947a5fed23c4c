package taskruns

import (
	"testing"
	"time"
)

// On SQLite the first sweep leaves alone the runs this process queued
// since it built the service (its own requests may be between insert and
// start when the sweep's lease is taken): only older ones are a dead
// process's.
func TestFirstSweepSparesThisProcesssRuns(t *testing.T) {
	s, _ := newService(t)
	now := time.Now()
	if g := s.firstSweepGrace(now); g != 0 {
		t.Fatalf("without BuiltAt the first sweep's grace is %v, want 0", g)
	}
	s.BuiltAt = now.Add(-3 * time.Second)
	if g := s.firstSweepGrace(now); g != 3*time.Second {
		t.Fatalf("grace %v, want 3s (runs queued before the service was built)", g)
	}
	s.BuiltAt = now.Add(time.Second) // a clock step back: never negative
	if g := s.firstSweepGrace(now); g != 0 {
		t.Fatalf("grace %v, want 0", g)
	}
}
