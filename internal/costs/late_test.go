package costs_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// failLedgerWrites makes every write of a ledger row fail, as a full disk
// does (the settlement's transaction is rolled back whole), until the
// returned function is called.
func failLedgerWrites(t *testing.T, e *env) (restore func()) {
	t.Helper()
	for _, op := range []string{"INSERT", "UPDATE"} {
		q := "CREATE TRIGGER test_full_" + op + " BEFORE " + op + " ON cost_ledger BEGIN SELECT RAISE(ABORT, 'database or disk is full (test)'); END"
		if err := e.store.DB.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for _, op := range []string{"INSERT", "UPDATE"} {
			if err := e.store.DB.Exec("DROP TRIGGER test_full_" + op).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A call the provider answered with its usage, whose settlement could not
// be written (a full disk), is charged that usage once the database takes
// writes again, not its reserved worst case (#42 item 6). Before, the
// settlement was dropped and the reaper priced the call at 10,000 micros.
func TestSettlementKeptWhenItsWriteFails(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(1)(c)
		c.Costs.ReservationTTL = time.Minute
	})
	ctx := context.Background()
	c := call("openai", "exact", "full disk", 100)
	c.Meta.CallID = "answered-on-a-full-disk"
	adm, err := e.ctrl.Admit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	key := dayKey(e.clock.Now())
	restore := failLedgerWrites(t, e)
	// The provider reported 30 output tokens: 3,000 micros.
	adm.Settle(ctx, &llm.Response{Usage: llm.Usage{InputTokens: 12, OutputTokens: 30}, UsageReported: true}, nil, 1)
	if n := e.ctrl.RetryLateSettlements(ctx); n != 1 {
		t.Fatalf("kept settlements while writes fail: %d, want 1", n)
	}
	restore()
	// The reservation lapses; the reaper's pass writes the kept settlement
	// before it reaps.
	e.clock.Advance(2 * time.Minute)
	if _, err := e.ctrl.ReapOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.ctrl.RetryLateSettlements(ctx); n != 0 {
		t.Fatalf("still kept after space returned: %d", n)
	}
	row := e.row("answered-on-a-full-disk")
	if row.Outcome != models.OutcomeSucceeded || row.PricingStatus != models.PricingPriced || row.CostMicros != 3_000 ||
		row.InputTokens != 12 || row.OutputTokens != 30 || row.UsageEstimated {
		t.Fatalf("row = outcome %s, pricing %s, cost %d, tokens %d/%d, estimated %v; want the reported usage",
			row.Outcome, row.PricingStatus, row.CostMicros, row.InputTokens, row.OutputTokens, row.UsageEstimated)
	}
	if got := e.counter(key); got.ReservedMicros != 0 || got.SpentMicros != 3_000 {
		t.Fatalf("counter = %+v, want 3,000 spent and nothing reserved", got)
	}
	if rs := e.reservations(); rs.Count != 0 {
		t.Fatalf("reservations left: %+v", rs)
	}
}

// A kept settlement written only after the reaper priced its call at the
// worst case (the database refused both until then) still replaces the
// estimate: the ledger ends with the reported usage.
func TestKeptSettlementReplacesTheReapersWorstCase(t *testing.T) {
	e := newEnv(t, envOptions{}, func(c *config.Config) {
		exactConfig(1)(c)
		c.Costs.ReservationTTL = time.Minute
	})
	ctx := context.Background()
	c := call("openai", "exact", "late", 100)
	c.Meta.CallID = "reaped-then-settled"
	adm, err := e.ctrl.Admit(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	key := dayKey(e.clock.Now())
	// Only the settlement fails: the pending row is written first (the
	// journal writes admissions that outlive its hold, and the reaper).
	e.clock.Advance(2 * time.Minute)
	restore := failLedgerWrites(t, e)
	adm.Settle(ctx, &llm.Response{Usage: llm.Usage{OutputTokens: 40}, UsageReported: true}, nil, 1)
	restore()
	// Drop the kept settlement's first chance: reap directly in the store,
	// as a pass that ran while the settlement still failed would have.
	ledger, err := e.store.OpenCostLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	if _, err := ledger.ReapExpired(ctx, e.clock.Now(), 100); err != nil {
		t.Fatal(err)
	}
	if row := e.row("reaped-then-settled"); row.CostMicros != 10_000 || row.Outcome != models.OutcomeUnsettled {
		t.Fatalf("after the reap: outcome %s cost %d", row.Outcome, row.CostMicros)
	}
	if n := e.ctrl.RetryLateSettlements(ctx); n != 0 {
		t.Fatalf("still kept: %d", n)
	}
	row := e.row("reaped-then-settled")
	if row.Outcome != models.OutcomeSucceeded || row.CostMicros != 4_000 || row.OutputTokens != 40 {
		t.Fatalf("row = outcome %s cost %d tokens %d; want the reported usage", row.Outcome, row.CostMicros, row.OutputTokens)
	}
	if got := e.counter(key); got.ReservedMicros != 0 || got.SpentMicros != 4_000 {
		t.Fatalf("counter = %+v", got)
	}
}
