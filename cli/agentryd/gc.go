package agentryd

import (
	"os"
	"runtime/debug"
)

// gatewayGCPercent is the gateway's garbage-collection target when the
// GOGC environment variable is unset: the heap may grow to five times what
// the last collection kept (Go's default is twice).
//
// Why: under chat load the gateway collects about twice a second, and the
// collector's marking plus the allocation assists it charges to requests
// were about a tenth of the gateway's CPU per request. At 64 connections on
// the bench machine 400 took 7 % off the gateway's CPU per request and
// served 6-8 % more requests per second, for about 145 MB more resident
// memory under that load (430 MB against 285 MB; the Go heap is a fraction
// of it, SQLite's pages are outside). docs/benchmarks.md has the figures;
// GOGC=100 trades them back, and GOMEMLIMIT caps the heap as usual.
const gatewayGCPercent = 400

// setGCDefault applies gatewayGCPercent unless GOGC is set.
func setGCDefault() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(gatewayGCPercent)
}
