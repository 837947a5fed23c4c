package procs

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// feed gives g n samples of demand d and returns the sample (1-based) at
// which the parallelism changed, or 0.
func feed(g *governor, d float64, n int) (switchedAt int) {
	for i := 1; i <= n; i++ {
		if _, changed := g.observe(d); changed && switchedAt == 0 {
			switchedAt = i
		}
	}
	return switchedAt
}

func TestGovernorGoesDownAfterAWholeQuietWindow(t *testing.T) {
	g := newGovernor(2)
	if at := feed(g, 1, downWindow); at != downWindow || g.cur != 1 {
		t.Fatalf("quiet for a window: switched at sample %d to %d procs, want sample %d and 1", at, g.cur, downWindow)
	}
	g = newGovernor(2)
	feed(g, 1, downWindow-1)
	if g.cur != 2 {
		t.Fatalf("went down before a whole window of samples")
	}
}

func TestGovernorGoesUpWhenGoroutinesQueue(t *testing.T) {
	g := newGovernor(4)
	feed(g, 0, downWindow)
	if g.cur != 1 {
		t.Fatalf("procs %d after a quiet window, want 1", g.cur)
	}
	if at := feed(g, 10, upWindow); at != upWindow || g.cur != 4 {
		t.Fatalf("queued goroutines: switched at sample %d to %d procs, want sample %d and 4", at, g.cur, upWindow)
	}
}

// Between the two thresholds neither setting is left: the hysteresis keeps
// a steady load from switching back and forth.
func TestGovernorHoldsBetweenTheThresholds(t *testing.T) {
	mid := (upDemand + downDemand) / 2
	g := newGovernor(2)
	if at := feed(g, mid, 10*downWindow); at != 0 {
		t.Fatalf("on every processor, demand %.1f switched at sample %d", mid, at)
	}
	feed(g, 0, downWindow)
	if at := feed(g, mid, 10*downWindow); at != 0 || g.cur != 1 {
		t.Fatalf("on one processor, demand %.1f switched at sample %d", mid, at)
	}
}

// A window is judged on samples of the current setting only: the busy
// samples that sent it up do not count against going down again, and a
// quiet spell before going down does not delay going up.
func TestGovernorJudgesOnlySamplesSinceTheSwitch(t *testing.T) {
	g := newGovernor(2)
	feed(g, 0, downWindow)
	feed(g, upDemand*2, upWindow)
	if g.cur != 2 {
		t.Fatalf("did not go up")
	}
	if at := feed(g, 0, downWindow); at != downWindow {
		t.Fatalf("went down at sample %d after going up, want %d (a whole window of its own)", at, downWindow)
	}
}

func TestAdaptableOnlyWithoutAnOperatorSettingAndWithTwoProcessors(t *testing.T) {
	for _, c := range []struct {
		env     string
		current int
		want    bool
	}{{"", 2, true}, {"", 8, true}, {"", 1, false}, {"2", 2, false}, {"1", 1, false}} {
		if ok := adaptable(c.env, c.current); ok != c.want {
			t.Errorf("adaptable(%q, %d) = %v, want %v", c.env, c.current, ok, c.want)
		}
	}
}

// The controller itself, on the real scheduler: an idle process goes down
// to one processor, goroutines that want CPU bring every processor back,
// and stopping it restores the parallelism it started with.
func TestControllerFollowsTheLoad(t *testing.T) {
	start := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(start)
	runtime.GOMAXPROCS(2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { run(ctx, 2, time.Millisecond, nil); close(done) }()

	waitProcs(t, 1, "idle")

	var stop atomic.Bool
	for range 12 {
		go func() {
			for !stop.Load() {
				for i := 0; i < 1e5; i++ {
					_ = i * i
				}
			}
		}()
	}
	waitProcs(t, 2, "twelve goroutines spinning")
	stop.Store(true)
	waitProcs(t, 1, "idle again")

	cancel()
	<-done
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Fatalf("GOMAXPROCS %d after the controller stopped, want 2 restored", n)
	}
}

func waitProcs(t *testing.T, want int, while string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for runtime.GOMAXPROCS(0) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: GOMAXPROCS stayed %d, want %d", while, runtime.GOMAXPROCS(0), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestThisRuntimeHasTheCounts(t *testing.T) {
	if !newSampler().supported() {
		t.Fatal("runtime/metrics lacks the scheduler's goroutine counts: the controller would never run")
	}
}
