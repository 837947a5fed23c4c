package e2e

import (
	"strings"
	"testing"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/probe"
)

// TestProbeShort is the issue-18 probe (dev/probe, `make probe` for the
// full run) in small: 300 bad requests, the provider echoing planted
// secrets, one SIGKILL with work in flight. Every figure that must be 0 is
// 0: no 5xx or hang on bad input, no answer outside the error envelope, no
// secret on any surface, no orphaned record after the kill.
func TestProbeShort(t *testing.T) {
	// Its own gateway process and Temporal server, mostly waiting: runs
	// beside the crash tests (see crashParallel).
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	var log strings.Builder
	rep, err := probe.Run(probe.Options{Binary: gatewaytest.Binary(t, "agentryd"), Requests: 300, Kills: 1, Seed: 18,
		Workers: 2, Dir: t.TempDir(), Log: &log})
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, log.String())
	}
	var table strings.Builder
	rep.WriteTable(&table)
	if !rep.OK() || rep.BadInput.Requests != 300 || rep.Crash.Kills != 1 || len(rep.Secrets.Searched) < 8 || rep.PackageSSRF == nil || rep.PackageSSRF.Checked < 80 {
		t.Fatalf("%s\n%s", table.String(), log.String())
	}
	t.Logf("probe: %.0f s, %d requests, %d kill, every must-be-0 figure 0", rep.WallSeconds, rep.BadInput.Requests, rep.Crash.Kills)
}
