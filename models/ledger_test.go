package models

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func pendingEntry(callID string, now time.Time) *LedgerEntry {
	return &LedgerEntry{CallID: callID, Subject: "alice", Source: "chat", Provider: "openai", Model: "gpt", Mode: "hard",
		PricingStatus: PricingPriced, StartedAt: now, CreatedAt: now}
}

// budgetFit reserves want while spent+reserved+want stays within limit.
func budgetFit(limit, want int64, rejected *atomic.Int64) func([]CounterValue) (int64, bool) {
	return func(cs []CounterValue) (int64, bool) {
		for _, c := range cs {
			if c.SpentMicros+c.ReservedMicros+want > limit {
				rejected.Add(1)
				return 0, false
			}
		}
		return want, true
	}
}

func TestLedgerAdmitIsAtomicUnderConcurrency(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := Open(ctx, b.opts(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			s, err := NewCostLedger(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			now := time.Now().UTC()
			keys := []string{"day:x", "month:x"}
			if err := s.EnsureBudgetCounters(ctx, []CounterSeed{{Key: keys[0], From: now, To: now}, {Key: keys[1], From: now, To: now}}); err != nil {
				t.Fatal(err)
			}
			const n, want, limit = 60, 10, 205
			var rejected atomic.Int64
			var wg sync.WaitGroup
			admitted := make(chan string, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("c%d", i)
					e := pendingEntry(id, now)
					res, err := s.AdmitCall(ctx, AdmitParams{Entry: e, AdmissionID: "a-" + id, Keys: keys, WorstMicros: want,
						Fit: budgetFit(limit, want, &rejected), Limits: map[string]int64{keys[0]: limit, keys[1]: limit}, ExpiresAt: now.Add(time.Minute)})
					if err != nil {
						t.Error(err)
						return
					}
					if res.Admitted {
						admitted <- id
					} else {
						e.RejectionCode = "budget_exceeded"
					}
				}()
			}
			wg.Wait()
			close(admitted)
			var ids []string
			for id := range admitted {
				ids = append(ids, id)
			}
			if len(ids) != 20 {
				t.Fatalf("admitted %d, want exactly 20 (20 x 10 <= 205 < 21 x 10)", len(ids))
			}
			cs, _ := s.BudgetCounters(ctx, keys)
			if cs["day:x"].ReservedMicros != 200 || cs["month:x"].ReservedMicros != 200 {
				t.Fatalf("counters = %+v", cs)
			}
			// Settle all concurrently, each twice: released exactly once.
			var pendingMu sync.Mutex
			var pending []string
			for _, id := range ids {
				for range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res, err := s.SettleCall(ctx, Settlement{CallID: id, AdmissionID: "a-" + id, ReservationID: "a-" + id,
							Keys: keys, Outcome: OutcomeSucceeded, Attempts: 1, OutputTokens: 5, CostMicros: 7, FinishedAt: now})
						if err != nil {
							t.Error(err)
						}
						if res.Pending {
							pendingMu.Lock()
							pending = append(pending, "a-"+id)
							pendingMu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
			// PostgreSQL leaves settlements made while others write to
			// ApplySettled, which records them in one batch.
			if _, err := s.ApplySettled(ctx, pending, now); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ApplySettled(ctx, pending, now); err != nil { // again: nothing twice
				t.Fatal(err)
			}
			cs, _ = s.BudgetCounters(ctx, keys)
			if cs["day:x"].ReservedMicros != 0 || cs["day:x"].SpentMicros != 140 || cs["month:x"].SpentMicros != 140 {
				t.Fatalf("after settle counters = %+v", cs)
			}
			rows, _ := s.ListLedger(ctx, LedgerFilter{}, 1000)
			if len(rows) != n {
				t.Fatalf("%d rows", len(rows))
			}
			for _, r := range rows {
				switch r.Outcome {
				case OutcomeSucceeded:
					if r.Attempts != 1 || r.CostMicros != 7 || r.CostUSD != 0.000007 {
						t.Fatalf("settled row = %+v", r)
					}
				case OutcomeRejected:
				default:
					t.Fatalf("row outcome %s", r.Outcome)
				}
			}
			if rs, _ := s.SummarizeReservations(ctx, now); rs.Count != 0 {
				t.Fatalf("%d reservations left", rs.Count)
			}
		})
	}
}

func TestLedgerReaperAndSeeds(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := Open(ctx, b.opts(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			s, err := NewCostLedger(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			now := time.Now().UTC()
			day := now.Truncate(24 * time.Hour)
			// Spend recorded before the counter exists seeds it.
			e := pendingEntry("old", now)
			if _, err := s.AdmitCall(ctx, AdmitParams{Entry: e, AdmissionID: "a-old"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SettleCall(ctx, Settlement{CallID: "old", AdmissionID: "a-old", Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 500, FinishedAt: now}); err != nil {
				t.Fatal(err)
			}
			seeds := []CounterSeed{
				{Key: "d", From: day, To: day.Add(24 * time.Hour)},
				{Key: "u-alice", From: day, To: day.Add(24 * time.Hour), Subject: "alice"},
				{Key: "u-bob", From: day, To: day.Add(24 * time.Hour), Subject: "bob"},
			}
			if err := s.EnsureBudgetCounters(ctx, seeds); err != nil {
				t.Fatal(err)
			}
			if err := s.EnsureBudgetCounters(ctx, seeds); err != nil { // idempotent
				t.Fatal(err)
			}
			cs, _ := s.BudgetCounters(ctx, []string{"d", "u-alice", "u-bob"})
			if cs["d"].SpentMicros != 500 || cs["u-alice"].SpentMicros != 500 || cs["u-bob"].SpentMicros != 0 {
				t.Fatalf("seeded counters = %+v", cs)
			}

			// An unsettled reservation lapses once: the call is priced at its
			// worst case, which moves from reserved to spent.
			e = pendingEntry("lost", now)
			if _, err := s.AdmitCall(ctx, AdmitParams{Entry: e, AdmissionID: "a-lost", Keys: []string{"d"}, WorstMicros: 90, ExpiresAt: now.Add(time.Second)}); err != nil {
				t.Fatal(err)
			}
			for i, want := range []int{1, 0} {
				n, err := s.ReapExpired(ctx, now.Add(time.Minute), 10)
				if err != nil || n != want {
					t.Fatalf("reap %d: released %d (%v), want %d", i, n, err, want)
				}
			}
			cs, _ = s.BudgetCounters(ctx, []string{"d"})
			if cs["d"].ReservedMicros != 0 || cs["d"].SpentMicros != 590 {
				t.Fatalf("counter after reaping = %+v", cs["d"])
			}
			if r, _ := s.GetLedgerEntry(ctx, "lost"); r.Outcome != OutcomeUnsettled || r.PricingStatus != PricingEstimated ||
				r.CostMicros != 90 || r.EstimatedCostMicros != 90 {
				t.Fatalf("unsettled row = %+v", r)
			}
			// A late settle replaces the estimate with the real cost, on the
			// row and the counters, and does not release again.
			res, err := s.SettleCall(ctx, Settlement{CallID: "lost", AdmissionID: "a-lost", ReservationID: "a-lost",
				Keys: []string{"d"}, Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 40, FinishedAt: now})
			if err != nil || !res.Applied || res.Released {
				t.Fatalf("late settle = %+v, %v", res, err)
			}
			cs, _ = s.BudgetCounters(ctx, []string{"d"})
			if cs["d"].ReservedMicros != 0 || cs["d"].SpentMicros != 540 {
				t.Fatalf("after late settle = %+v", cs["d"])
			}
			// The reaper's estimate marked the usage estimated; the provider's
			// reported usage replaces it (TestFullDiskCostsKeepReportedUsage).
			if r, _ := s.GetLedgerEntry(ctx, "lost"); r.Outcome != OutcomeSucceeded || r.PricingStatus != PricingPriced ||
				r.CostMicros != 40 || r.EstimatedCostMicros != 0 || r.UsageEstimated {
				t.Fatalf("row after late settle = %+v", r)
			}
			// Settling the same admission again changes nothing.
			if res, err := s.SettleCall(ctx, Settlement{CallID: "lost", AdmissionID: "a-lost", ReservationID: "a-lost",
				Keys: []string{"d"}, Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 40, FinishedAt: now}); err != nil || res.Applied {
				t.Fatalf("second settle = %+v, %v", res, err)
			}

			// A settlement not yet on the counters (PostgreSQL batches them)
			// when its process dies: the reaper records it, once.
			e = pendingEntry("settled-then-crash", now)
			if _, err := s.AdmitCall(ctx, AdmitParams{Entry: e, AdmissionID: "a-stc", Keys: []string{"d"}, WorstMicros: 70, ExpiresAt: now.Add(time.Second)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SettleCall(ctx, Settlement{CallID: "settled-then-crash", AdmissionID: "a-stc", ReservationID: "a-stc",
				Keys: []string{"d"}, Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 60, FinishedAt: now}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReapExpired(ctx, now.Add(time.Minute), 10); err != nil {
				t.Fatal(err)
			}
			cs, _ = s.BudgetCounters(ctx, []string{"d"})
			if cs["d"].ReservedMicros != 0 || cs["d"].SpentMicros != 600 {
				t.Fatalf("after a settlement recorded by the reaper = %+v", cs["d"])
			}
			if r, _ := s.GetLedgerEntry(ctx, "settled-then-crash"); r.Outcome != OutcomeSucceeded || r.CostMicros != 60 {
				t.Fatalf("row = %+v", r)
			}

			// Stale pending rows without a reservation (mode off) expire too.
			e = pendingEntry("off", now.Add(-time.Hour))
			if _, err := s.AdmitCall(ctx, AdmitParams{Entry: e, AdmissionID: "a-off"}); err != nil {
				t.Fatal(err)
			}
			if n, err := s.ExpireStalePending(ctx, now.Add(-time.Minute)); err != nil || n != 1 {
				t.Fatalf("expired %d (%v)", n, err)
			}

			// Rejections: recorded once per call id.
			rej := pendingEntry("rej", now)
			rej.RejectionCode = "rate_limited"
			for range 2 {
				r := *rej
				if err := s.RecordRejection(ctx, &r); err != nil {
					t.Fatal(err)
				}
			}
			sum, err := s.SummarizeLedger(ctx, now.Add(-2*time.Hour), now.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if sum.Rejected != 1 || sum.RejectionCodes["rate_limited"] != 1 || sum.CostMicros != 600 || sum.Expired != 1 {
				t.Fatalf("summary = %+v", sum)
			}
			cb, err := s.Chargeback(ctx, []string{"user", "feature"}, now.Add(-2*time.Hour), time.Time{})
			if err != nil || len(cb) != 1 || cb[0].Group["user"] != "alice" || cb[0].CostMicros != 600 {
				t.Fatalf("chargeback = %+v, %v", cb, err)
			}
			if _, err := s.Chargeback(ctx, []string{"nope"}, day, time.Time{}); err == nil {
				t.Fatal("unknown dimension accepted")
			}
		})
	}
}

func TestPriceHistoryUpsert(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, backends[0].opts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.UpsertPrices(ctx, []PriceVersion{{Provider: "p", Model: "m", EffectiveDate: "2025-01-01", Version: "v1", InputPerMTok: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertPrices(ctx, []PriceVersion{{Provider: "p", Model: "m", EffectiveDate: "2025-01-01", Version: "v1b", InputPerMTok: 2},
		{Provider: "p", Model: "m", EffectiveDate: "2026-01-01", Version: "v2", InputPerMTok: 3}}); err != nil {
		t.Fatal(err)
	}
	ps, err := s.ListPrices(ctx)
	if err != nil || len(ps) != 2 || ps[0].Version != "v1b" || ps[0].InputPerMTok != 2 || ps[1].Version != "v2" {
		t.Fatalf("prices = %+v, %v", ps, err)
	}
}

// Every provider request is counted on the call's row (issue 18 item 10):
// an execution cut off by a crash never settles, and its request used to be
// lost when the retried activity reused the row (attempts 1 for 2 provider
// requests). An admission counts its first request, a settlement the
// retries beyond it; a rejected admission sent nothing and counts nothing.
func TestLedgerAttemptsCountTheRequestOfAnExecutionThatNeverSettled(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := Open(ctx, b.opts(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			s, err := NewCostLedger(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			now := time.Now().UTC()
			if err := s.EnsureBudgetCounters(ctx, []CounterSeed{{Key: "d", From: now.Add(-time.Hour), To: now.Add(time.Hour)}}); err != nil {
				t.Fatal(err)
			}
			rowOf := func(call string) (attempts, executions int) {
				t.Helper()
				if err := writeHeld(ctx, st); err != nil { // as after journalHold, or a crash and restart
					t.Fatal(err)
				}
				r, err := s.GetLedgerEntry(ctx, call)
				if err != nil {
					t.Fatal(err)
				}
				return r.Attempts, r.Executions
			}
			admit := func(call, admission string, keys []string, fit func([]CounterValue) (int64, bool)) bool {
				t.Helper()
				res, err := s.AdmitCall(ctx, AdmitParams{Entry: pendingEntry(call, now), AdmissionID: admission, Keys: keys,
					WorstMicros: 10, Fit: fit, ExpiresAt: now.Add(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				return res.Admitted
			}
			settle := func(call, admission string, keys []string, attempts int) {
				t.Helper()
				if _, err := s.SettleCall(ctx, Settlement{CallID: call, AdmissionID: admission, ReservationID: admission, Keys: keys,
					Outcome: OutcomeSucceeded, Attempts: attempts, CostMicros: 5, FinishedAt: now}); err != nil {
					t.Fatal(err)
				}
			}
			for _, keys := range [][]string{nil, {"d"}} {
				call := fmt.Sprintf("crash-%d", len(keys))
				// Execution 1 is admitted and its request sent; the process dies.
				admit(call, call+"-a1", keys, nil)
				if a, e := rowOf(call); a != 1 || e != 1 {
					t.Fatalf("%s in flight: attempts %d executions %d, want 1 1", call, a, e)
				}
				// The retried activity reuses the row; its request needs one retry.
				admit(call, call+"-a2", keys, nil)
				settle(call, call+"-a2", keys, 2)
				if a, e := rowOf(call); a != 3 || e != 2 {
					t.Fatalf("%s after the retry: attempts %d executions %d, want 3 2", call, a, e)
				}
				// A late settlement of the first execution adds only its retries.
				settle(call, call+"-a1", keys, 1)
				if a, e := rowOf(call); a != 3 || e != 2 {
					t.Fatalf("%s after a late settlement: attempts %d executions %d, want 3 2", call, a, e)
				}
			}
			// A rejected admission, new or of a row seen before, sent nothing.
			refuse := func([]CounterValue) (int64, bool) { return 0, false }
			if admit("refused", "r-a1", []string{"d"}, refuse) {
				t.Fatal("admitted")
			}
			if a, e := rowOf("refused"); a != 0 || e != 0 {
				t.Fatalf("rejected call: attempts %d executions %d, want 0 0", a, e)
			}
			admit("crash-1", "crash-1-a3", []string{"d"}, refuse)
			if a, e := rowOf("crash-1"); a != 3 || e != 2 {
				t.Fatalf("rejected re-admission: attempts %d executions %d, want 3 2", a, e)
			}
		})
	}
}

// writeHeld writes the journaled admissions of st to its database (SQLite
// with the admission journal), as the writer does after journalHold.
func writeHeld(ctx context.Context, st *Store) error {
	if st.Group == nil {
		return nil
	}
	return st.hook.writeHeldWhere(ctx, func(*deferredAdmission) bool { return true })
}
