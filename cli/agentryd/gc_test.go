package agentryd

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestGatewayGCTargetUnlessGOGCIsSet(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	os.Unsetenv("GOGC")
	setGCDefault()
	if got := debug.SetGCPercent(100); got != gatewayGCPercent {
		t.Errorf("without GOGC the target is %d, want %d", got, gatewayGCPercent)
	}

	os.Setenv("GOGC", "150")
	setGCDefault()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set the gateway changed the target to %d", got)
	}
}
