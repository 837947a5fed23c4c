package agentryd

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

// restoreGC puts the test process's collector back as it was.
func restoreGC(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) })
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Setenv(v, "") // restored after the test
		os.Unsetenv(v)
	}
}

// Issue 43: the default is Go's own collector under a soft memory limit,
// not GOGC=400.
func TestDefaultGCIsGosOwnUnderASoftMemoryLimit(t *testing.T) {
	restoreGC(t)
	applyGC(config.Defaults().Server)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("default GC target %d, want Go's 100", got)
	}
	want, _ := config.ParseMemoryLimit(config.DefaultMemoryLimit)
	if got := debug.SetMemoryLimit(-1); got != want || want != 512<<20 {
		t.Errorf("default memory limit %d, want %d (512MiB)", got, want)
	}
}

func TestGCKeysApplyUnlessTheEnvironmentSaysOtherwise(t *testing.T) {
	restoreGC(t)
	s := config.Defaults().Server
	s.GCPercent, s.MemoryLimit = 400, "1GiB"
	applyGC(s)
	if got := debug.SetGCPercent(100); got != 400 {
		t.Errorf("server.gc_percent 400 gave %d", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != 1<<30 {
		t.Errorf("server.memory_limit 1GiB gave %d", got)
	}

	s.GCPercent, s.MemoryLimit = 0, "off"
	applyGC(s)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory_limit off set a limit: %d", got)
	}
	s.GCPercent = 400

	os.Setenv("GOGC", "150")
	os.Setenv("GOMEMLIMIT", "2GiB")
	s.MemoryLimit = "256MiB"
	applyGC(s)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set the gateway changed the target to %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set the gateway changed the limit to %d", got)
	}
}
