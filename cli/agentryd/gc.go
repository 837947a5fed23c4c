package agentryd

import (
	"os"
	"runtime/debug"

	"github.com/agentryhq/agentry/internal/config"
)

// applyGC sets the process's garbage collector from the configuration:
// Go's own collector (GOGC 100) unless server.gc_percent says otherwise,
// under the soft memory limit of server.memory_limit (512MiB by default).
// The GOGC and GOMEMLIMIT environment variables win over the keys, as for
// any Go program.
//
// Why not GOGC=400 any more (issue 43): it took about 7 % off the
// gateway's CPU per request under chat load, for 145 MB or more of extra
// resident memory (chat load held 520-570 MB). A gateway sized for a small
// host matters more; server.gc_percent: 400 keeps the faster setting.
// docs/benchmarks.md ("Memory: Go's collector and a soft limit") has
// the figures.
func applyGC(s config.ServerConfig) {
	if _, set := os.LookupEnv("GOGC"); !set && s.GCPercent > 0 {
		debug.SetGCPercent(s.GCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		// Validate has checked the value; an error here cannot happen.
		if limit, err := config.ParseMemoryLimit(s.MemoryLimit); err == nil && limit > 0 {
			debug.SetMemoryLimit(limit)
		}
	}
}
