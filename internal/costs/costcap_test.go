package costs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// capCall is a call of run (a child of root when they differ) under a cap.
func capCall(root, run string, i int, capUSD float64) *llm.Call {
	c := call("openai", "exact", fmt.Sprintf("%s %d", run, i), 100)
	c.Meta.CallID = fmt.Sprintf("cap-%s-%d", run, i)
	c.Meta.RunID, c.Meta.Source = run, llm.SourceTask
	if run != root {
		c.Meta.RootRunID = root
	}
	c.Meta.CostCapMicros = models.USDToMicros(capUSD)
	return c
}

// TestCostCapHoldsUnderConcurrency: a run tree's cap of $0.05 and 40 calls
// of its root and three children at once, each with a worst case (and an
// actual cost) of exactly $0.01: exactly five are served, the tree's
// recorded spend is the cap, never more, every other call is refused with
// cost_cap before any provider access, and another tree is not affected.
// In soft mode too (the cap is enforced in every mode).
func TestCostCapHoldsUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name     string
		postgres bool
		mode     string
	}{{"sqlite-hard", false, "hard"}, {"sqlite-soft", false, "soft"}, {"postgres-hard", true, "hard"}, {"postgres-soft", true, "soft"}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{postgres: tc.postgres}, func(c *config.Config) {
				exactConfig(0)(c)
				c.Costs.EnforcementMode = tc.mode
			})
			scriptExact(e.fake)
			ctx := context.Background()
			const n = 40
			runs := []string{"root", "child-a", "child-b", "child-c"}
			var served, refused atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, err := e.router.Do(ctx, capCall("root", runs[i%len(runs)], i, 0.05))
					switch {
					case err == nil:
						served.Add(1)
					case errors.Is(err, costs.ErrCostCap):
						refused.Add(1)
						if r, _ := costs.AsRejection(err); r.Status() != 402 || r.Scope != "cap" {
							t.Errorf("rejection %+v", r)
						}
					default:
						t.Errorf("call %d: %v", i, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			cv := e.counter("cap:root")
			t.Logf("served %d, refused %d, tree spent $%.6f", served.Load(), refused.Load(), models.MicrosToUSD(cv.SpentMicros))
			if served.Load() != 5 || refused.Load() != n-5 {
				t.Fatalf("served %d refused %d, want exactly 5 served (5 x $0.01 = the $0.05 cap)", served.Load(), refused.Load())
			}
			if cv.SpentMicros != 50_000 || cv.ReservedMicros != 0 {
				t.Fatalf("cap counter = %+v", cv)
			}
			var treeSpent int64
			for _, r := range e.rows() {
				if r.RootRunID != "root" {
					t.Fatalf("row %s root_run_id %q", r.CallID, r.RootRunID)
				}
				treeSpent += r.CostMicros
				if r.Outcome == models.OutcomeRejected && r.RejectionCode != costs.CodeCostCap {
					t.Fatalf("rejected row code %q", r.RejectionCode)
				}
			}
			if treeSpent != 50_000 {
				t.Fatalf("ledger rows of the tree cost %d micros, want the cap", treeSpent)
			}
			if got := e.fake.CallCount(); int64(got) != served.Load() {
				t.Fatalf("the provider saw %d calls, %d were served", got, served.Load())
			}
			// Another tree has its own cap.
			if _, err := e.router.Do(ctx, capCall("other", "other", 0, 0.05)); err != nil {
				t.Fatal(err)
			}
			// Raising the cap lets the tree go on: exactly as far as the new cap.
			for i := range 3 {
				_, err := e.router.Do(ctx, capCall("root", "child-a", 100+i, 0.07))
				if i < 2 && err != nil {
					t.Fatalf("after raising the cap: %v", err)
				}
				if i == 2 && !errors.Is(err, costs.ErrCostCap) {
					t.Fatalf("third call past the raised cap: %v", err)
				}
			}
		})
	}
}

// A call whose worst case does not fit what is left of the cap is clamped
// to the output that fits (as a hard budget clamps), so spend stays within
// the cap to the micro-dollar.
func TestCostCapClampsTheLastCall(t *testing.T) {
	e := newEnv(t, envOptions{}, exactConfig(0))
	scriptExact(e.fake)
	ctx := context.Background()
	if _, err := e.router.Do(ctx, capCall("r", "r", 0, 0.015)); err != nil {
		t.Fatal(err)
	}
	// The provider honours the clamped allowance (a real one cannot exceed it).
	e.fake.Script(fakellm.Rule{Model: "exact", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 50}})
	if _, err := e.router.Do(ctx, capCall("r", "r", 1, 0.015)); err != nil {
		t.Fatal(err)
	}
	calls := e.fake.Calls()
	if got := calls[len(calls)-1].MaxTokens; got != 50 {
		t.Fatalf("clamped to %d tokens, want 50 ($0.005 left)", got)
	}
	if cv := e.counter("cap:r"); cv.SpentMicros != 15_000 {
		t.Fatalf("spent %d micros, want the $0.015 cap exactly", cv.SpentMicros)
	}
	if _, err := e.router.Do(ctx, capCall("r", "r", 2, 0.015)); !errors.Is(err, costs.ErrCostCap) {
		t.Fatalf("a call past the cap: %v", err)
	}
}

// Calls without a cap do not touch a cap counter (the common path costs
// nothing more).
func TestNoCapNoCounter(t *testing.T) {
	e := newEnv(t, envOptions{}, exactConfig(0))
	scriptExact(e.fake)
	c := capCall("r", "r", 0, 0)
	if _, err := e.router.Do(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	cs, err := e.store.BudgetCounters(context.Background(), []string{"cap:r"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cs["cap:r"]; ok {
		t.Fatal("a call without a cap created a cap counter")
	}
}
