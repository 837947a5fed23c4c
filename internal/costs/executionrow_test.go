package costs_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// A durable turn's executions (llm.CallMeta.RowPerExecution) each get a
// ledger row: the interrupted first keeps its pending row (the reaper prices
// it at its worst case), a failed provider call keeps its failed row, the
// execution that succeeds has a row of its own; a rejected admission (no
// provider call) is reused by the next execution.
func TestRowPerExecution(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testRowPerExecution(t, envOptions{}) })
	t.Run("postgres", func(t *testing.T) { testRowPerExecution(t, envOptions{postgres: true}) })
}

func testRowPerExecution(t *testing.T, o envOptions) {
	e := newEnv(t, o, func(c *config.Config) {
		exactConfig(1)(c)
		c.Costs.ReservationTTL = time.Minute
		c.LLM.AllowedProviders = []string{"openai"}
	})
	scriptExact(e.fake)
	e.fake.Script(fakellm.Rule{Contains: "boom", Times: 1, Status: 503, Message: "overloaded"})
	ctx := llm.WithoutRetries(context.Background())
	durable := func(provider, text string) *llm.Call {
		c := call(provider, "exact", text, 100)
		c.Meta.CallID, c.Meta.RowPerExecution = "wf-a1-t1", true
		return c
	}

	// Execution 1 is admitted and then its worker dies: never settled.
	first := durable("openai", "boom again")
	if _, err := e.ctrl.Admit(ctx, first); err != nil {
		t.Fatal(err)
	}
	if first.Meta.CallID != "wf-a1-t1" {
		t.Fatalf("first execution's id %q, want the base id", first.Meta.CallID)
	}
	// Execution 2 reaches the provider, which fails.
	second := durable("openai", "boom again")
	if _, err := e.router.Do(ctx, second); err == nil {
		t.Fatal("the scripted 503 did not fail the call")
	}
	// Execution 3 succeeds.
	third := durable("openai", "boom again")
	if _, err := e.router.Do(ctx, third); err != nil {
		t.Fatal(err)
	}
	if second.Meta.CallID != "wf-a1-t1-r2" || third.Meta.CallID != "wf-a1-t1-r3" {
		t.Fatalf("ids %q %q, want -r2 and -r3", second.Meta.CallID, third.Meta.CallID)
	}
	if n := e.fake.CallCount(); n != 2 {
		t.Fatalf("provider calls %d, want 2", n)
	}
	// (The interrupted execution's row may still be in SQLite's admission
	// journal, which ExecutionCallID reads too: checked after the reaper.)
	if r := e.row("wf-a1-t1-r2"); r.Outcome != models.OutcomeFailed || r.Executions != 1 {
		t.Fatalf("failed row %+v", r)
	}
	if r := e.row("wf-a1-t1-r3"); r.Outcome != models.OutcomeSucceeded || r.Executions != 1 || r.CostMicros <= 0 {
		t.Fatalf("succeeded row %+v", r)
	}
	// The interrupted execution is priced at its reserved worst case,
	// marked estimated.
	e.clock.Advance(2 * time.Minute)
	if n, err := e.ctrl.ReapOnce(ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d (%v)", n, err)
	}
	if r := e.row("wf-a1-t1"); r.Executions != 1 || r.Outcome != models.OutcomeUnsettled || r.PricingStatus != models.PricingEstimated || r.CostMicros != 10_000 {
		t.Fatalf("reaped row %+v", r)
	}
	// A fourth execution (say the answer could not be stored) is -r4.
	fourth := durable("openai", "again")
	if _, err := e.router.Do(ctx, fourth); err != nil || fourth.Meta.CallID != "wf-a1-t1-r4" {
		t.Fatalf("fourth execution %q (%v)", fourth.Meta.CallID, err)
	}

	// Rejected executions reuse their row: no provider call, one row.
	for range 3 {
		c := durable("anthropic", "not allowed")
		c.Meta.CallID = "wf-a1-t2"
		if _, err := e.router.Do(ctx, c); err == nil || c.Meta.CallID != "wf-a1-t2" {
			t.Fatalf("rejected execution %q (%v)", c.Meta.CallID, err)
		}
	}
	rows := e.rows()
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5: %+v", len(rows), rows)
	}
	if r := e.row("wf-a1-t2"); r.Outcome != models.OutcomeRejected {
		t.Fatalf("rejected row %+v", r)
	}
}
