package models

import (
	"context"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/testenv"
)

// postgresLedger opens a fresh PostgreSQL database with the cost ledger
// and a counter "day:x".
func postgresLedger(t *testing.T) *CostLedger {
	t.Helper()
	return ledgerWithCounters(t, mustOpen(t, Options{Driver: DriverPostgres, DSN: testenv.Postgres(t)}), "day:x")
}

// admitAndHold admits call id with a reservation of 50 and holds its
// settlement (cost 9) in ctx; results receive the settlement's result.
func admitAndHold(t *testing.T, l *CostLedger, ctx context.Context, id string) chan SettleResult {
	t.Helper()
	now := time.Now().UTC()
	keys := []string{"day:x"}
	res, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry(id, now), AdmissionID: "a-" + id, Keys: keys, WorstMicros: 50, ExpiresAt: now.Add(time.Minute)})
	if err != nil || !res.Admitted {
		t.Fatalf("admit %s: %+v %v", id, res, err)
	}
	results := make(chan SettleResult, 1)
	held := l.SettleCallLater(ctx, Settlement{CallID: id, AdmissionID: "a-" + id, ReservationID: "a-" + id, Keys: keys,
		Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 9, FinishedAt: now}, func(r SettleResult, err error) {
		if err != nil {
			t.Errorf("settle %s: %v", id, err)
		}
		results <- r
	})
	if !held {
		t.Fatalf("settlement of %s not held", id)
	}
	return results
}

func ledgerOutcome(t *testing.T, l *CostLedger, id string) string {
	t.Helper()
	e, err := l.GetLedgerEntry(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e.Outcome
}

func messagesOf(t *testing.T, s *Store, session string) []ChatMessage {
	t.Helper()
	var out []ChatMessage
	if err := s.DB.Where("session_id = ?", session).Order("seq").Find(&out).Error; err != nil {
		t.Fatal(err)
	}
	return out
}

// On PostgreSQL a held settlement is written by the exchange's batch, with
// the session, the action-log row and the messages, numbered after the
// session's last message without a read.
func TestPostgresExchangeCarriesHeldSettlements(t *testing.T) {
	l := postgresLedger(t)
	ctx := CommitLater(context.Background())
	results := admitAndHold(t, l, ctx, "c1")
	if got := ledgerOutcome(t, l, "c1"); got != OutcomePending {
		t.Fatalf("before the exchange the row is %s, want pending (held)", got)
	}
	sess := &ChatSession{ID: "s1", AgentID: "a", Subject: "alice"}
	now := time.Now().UTC()
	run := &AgentRun{RunID: "r1", ResponseID: "p1", AgentID: "a", SessionID: "s1", Status: "finished", StartedAt: now, FinishedAt: &now}
	msgs := []ChatMessage{{RunID: "r1", Role: "user", Content: "hi"}, {RunID: "r1", Role: "assistant", Content: "hello", ToolCalls: `[{"id":"x"}]`}}
	if err := l.store.SaveExchange(ctx, sess, run, msgs); err != nil {
		t.Fatal(err)
	}
	if got := ledgerOutcome(t, l, "c1"); got != OutcomeSucceeded {
		t.Fatalf("after the exchange the row is %s", got)
	}
	if r := <-results; !r.Applied || !r.Pending {
		t.Fatalf("settlement result %+v, want applied, its counters left to ApplySettled", r)
	}
	if msgs[0].Seq != 1 || msgs[1].Seq != 2 {
		t.Fatalf("numbers %d, %d", msgs[0].Seq, msgs[1].Seq)
	}
	// A second exchange of the session continues its numbering.
	more := []ChatMessage{{RunID: "r2", Role: "user", Content: "again"}}
	if err := l.store.SaveExchange(context.Background(), sess, nil, more); err != nil {
		t.Fatal(err)
	}
	got := messagesOf(t, l.store, "s1")
	if len(got) != 3 || got[2].Seq != 3 || got[2].Content != "again" || got[1].ToolCalls != `[{"id":"x"}]` {
		t.Fatalf("messages %+v", got)
	}
	if r, err := l.store.AgentRunByID(context.Background(), "r1"); err != nil || r.Status != "finished" {
		t.Fatalf("action-log row %+v %v", r, err)
	}
	if _, err := l.ApplySettled(context.Background(), []string{"a-c1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cs, err := l.BudgetCounters(context.Background(), []string{"day:x"})
	if c := cs["day:x"]; err != nil || c.SpentMicros != 9 || c.ReservedMicros != 0 {
		t.Fatalf("counters %+v %v", c, err)
	}
}

// An exchange whose batch fails writes none of its statements, and the
// settlement it carried is written by itself: a failed exchange never
// loses the ledger's record of a call.
func TestPostgresFailedExchangeStillSettles(t *testing.T) {
	l := postgresLedger(t)
	now := time.Now().UTC()
	run := &AgentRun{RunID: "r1", ResponseID: "p1", AgentID: "a", SessionID: "s1", Status: "finished", StartedAt: now, FinishedAt: &now}
	if err := l.store.SaveExchange(context.Background(), &ChatSession{ID: "s1"}, run, []ChatMessage{{Role: "user", Content: "one"}}); err != nil {
		t.Fatal(err)
	}
	ctx := CommitLater(context.Background())
	results := admitAndHold(t, l, ctx, "c2")
	// The same run id again: the action-log INSERT fails, and the batch with it.
	err := l.store.SaveExchange(ctx, &ChatSession{ID: "s1"}, run, []ChatMessage{{Role: "user", Content: "two"}})
	if err == nil {
		t.Fatal("an exchange with a duplicate run id was stored")
	}
	if got := messagesOf(t, l.store, "s1"); len(got) != 1 {
		t.Fatalf("the failed exchange left %d messages, want 1", len(got))
	}
	if got := ledgerOutcome(t, l, "c2"); got != OutcomeSucceeded {
		t.Fatalf("the carried settlement was lost: row %s", got)
	}
	if r := <-results; !r.Applied {
		t.Fatalf("settlement result %+v", r)
	}
}

// A request that never stores its exchange writes what it holds when it
// ends (FlushLater); a settlement arriving after that is not held.
func TestPostgresFlushLaterWritesWhatIsHeld(t *testing.T) {
	l := postgresLedger(t)
	ctx := CommitLater(context.Background())
	results := admitAndHold(t, l, ctx, "c3")
	l.store.FlushLater(ctx)
	if got := ledgerOutcome(t, l, "c3"); got != OutcomeSucceeded {
		t.Fatalf("after FlushLater the row is %s", got)
	}
	<-results
	if l.SettleCallLater(ctx, Settlement{CallID: "c3"}, func(SettleResult, error) {}) {
		t.Fatal("a settlement was held after the request ended")
	}
}

// A request's next LLM call writes the settlements it holds first, so its
// admission sees what the earlier turns cost.
func TestPostgresNextAdmissionWritesHeldSettlements(t *testing.T) {
	l := postgresLedger(t)
	ctx := CommitLater(context.Background())
	results := admitAndHold(t, l, ctx, "t1")
	now := time.Now().UTC()
	if _, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry("t2", now), AdmissionID: "a-t2", Keys: []string{"day:x"}, WorstMicros: 50,
		ExpiresAt: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got := ledgerOutcome(t, l, "t1"); got != OutcomeSucceeded {
		t.Fatalf("the first turn's row is %s when the second is admitted", got)
	}
	<-results
}
