package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func groupedLedger(t testing.TB, keys ...string) *CostLedger {
	t.Helper()
	return ledgerWithCounters(t, openGrouped(t), keys...)
}

// ledgerWithCounters returns the cost ledger of s with counters keys.
func ledgerWithCounters(t testing.TB, s *Store, keys ...string) *CostLedger {
	t.Helper()
	ctx := context.Background()
	l, err := NewCostLedger(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	now := time.Now().UTC()
	var seeds []CounterSeed
	for _, k := range keys {
		seeds = append(seeds, CounterSeed{Key: k, From: now, To: now})
	}
	if err := s.EnsureBudgetCounters(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	return l
}

// A batch that rolls back leaves the writer's counters as they were; the
// batch run again without the failed job writes only the others' changes,
// and the database always ends up holding what the writer holds.
func TestCounterBookForgetsARolledBackAttempt(t *testing.T) {
	l := groupedLedger(t, "day:x")
	ctx := context.Background()
	keys := []string{"day:x"}
	now := time.Now().UTC()
	boom := errors.New("boom")
	add := func(n int64, fail bool) error {
		return l.store.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
			if _, err := l.addToCounters(ctx, tx, keys, n, 0, now); err != nil {
				return err
			}
			if fail {
				return boom
			}
			return nil
		})
	}
	if err := add(5, false); err != nil {
		t.Fatal(err)
	}
	if err := add(100, true); !errors.Is(err, boom) {
		t.Fatalf("failing job: %v", err)
	}
	if err := add(7, false); err != nil {
		t.Fatal(err)
	}
	cs, err := l.BudgetCounters(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs["day:x"].ReservedMicros; got != 12 {
		t.Fatalf("database reserved = %d, want 12 (the failed job's 100 rolled back)", got)
	}
	var held []CounterValue
	if err := l.store.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
		var err error
		held, err = l.store.hook.counters.values(ctx, tx, keys)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if held[0].ReservedMicros != 12 {
		t.Fatalf("writer holds reserved = %d, want 12", held[0].ReservedMicros)
	}
	// A counter that does not exist is refused without changing anything.
	err = l.store.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
		_, err := l.addToCounters(ctx, tx, []string{"day:x", "user-day:nobody"}, 1, 0, now)
		return err
	})
	if !errors.Is(err, ErrCountersMissing) {
		t.Fatalf("missing counter: %v", err)
	}
	if cs, _ := l.BudgetCounters(ctx, keys); cs["day:x"].ReservedMicros != 12 {
		t.Fatalf("after a refused change reserved = %d", cs["day:x"].ReservedMicros)
	}
}

// A settlement queued by a request marked CommitLater is committed once
// that request's next write through the writer returns.
func TestSettleCallLaterIsCoveredByTheNextCommit(t *testing.T) {
	l := groupedLedger(t, "day:x")
	ctx := CommitLater(context.Background())
	keys := []string{"day:x"}
	now := time.Now().UTC()
	res, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry("c1", now), AdmissionID: "a1", Keys: keys, WorstMicros: 50, ExpiresAt: now.Add(time.Minute)})
	if err != nil || !res.Admitted {
		t.Fatalf("admit: %+v %v", res, err)
	}
	done := make(chan SettleResult, 1)
	queued := l.SettleCallLater(ctx, Settlement{CallID: "c1", AdmissionID: "a1", ReservationID: "a1", Keys: keys,
		Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 9, FinishedAt: now}, func(r SettleResult, err error) {
		if err != nil {
			t.Error(err)
		}
		done <- r
	})
	if !queued {
		t.Fatal("not queued on SQLite's group commit")
	}
	// The request's next write (its exchange) covers the settlement.
	if err := l.store.Group.Do(ctx, heldFor(ctx), func(context.Context, *sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	e, err := l.GetLedgerEntry(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if e.Outcome != OutcomeSucceeded || e.CostMicros != 9 {
		t.Fatalf("row after the next commit: outcome %s cost %d", e.Outcome, e.CostMicros)
	}
	cs, _ := l.BudgetCounters(ctx, keys)
	if cs["day:x"].SpentMicros != 9 || cs["day:x"].ReservedMicros != 0 {
		t.Fatalf("counters = %+v", cs["day:x"])
	}
	if r := <-done; !r.Applied || !r.Released || r.ReleasedMicros != 50 {
		t.Fatalf("result = %+v", r)
	}
	// Without the mark the caller must settle and wait itself.
	if l.SettleCallLater(context.Background(), Settlement{CallID: "c1"}, func(SettleResult, error) {}) {
		t.Fatal("queued without CommitLater")
	}
}

// A held settlement commits even when the write it rides on fails, and
// its follow-up hears the outcome.
func TestHeldSettlementCommitsWhenTheExchangeFails(t *testing.T) {
	l := groupedLedger(t, "day:x")
	ctx := CommitLater(context.Background())
	keys := []string{"day:x"}
	now := time.Now().UTC()
	if res, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry("c1", now), AdmissionID: "a1", Keys: keys, WorstMicros: 50,
		ExpiresAt: now.Add(time.Minute)}); err != nil || !res.Admitted {
		t.Fatalf("admit: %+v %v", res, err)
	}
	var heard []error
	if !l.SettleCallLater(ctx, Settlement{CallID: "c1", AdmissionID: "a1", ReservationID: "a1", Keys: keys,
		Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 9, FinishedAt: now}, func(_ SettleResult, err error) { heard = append(heard, err) }) {
		t.Fatal("not held")
	}
	boom := errors.New("boom")
	if err := l.store.Group.Do(ctx, heldFor(ctx), func(context.Context, *sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("exchange: %v", err)
	}
	if len(heard) != 1 || heard[0] != nil {
		t.Fatalf("follow-up heard %v, want one nil", heard)
	}
	if e, err := l.GetLedgerEntry(ctx, "c1"); err != nil || e.Outcome != OutcomeSucceeded || e.CostMicros != 9 {
		t.Fatalf("row: %+v %v", e, err)
	}
	// The holding ends with the request: a later settlement is not held.
	l.store.FlushLater(ctx)
	if l.SettleCallLater(ctx, Settlement{CallID: "c2"}, func(SettleResult, error) {}) {
		t.Fatal("held after FlushLater")
	}
}

// An agent's next LLM call is admitted against what the earlier turn
// cost, not its worst case: the held settlement runs before the admission.
func TestHeldSettlementCountsBeforeTheNextAdmission(t *testing.T) {
	for _, journaled := range []bool{true, false} {
		t.Run(fmt.Sprintf("journaled=%v", journaled), func(t *testing.T) {
			_, l := journalTestLedger(t, filepath.Join(t.TempDir(), "n.db"), !journaled)
			ctx := CommitLater(context.Background())
			keys := []string{"d"}
			var rejected atomic.Int64
			now := time.Now().UTC()
			admit := func(id string) AdmitResult {
				res, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry(id, now), AdmissionID: "a-" + id, Keys: keys, WorstMicros: 50,
					Fit: budgetFit(60, 50, &rejected), Limits: map[string]int64{"d": 60}, ExpiresAt: now.Add(time.Minute)})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			if !admit("t1").Admitted {
				t.Fatal("first turn refused")
			}
			if !l.SettleCallLater(ctx, Settlement{CallID: "t1", AdmissionID: "a-t1", ReservationID: "a-t1", Keys: keys,
				Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 9, FinishedAt: now}, func(SettleResult, error) {}) {
				t.Fatal("not held")
			}
			// 9 spent + 50 = 59 fits 60; the first turn's worst case would not.
			// The writer is held off while the held settlement and the
			// admission queue, so that one drain takes both (the admission
			// must not pass its own request's settlement, see
			// admissionsFirst); without that they might run on this
			// goroutine instead.
			g := l.store.Group
			release := g.Hold()
			second := make(chan AdmitResult, 1)
			go func() { second <- admit("t2") }()
			for g.Queued() < 2 {
				runtime.Gosched()
			}
			release()
			if !(<-second).Admitted {
				t.Fatal("second turn refused: the first one still counted at its worst case")
			}
			if e, _ := l.GetLedgerEntry(ctx, "t1"); e == nil || e.Outcome != OutcomeSucceeded {
				t.Fatalf("first turn's row %+v", e)
			}
		})
	}
}

// BenchmarkLedgerAdmitSettle: one admission and one settlement per op
// against a hard budget on SQLite's group commit, from 16 goroutines per
// core; the settlement waited for (waited) or queued and covered by the
// next write (queued, the chat path).
func BenchmarkLedgerAdmitSettle(b *testing.B) {
	for _, journaled := range []bool{false, true} {
		for _, queued := range []bool{false, true} {
			name := "committed/waited"
			if journaled {
				name = "journaled/waited"
			}
			if queued {
				name = strings.Replace(name, "waited", "queued", 1)
			}
			b.Run(name, func(b *testing.B) { benchmarkAdmitSettle(b, journaled, queued) })
		}
	}
}

// benchmarkAdmitSettle admits and settles calls against a hard budget from
// 16 goroutines per core; journaled: through the admission journal,
// otherwise with the admission committed through SQLite.
func benchmarkAdmitSettle(b *testing.B, journaled, queued bool) {
	_, l := journalTestLedger(b, filepath.Join(b.TempDir(), "bench.db"), !journaled)
	if err := l.EnsureBudgetCounters(context.Background(), []CounterSeed{{Key: "day:x", From: time.Now(), To: time.Now()}}); err != nil {
		b.Fatal(err)
	}
	var n, rejected atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		if queued {
			ctx = CommitLater(ctx)
		}
		for pb.Next() {
			st := admitBenchCall(b, ctx, l, fmt.Sprintf("c%d", n.Add(1)), "day:x", &rejected)
			if !l.SettleCallLater(ctx, st, func(SettleResult, error) {}) {
				if _, err := l.SettleCall(ctx, st); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.StopTimer()
	batches, writes := l.store.Group.Stats()
	b.ReportMetric(float64(writes)/float64(max(batches, 1)), "jobs/batch")
}

// BenchmarkChatRequestWrites: the writes of one chat request on SQLite as
// the chat path makes them (journaled admission, settlement held for the
// exchange, the exchange's write), one request at a time (serial: the
// added latency at one connection) or from 16 goroutines per core.
func BenchmarkChatRequestWrites(b *testing.B) {
	for _, bench := range []struct {
		name     string
		parallel bool
		linger   time.Duration
	}{{"serial", false, DefaultLinger}, {"serial/commit-every-batch", false, -1}, {"parallel", true, DefaultLinger}, {"parallel/commit-every-batch", true, -1}} {
		parallel := bench.parallel
		b.Run(bench.name, func(b *testing.B) {
			st, l := journalTestLedger(b, filepath.Join(b.TempDir(), "bench.db"), false)
			setLinger(b, st, bench.linger)
			var n, keys, rejected atomic.Int64
			request := func() {
				ctx := CommitLater(context.Background())
				defer l.store.FlushLater(ctx)
				st := admitBenchCall(b, ctx, l, fmt.Sprintf("c%d", n.Add(1)), "d", &rejected)
				if !l.SettleCallLater(ctx, st, func(SettleResult, error) {}) {
					b.Fatal("settlement not held")
				}
				if err := l.store.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
					return l.store.Group.Exec(ctx, tx, insertSessionSQL, st.CallID, "a", "sub", "u", "u", "chat", st.FinishedAt, st.FinishedAt, keys.Add(1))
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if parallel {
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						request()
					}
				})
			} else {
				for range b.N {
					request()
				}
			}
			b.StopTimer()
			batches, writes := l.store.Group.Stats()
			b.ReportMetric(float64(writes)/float64(max(batches, 1)), "jobs/batch")
		})
	}
}

// admitBenchCall admits call id against a budget on key no benchmark
// reaches (worst case 50) and returns its settlement (cost 9).
func admitBenchCall(b *testing.B, ctx context.Context, l *CostLedger, id, key string, rejected *atomic.Int64) Settlement {
	now := time.Now().UTC()
	res, err := l.AdmitCall(ctx, AdmitParams{Entry: pendingEntry(id, now), AdmissionID: "a-" + id, Keys: []string{key}, WorstMicros: 50,
		Fit: budgetFit(1<<60, 50, rejected), Limits: map[string]int64{key: 1 << 60}, ExpiresAt: now.Add(time.Minute)})
	if err != nil || !res.Admitted {
		b.Fatalf("admit: %+v %v", res, err)
	}
	return Settlement{CallID: id, AdmissionID: "a-" + id, ReservationID: "a-" + id, Keys: []string{key},
		Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 9, FinishedAt: now}
}
