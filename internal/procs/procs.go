// Package procs runs the Go scheduler on one processor while the gateway has
// about one goroutine to run at a time, and gives it every processor again
// as soon as goroutines queue (adaptive GOMAXPROCS).
//
// Why: at low concurrency a second processor costs more than it gives. A
// chat request is a chain of short steps separated by waits on the network
// (client, provider) and the disk; with two processors every wake-up is a
// hand-off between threads, and the idle processor's thread spins looking
// for work (the gateway made ten nanosleep calls per request at one
// connection), taking CPU from the processes at the other end of the
// sockets. Measured on the 2-core bench (docs/benchmarks/2026-11-history.md, "Chat path:
// adaptive GOMAXPROCS"): one processor served up to 20 % more requests per
// second at one connection and more still at two, with a lower p50; from
// eight connections on, two processors serve more. Neither setting is right for both, so the
// gateway watches how many goroutines want a processor and switches.
//
// A switch is runtime.GOMAXPROCS, a stop-the-world pause of tens of
// microseconds; the windows below keep switches to a few per second at
// most, and usually to none while the load is steady.
package procs

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"time"
)

// Windows of the controller, in samples of Interval.
const (
	// Interval is the time between samples of the scheduler's counts.
	Interval = 10 * time.Millisecond
	// upWindow: on one processor, the mean demand of the last upWindow
	// samples at or above upDemand gives every processor back (50 ms:
	// queued goroutines wait for a processor only that long).
	upWindow = 5
	upDemand = 6.0
	// downWindow: on every processor, a mean demand below downDemand over
	// the last downWindow samples (1 s) goes down to one.
	downWindow = 100
	downDemand = 2.5
)

// Start runs the controller until ctx ends, then restores the parallelism
// the process started with. It does nothing (and returns at once) when the
// process has one processor, or when the GOMAXPROCS environment variable
// chose the parallelism: an operator's setting wins.
func Start(ctx context.Context, log *slog.Logger) {
	max := runtime.GOMAXPROCS(0)
	if adaptable(os.Getenv("GOMAXPROCS"), max) && newSampler().supported() {
		go run(ctx, max, Interval, log)
	}
}

// adaptable reports whether there is anything to adapt: not when the
// operator set GOMAXPROCS (env), nor with one processor.
func adaptable(env string, procs int) bool {
	return env == "" && procs >= 2
}

// run samples the scheduler every interval and applies the governor's
// decisions.
func run(ctx context.Context, max int, interval time.Duration, log *slog.Logger) {
	defer runtime.GOMAXPROCS(max)
	g := newGovernor(max)
	s := newSampler()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n, changed := g.observe(s.demand()); changed {
			runtime.GOMAXPROCS(n)
			if log != nil {
				log.Debug("GOMAXPROCS changed", "procs", n)
			}
		}
	}
}

// sampler reads the scheduler's goroutine counts.
type sampler struct{ samples []metrics.Sample }

func newSampler() *sampler {
	return &sampler{samples: []metrics.Sample{
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/runnable:goroutines"},
	}}
}

// supported reports whether this Go runtime has the counts: without them
// demand would read 0 and hold the process on one processor.
func (s *sampler) supported() bool {
	metrics.Read(s.samples)
	for _, m := range s.samples {
		if m.Value.Kind() != metrics.KindUint64 {
			return false
		}
	}
	return true
}

// demand is how many goroutines, other than the caller, are running or
// waiting for a processor right now.
func (s *sampler) demand() float64 {
	metrics.Read(s.samples)
	var n uint64
	for _, m := range s.samples {
		if m.Value.Kind() == metrics.KindUint64 {
			n += m.Value.Uint64()
		}
	}
	if n > 0 {
		n-- // the sampler itself is running
	}
	return float64(n)
}

// governor decides the parallelism from demand samples. It is separate from
// the sampling so that its decisions can be tested with made-up demand.
type governor struct {
	max, cur int
	ring     [downWindow]float64 // the last samples, newest at pos-1
	pos      int
	// since counts samples taken since the last switch: a window is judged
	// only on samples of the current setting (and only once it has them).
	since int
}

func newGovernor(max int) *governor { return &governor{max: max, cur: max} }

// observe records one demand sample and returns the parallelism to use and
// whether it changed.
func (g *governor) observe(demand float64) (int, bool) {
	g.ring[g.pos] = demand
	g.pos = (g.pos + 1) % len(g.ring)
	g.since++
	switch {
	case g.cur == 1 && g.since >= upWindow && g.mean(upWindow) >= upDemand:
		g.cur = g.max
	case g.cur > 1 && g.since >= downWindow && g.mean(downWindow) < downDemand:
		g.cur = 1
	default:
		return g.cur, false
	}
	g.since = 0
	return g.cur, true
}

// mean is the mean of the newest n samples (n <= since).
func (g *governor) mean(n int) float64 {
	var sum float64
	for i := 1; i <= n; i++ {
		sum += g.ring[(g.pos-i+len(g.ring))%len(g.ring)]
	}
	return sum / float64(n)
}
