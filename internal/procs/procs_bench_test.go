package procs

import "testing"

// BenchmarkSample is the cost of one sample of the scheduler's counts (the
// controller takes 100 a second), with as many parked goroutines as an
// embedded Temporal server keeps.
func BenchmarkSample(b *testing.B) {
	stop := make(chan struct{})
	defer close(stop)
	for range 5000 {
		go func() { <-stop }()
	}
	s := newSampler()
	for b.Loop() {
		s.demand()
	}
}
