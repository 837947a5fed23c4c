package costs_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
)

// hardMode is a hard-mode configuration whose budgets never run out, so a
// benchmark measures admission and settlement, not rejections.
func hardMode(c *config.Config) {
	c.Costs.EnforcementMode = "hard"
	c.Costs.DailyBudgetUSD = 1e9
	c.Costs.MonthlyBudgetUSD = 1e9
}

// BenchmarkAdmitSettleHard: admissions per second (admit + settle, hard
// mode, daily and monthly budget) against the database, from 8 concurrent
// callers per CPU (BENCH_PARALLELISM). No provider is involved.
//
//	go test -run '^$' -bench AdmitSettleHard -benchtime 5s ./internal/costs/
func BenchmarkAdmitSettleHard(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			e := newEnv(b, envOptions{postgres: backend == "postgres"}, hardMode)
			ctx := context.Background()
			var seq atomic.Int64
			resp := &llm.Response{Usage: llm.Usage{InputTokens: 20, OutputTokens: 50}, UsageReported: true}
			b.SetParallelism(parallelism())
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c := call("openai", "gpt-4o-mini", "bench", 256)
					c.Meta.CallID = fmt.Sprintf("bench-%d", seq.Add(1))
					adm, err := e.ctrl.Admit(ctx, c)
					if err != nil {
						b.Error(err)
						return
					}
					adm.Settle(ctx, resp, nil, 1)
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "admit+settle/s")
			if rs := e.reservations(); rs.Count != 0 {
				b.Fatalf("%d reservations left", rs.Count)
			}
		})
	}
}

// instant is a provider that answers at once, so the gate's cost is all
// that is measured.
type instant struct{}

func (instant) ID() string      { return "openai" }
func (instant) Address() string { return "memory" }
func (instant) Chat(context.Context, llm.Request) (*llm.Response, error) {
	return &llm.Response{Content: "ok", Usage: llm.Usage{InputTokens: 20, OutputTokens: 5}, UsageReported: true}, nil
}
func (i instant) Stream(ctx context.Context, r llm.Request, _ func(string) error) (*llm.Response, error) {
	return i.Chat(ctx, r)
}

// BenchmarkGateLatency: the latency Router.Do gains from the gate (hard
// mode) over an instant provider, sequential calls; reports the p50 with
// and without the gate and their difference.
//
//	go test -run '^$' -bench GateLatency -benchtime 2000x ./internal/costs/
func BenchmarkGateLatency(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			e := newEnv(b, envOptions{postgres: backend == "postgres"}, hardMode)
			gated := llm.NewRouter(map[string]llm.Provider{"openai": instant{}}, "openai")
			gated.SetGate(e.ctrl)
			bare := llm.NewRouter(map[string]llm.Provider{"openai": instant{}}, "openai")
			ctx := context.Background()
			n := max(b.N, 500)
			measure := func(r *llm.Router, i int) time.Duration {
				c := call("openai", "gpt-4o-mini", "latency", 256)
				c.Meta.CallID = fmt.Sprintf("lat-%p-%d", r, i)
				start := time.Now()
				if _, err := r.Do(ctx, c); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			for i := range 50 {
				measure(gated, -i-1)
			}
			on, off := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
			b.ResetTimer()
			for i := range n {
				on = append(on, measure(gated, i))
				off = append(off, measure(bare, i))
			}
			b.StopTimer()
			p50 := func(l []time.Duration) time.Duration {
				sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
				return l[len(l)/2]
			}
			b.ReportMetric(float64(p50(on).Microseconds()), "gated-p50-µs")
			b.ReportMetric(float64(p50(off).Microseconds()), "bare-p50-µs")
			b.ReportMetric(float64((p50(on) - p50(off)).Microseconds()), "added-p50-µs")
		})
	}
}

// parallelism is callers per CPU of BenchmarkAdmitSettleHard
// (BENCH_PARALLELISM, default 8).
func parallelism() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_PARALLELISM")); err == nil && n > 0 {
		return n
	}
	return 8
}

// BenchmarkAdmitCostCap: the admission cost of a run tree's cost cap:
// admit + settle of one call (hard mode, SQLite and PostgreSQL),
// sequential, without a cap and with one (the call is then also charged to
// and checked against the tree's cap counter).
//
//	go test -run '^$' -bench AdmitCostCap -benchtime 2000x ./internal/costs/
func BenchmarkAdmitCostCap(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, capped := range []bool{false, true} {
			name := backend + "/no-cap"
			if capped {
				name = backend + "/cap"
			}
			b.Run(name, func(b *testing.B) {
				e := newEnv(b, envOptions{postgres: backend == "postgres"}, hardMode)
				ctx := context.Background()
				resp := &llm.Response{Usage: llm.Usage{InputTokens: 20, OutputTokens: 50}, UsageReported: true}
				b.ResetTimer()
				for i := range b.N {
					c := call("openai", "gpt-4o-mini", "bench", 256)
					c.Meta.CallID = fmt.Sprintf("capbench-%d", i)
					c.Meta.RunID = "taskrun-1"
					if capped {
						c.Meta.CostCapMicros = 1e15
					}
					adm, err := e.ctrl.Admit(ctx, c)
					if err != nil {
						b.Fatal(err)
					}
					adm.Settle(ctx, resp, nil, 1)
				}
			})
		}
	}
}
