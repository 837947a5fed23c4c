package temporalconn

import "testing"

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7233":        true,
		"localhost:7233":        true,
		"[::1]:7233":            true,
		"127.0.0.2:7233":        true,
		"10.0.0.5:7233":         false,
		"temporal.example:7233": false,
		"my.tmprl.cloud:7233":   false,
		"127.0.0.1":             false, // no port: not an address Dial is given
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
