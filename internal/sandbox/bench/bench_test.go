// Package bench holds the code-execution figures of docs/benchmarks.md:
// p50/p99 of print(1) per backend, executions per second with 8
// concurrent, and the pool's RSS. Run with
//
//	AGENTRY_SANDBOX_BENCH=1 go test -run TestCodeExecutionFigures -v ./internal/sandbox/bench/
package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/sandbox/pool"
	"github.com/agentryhq/agentry/internal/sandbox/process"
)

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func measure(t *testing.T, e sandbox.Executor, n int) (p50, p99 time.Duration, perSec float64) {
	ctx := context.Background()
	var lat []time.Duration
	for range n {
		dir := t.TempDir()
		start := time.Now()
		res, err := e.Run(ctx, sandbox.Request{Code: "print(1)", Dir: dir})
		if err != nil || strings.TrimSpace(res.Stdout) != "1" {
			t.Fatalf("%s: %+v %v", e.Name(), res, err)
		}
		lat = append(lat, time.Since(start))
		if pl, ok := e.(*pool.Executor); ok {
			// Sequential calls measure a warm call: wait for the spare.
			for deadline := time.Now().Add(5 * time.Second); pl.Warm() < 8 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	const conc, total = 8, 48
	var wg sync.WaitGroup
	jobs := make(chan struct{}, total)
	for range total {
		jobs <- struct{}{}
	}
	close(jobs)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if _, err := e.Run(ctx, sandbox.Request{Code: "print(1)", Dir: t.TempDir()}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	return pct(lat, 0.5), pct(lat, 0.99), float64(total) / time.Since(start).Seconds()
}

func rssKB(pid int) int {
	// the jail's processes: pid and its descendants (by PPid over /proc)
	parent := map[int]int{}
	rss := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "PPid:":
				parent[p], _ = strconv.Atoi(f[1])
			case "VmRSS:":
				rss[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	total := 0
	for p := range rss {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				total += rss[p]
				break
			}
		}
	}
	return total
}

func TestCodeExecutionFigures(t *testing.T) {
	if os.Getenv("AGENTRY_SANDBOX_BENCH") == "" {
		t.Skip("set AGENTRY_SANDBOX_BENCH=1 (figures for docs/benchmarks.md)")
	}
	py := os.Getenv("AGENTRY_SANDBOX_BENCH_PYTHON") // e.g. /usr/bin/python3
	jail := sandbox.NewJail(sandbox.JailConfig{PythonPath: py})
	if !jail.Isolation().Confined {
		t.Fatal("no isolation here")
	}
	t.Logf("isolation: %s", jail.Isolation().Summary())
	p50, p99, rate := measure(t, process.New(jail), 40)
	t.Logf("process: print(1) p50 %s p99 %s; %.1f executions/s with 8 concurrent", p50.Round(time.Millisecond), p99.Round(time.Millisecond), rate)
	pl, err := pool.New(jail, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	for deadline := time.Now().Add(30 * time.Second); pl.Warm() < 8 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	rss := 0
	for _, pid := range pl.Pids() {
		rss += rssKB(pid)
	}
	t.Logf("pool: %d warm jails, RSS %d KiB in all (%d KiB each)", pl.Warm(), rss, rss/max(pl.Warm(), 1))
	p50, p99, rate = measure(t, pl, 40)
	t.Logf("pool: print(1) p50 %s p99 %s; %.1f executions/s with 8 concurrent", p50.Round(time.Millisecond), p99.Round(time.Millisecond), rate)
}
