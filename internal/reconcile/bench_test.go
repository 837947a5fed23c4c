package reconcile

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakeexport"
)

// BenchmarkReconcileDay measures one provider's day end to end: fetch every
// page of both export endpoints from the fake over loopback HTTP, store the
// lines (upsert + delete of stale ones, one transaction), and compare them
// with the ledger. AGENTRY_BENCH_ROWS sets the cost lines of the day
// (default 5000, spread over 500 models); pages hold 1000 results.
//
//	go test -run '^$' -bench ReconcileDay -benchtime 5x ./internal/reconcile/
//	BENCH_POSTGRES=1 ... for PostgreSQL
func BenchmarkReconcileDay(b *testing.B) {
	rows := 5000
	if v, err := strconv.Atoi(os.Getenv("AGENTRY_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	svc, f, _ := setup(b, os.Getenv("BENCH_POSTGRES") != "")
	f.PageSize = 1000
	day := "2026-03-04"
	d, _ := ParseDay(day)
	for i := range rows {
		model := fmt.Sprintf("model-%03d", i%500)
		f.AddCost(day, fakeexport.Line{Model: model, LineItem: fmt.Sprintf("%s, item %d", model, i/500), USD: 0.001 * float64(i%7+1)})
	}
	for i := range 500 {
		ledgerCall(b, svc.Store, fmt.Sprintf("b-%d", i), "openai", fmt.Sprintf("model-%03d", i), d.Add(time.Hour), 1000)
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		runID := fmt.Sprintf("bench-%d", i)
		if _, err := svc.Begin(ctx, RunRef{RunID: runID, Day: day}); err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Import(ctx, runID, "openai", day); err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Compare(ctx, runID); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.ReportMetric(float64(rows*b.N)/el.Seconds(), "rows/s")
	b.ReportMetric(el.Seconds()*1000/float64(b.N), "ms/day")
}
