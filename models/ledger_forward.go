package models

import (
	"context"
	"time"
)

// The rest of the store a ledger's consumer needs (internal/costs: budget
// counters, prices, reports, upkeep, runs waiting for budget), forwarded so
// that the CostLedger exposes these and not the whole Store.

// EnsureBudgetCounters: see Store.EnsureBudgetCounters.
func (l *CostLedger) EnsureBudgetCounters(ctx context.Context, seeds []CounterSeed) error {
	return l.store.EnsureBudgetCounters(ctx, seeds)
}

// BudgetCounters: see Store.BudgetCounters.
func (l *CostLedger) BudgetCounters(ctx context.Context, keys []string) (map[string]CounterValue, error) {
	return l.store.BudgetCounters(ctx, keys)
}

// RecordRejection: see Store.RecordRejection.
func (l *CostLedger) RecordRejection(ctx context.Context, e *LedgerEntry) error {
	return l.store.RecordRejection(ctx, e)
}

// ExpireStalePending: see Store.ExpireStalePending.
func (l *CostLedger) ExpireStalePending(ctx context.Context, cutoff time.Time) (int64, error) {
	return l.store.ExpireStalePending(ctx, cutoff)
}

// PurgeBudgetCounters: see Store.PurgeBudgetCounters.
func (l *CostLedger) PurgeBudgetCounters(ctx context.Context, before time.Time) (int64, error) {
	return l.store.PurgeBudgetCounters(ctx, before)
}

// ListLedger: see Store.ListLedger.
func (l *CostLedger) ListLedger(ctx context.Context, f LedgerFilter, limit int) ([]LedgerEntry, error) {
	return l.store.ListLedger(ctx, f, limit)
}

// GetLedgerEntry: see Store.GetLedgerEntry.
func (l *CostLedger) GetLedgerEntry(ctx context.Context, callID string) (*LedgerEntry, error) {
	return l.store.GetLedgerEntry(ctx, callID)
}

// Chargeback: see Store.Chargeback.
func (l *CostLedger) Chargeback(ctx context.Context, groupBy []string, from, to time.Time) ([]ChargebackRow, error) {
	return l.store.Chargeback(ctx, groupBy, from, to)
}

// SummarizeLedger: see Store.SummarizeLedger.
func (l *CostLedger) SummarizeLedger(ctx context.Context, from, to time.Time) (LedgerSummary, error) {
	return l.store.SummarizeLedger(ctx, from, to)
}

// SummarizeReservations: see Store.SummarizeReservations.
func (l *CostLedger) SummarizeReservations(ctx context.Context, now time.Time) (ReservationSummary, error) {
	return l.store.SummarizeReservations(ctx, now)
}

// UpsertPrices: see Store.UpsertPrices.
func (l *CostLedger) UpsertPrices(ctx context.Context, prices []PriceVersion) error {
	return l.store.UpsertPrices(ctx, prices)
}

// ListPrices: see Store.ListPrices.
func (l *CostLedger) ListPrices(ctx context.Context) ([]PriceVersion, error) {
	return l.store.ListPrices(ctx)
}

// CountRunsWaitingFor: see Store.CountRunsWaitingFor.
func (l *CostLedger) CountRunsWaitingFor(ctx context.Context, waitingFor string) (int64, error) {
	return l.store.CountRunsWaitingFor(ctx, waitingFor)
}
