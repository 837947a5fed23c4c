package models

import (
	"context"
	"testing"
	"time"
)

// Every path that writes a ledger row writes root_run_id: the pending row
// without a reservation, the one-statement PostgreSQL admission, the
// transaction that clamps or rejects, the grouped (SQLite) admission and
// its settlement, and a counter seeded from the rows of one run tree.
func TestLedgerWritesRootRunIDOnEveryPath(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		st := mustOpen(t, opts)
		l, err := NewCostLedger(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		now := time.Now().UTC()
		key := "cap:root-1"
		if err := l.EnsureBudgetCounters(ctx, []CounterSeed{{Key: key, From: time.Unix(0, 0), To: now.Add(time.Hour), RootRunID: "root-1"}}); err != nil {
			t.Fatal(err)
		}
		admit := func(call string, keys []string, worst int64, fit func([]CounterValue) (int64, bool), limits map[string]int64) AdmitResult {
			t.Helper()
			e := pendingEntry(call, now)
			e.RunID, e.RootRunID = "child-"+call, "root-1"
			if fit != nil && limits == nil {
				e.RejectionCode = "cost_cap"
			}
			res, err := l.AdmitCall(ctx, AdmitParams{Entry: e, AdmissionID: "a-" + call, Keys: keys, WorstMicros: worst, Fit: fit, Limits: limits, ExpiresAt: now.Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		admit("plain", nil, 10, nil, nil)                                  // no reservation
		admit("fits", []string{key}, 10, nil, map[string]int64{key: 1000}) // one statement on PostgreSQL
		admit("refused", []string{key}, 10, func([]CounterValue) (int64, bool) { return 0, false }, nil)
		for _, call := range []string{"plain", "fits"} {
			var keys []string
			if call == "fits" {
				keys = []string{key}
			}
			res, err := l.SettleCall(ctx, Settlement{CallID: call, AdmissionID: "a-" + call, ReservationID: "a-" + call, Keys: keys,
				Outcome: OutcomeSucceeded, Attempts: 1, CostMicros: 7, FinishedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			if res.Pending {
				if _, err := l.ApplySettled(ctx, []string{"a-" + call}, now); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, call := range []string{"plain", "fits", "refused"} {
			e, err := l.GetLedgerEntry(ctx, call)
			if err != nil {
				t.Fatal(err)
			}
			if e.RootRunID != "root-1" || e.RunID != "child-"+call {
				t.Fatalf("row %s: run_id %q root_run_id %q", call, e.RunID, e.RootRunID)
			}
		}
		// A counter created later starts from the tree's recorded spend.
		if err := l.EnsureBudgetCounters(ctx, []CounterSeed{{Key: "cap:again", From: time.Unix(0, 0), To: now.Add(time.Hour), RootRunID: "root-1"},
			{Key: "cap:other", From: time.Unix(0, 0), To: now.Add(time.Hour), RootRunID: "root-2"}}); err != nil {
			t.Fatal(err)
		}
		cs, err := l.BudgetCounters(ctx, []string{"cap:again", "cap:other"})
		if err != nil {
			t.Fatal(err)
		}
		if cs["cap:again"].SpentMicros != 14 || cs["cap:other"].SpentMicros != 0 {
			t.Fatalf("seeded counters = %+v", cs)
		}
	})
}
