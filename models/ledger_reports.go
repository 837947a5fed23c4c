package models

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// LedgerFilter selects ledger rows. Zero fields do not filter.
type LedgerFilter struct {
	From, To                      time.Time // created_at in [From, To)
	CallID, RunID, SessionID      string
	AgentID, Subject, Outcome     string
	ExcludeRejected, OnlyRejected bool
	// RootRunID: only the rows of one run tree (root_run_id).
	RootRunID string
}

func (f LedgerFilter) apply(q *gorm.DB) *gorm.DB {
	if !f.From.IsZero() {
		q = q.Where("created_at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		q = q.Where("created_at < ?", f.To.UTC())
	}
	for col, v := range map[string]string{"call_id": f.CallID, "run_id": f.RunID, "session_id": f.SessionID,
		"agent_id": f.AgentID, "subject": f.Subject, "outcome": f.Outcome, "root_run_id": f.RootRunID} {
		if v != "" {
			q = q.Where(col+" = ?", v)
		}
	}
	if f.ExcludeRejected {
		q = q.Where("outcome <> ?", OutcomeRejected)
	}
	if f.OnlyRejected {
		q = q.Where("outcome = ?", OutcomeRejected)
	}
	return q
}

// ListLedger returns the newest rows matching f.
func (s *Store) ListLedger(ctx context.Context, f LedgerFilter, limit int) ([]LedgerEntry, error) {
	var rows []LedgerEntry
	err := f.apply(s.DB.WithContext(ctx).Model(&LedgerEntry{})).Order("created_at DESC, call_id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list ledger: %w", err)
	}
	return rows, nil
}

// GetLedgerEntry returns one row by call id.
func (s *Store) GetLedgerEntry(ctx context.Context, callID string) (*LedgerEntry, error) {
	var e LedgerEntry
	err := s.DB.WithContext(ctx).First(&e, "call_id = ?", callID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger row %s: %w", callID, err)
	}
	return &e, nil
}

// ChargebackDimensions maps chargeback's group_by names to ledger columns.
var ChargebackDimensions = map[string]string{
	"user": "subject", "feature": "source", "provider": "provider", "model": "model",
	"agent": "agent_id",
	// root_run: the run tree (a delegating run with the runs it delegated
	// to); calls of no run group under "".
	"root_run": "root_run_id",
}

// ChargebackRow is one group of the chargeback report.
type ChargebackRow struct {
	Group               map[string]string `gorm:"-"`
	Calls               int64
	Attempts            int64
	InputTokens         int64
	OutputTokens        int64
	CachedInputTokens   int64
	CacheCreationTokens int64
	ReasoningTokens     int64
	CostMicros          int64
	UnknownPricedCalls  int64
	EstimatedCalls      int64
}

// Chargeback groups the calls that reached a provider (rejected calls cost
// nothing and are left out) by the given dimensions (names of
// ChargebackDimensions), biggest cost first.
func (s *Store) Chargeback(ctx context.Context, groupBy []string, from, to time.Time) ([]ChargebackRow, error) {
	cols := make([]string, 0, len(groupBy))
	for _, d := range groupBy {
		col, ok := ChargebackDimensions[d]
		if !ok {
			return nil, fmt.Errorf("chargeback: unknown dimension %q", d)
		}
		cols = append(cols, col)
	}
	sel := []string{
		"COUNT(*) AS calls", "COALESCE(SUM(attempts),0) AS attempts",
		"COALESCE(SUM(input_tokens),0) AS input_tokens", "COALESCE(SUM(output_tokens),0) AS output_tokens",
		"COALESCE(SUM(cached_input_tokens),0) AS cached_input_tokens", "COALESCE(SUM(cache_creation_tokens),0) AS cache_creation_tokens",
		"COALESCE(SUM(reasoning_tokens),0) AS reasoning_tokens", "COALESCE(SUM(cost_micros),0) AS cost_micros",
		"COALESCE(SUM(CASE WHEN pricing_status = 'unknown' THEN 1 ELSE 0 END),0) AS unknown_priced_calls",
		"COALESCE(SUM(CASE WHEN usage_estimated THEN 1 ELSE 0 END),0) AS estimated_calls",
	}
	for i, c := range cols {
		sel = append(sel, fmt.Sprintf("%s AS g%d", c, i))
	}
	q := LedgerFilter{From: from, To: to, ExcludeRejected: true}.apply(s.DB.WithContext(ctx).Model(&LedgerEntry{})).
		Select(strings.Join(sel, ", "))
	if len(cols) > 0 {
		q = q.Group(strings.Join(cols, ", "))
	}
	rows, err := q.Order("cost_micros DESC").Rows()
	if err != nil {
		return nil, fmt.Errorf("chargeback: %w", err)
	}
	defer rows.Close()
	var out []ChargebackRow
	for rows.Next() {
		var r ChargebackRow
		groups := make([]string, len(cols))
		dest := []any{&r.Calls, &r.Attempts, &r.InputTokens, &r.OutputTokens, &r.CachedInputTokens, &r.CacheCreationTokens,
			&r.ReasoningTokens, &r.CostMicros, &r.UnknownPricedCalls, &r.EstimatedCalls}
		for i := range groups {
			dest = append(dest, &groups[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("chargeback: %w", err)
		}
		if r.Calls == 0 && len(cols) == 0 {
			continue
		}
		r.Group = map[string]string{}
		for i, d := range groupBy {
			r.Group[d] = groups[i]
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// LedgerSummary is the aggregate of ledger rows of a period.
type LedgerSummary struct {
	Calls          int64 // rows that reached a provider (not rejected)
	CostMicros     int64
	UnknownPriced  int64
	Estimated      int64
	Attempts       int64
	RetryAttempts  int64 // provider requests beyond the first of each execution
	RetriedCalls   int64
	Pending        int64 // in flight
	Expired        int64
	Unsettled      int64 // priced at their reserved worst case after their reservation lapsed
	Unattributed   int64 // settled rows missing subject, source, provider or model, or expired or unsettled
	Rejected       int64
	RejectionCodes map[string]int64
	// Overruns counts calls whose cost exceeded their reservation.
	Overruns int64
	// Models are the distinct provider/model pairs called.
	Models []string
}

// SummarizeLedger aggregates the rows created in [from, to).
func (s *Store) SummarizeLedger(ctx context.Context, from, to time.Time) (LedgerSummary, error) {
	var sum LedgerSummary
	db := s.DB.WithContext(ctx)
	period := func() *gorm.DB {
		return LedgerFilter{From: from, To: to}.apply(db.Model(&LedgerEntry{}))
	}
	var agg struct {
		Calls, CostMicros, UnknownPriced, Estimated, Attempts, RetryAttempts, RetriedCalls, Pending, Expired, Unsettled, Unattributed, Overruns int64
	}
	err := period().Where("outcome <> ?", OutcomeRejected).Select(`COUNT(*) AS calls,
COALESCE(SUM(cost_micros),0) AS cost_micros,
COALESCE(SUM(CASE WHEN pricing_status = 'unknown' THEN 1 ELSE 0 END),0) AS unknown_priced,
COALESCE(SUM(CASE WHEN usage_estimated THEN 1 ELSE 0 END),0) AS estimated,
COALESCE(SUM(attempts),0) AS attempts,
COALESCE(SUM(CASE WHEN attempts > executions THEN attempts - executions ELSE 0 END),0) AS retry_attempts,
COALESCE(SUM(CASE WHEN attempts > executions THEN 1 ELSE 0 END),0) AS retried_calls,
COALESCE(SUM(CASE WHEN outcome = 'pending' THEN 1 ELSE 0 END),0) AS pending,
COALESCE(SUM(CASE WHEN outcome = 'expired' THEN 1 ELSE 0 END),0) AS expired,
COALESCE(SUM(CASE WHEN outcome = 'unsettled' THEN 1 ELSE 0 END),0) AS unsettled,
COALESCE(SUM(CASE WHEN outcome IN ('expired', 'unsettled') OR (outcome <> 'pending' AND (subject = '' OR source = '' OR provider = '' OR model = '')) THEN 1 ELSE 0 END),0) AS unattributed,
COALESCE(SUM(CASE WHEN mode = 'hard' AND cost_micros > reserved_micros AND outcome <> 'pending' THEN 1 ELSE 0 END),0) AS overruns`).
		Scan(&agg).Error
	if err != nil {
		return sum, fmt.Errorf("summarize ledger: %w", err)
	}
	sum.Calls, sum.CostMicros, sum.UnknownPriced, sum.Estimated = agg.Calls, agg.CostMicros, agg.UnknownPriced, agg.Estimated
	sum.Attempts, sum.RetryAttempts, sum.RetriedCalls, sum.Pending, sum.Expired = agg.Attempts, agg.RetryAttempts, agg.RetriedCalls, agg.Pending, agg.Expired
	sum.Unattributed, sum.Overruns, sum.Unsettled = agg.Unattributed, agg.Overruns, agg.Unsettled

	var codes []struct {
		RejectionCode string
		N             int64
	}
	if err := period().Where("outcome = ?", OutcomeRejected).Select("rejection_code, COUNT(*) AS n").Group("rejection_code").Scan(&codes).Error; err != nil {
		return sum, fmt.Errorf("summarize rejections: %w", err)
	}
	sum.RejectionCodes = map[string]int64{}
	for _, c := range codes {
		sum.RejectionCodes[c.RejectionCode] = c.N
		sum.Rejected += c.N
	}
	var models []struct{ Provider, Model string }
	if err := period().Where("outcome <> ?", OutcomeRejected).Distinct("provider", "model").Scan(&models).Error; err != nil {
		return sum, fmt.Errorf("summarize models: %w", err)
	}
	for _, m := range models {
		sum.Models = append(sum.Models, m.Provider+"/"+m.Model)
	}
	slices.Sort(sum.Models)
	return sum, nil
}

// ReservationSummary is what is reserved right now.
type ReservationSummary struct {
	Count          int64
	ReservedMicros int64
	Expired        int64 // past their expiry, waiting for the reaper
	OldestExpiry   *time.Time
}

// SummarizeReservations reads the in-flight reservations.
func (s *Store) SummarizeReservations(ctx context.Context, now time.Time) (ReservationSummary, error) {
	var out ReservationSummary
	var agg struct{ Count, ReservedMicros, Expired int64 }
	err := s.DB.WithContext(ctx).Model(&CostReservation{}).Select(`COUNT(*) AS count, COALESCE(SUM(amount_micros),0) AS reserved_micros,
COALESCE(SUM(CASE WHEN expires_at < ? THEN 1 ELSE 0 END),0) AS expired`, now.UTC()).Scan(&agg).Error
	if err != nil {
		return out, fmt.Errorf("summarize reservations: %w", err)
	}
	out.Count, out.ReservedMicros, out.Expired = agg.Count, agg.ReservedMicros, agg.Expired
	if s.Group != nil && s.hook.journal != nil {
		// Admissions not written to the database yet (held at most a
		// second; none expired).
		n, micros := s.hook.journal.heldReservations()
		out.Count, out.ReservedMicros = out.Count+n, out.ReservedMicros+micros
	}
	if out.Count > 0 {
		var first CostReservation
		if err := s.DB.WithContext(ctx).Order("expires_at").First(&first).Error; err == nil {
			t := first.ExpiresAt
			out.OldestExpiry = &t
		}
	}
	return out, nil
}

// BudgetCounters reads counters by key; missing keys are left out.
func (s *Store) BudgetCounters(ctx context.Context, keys []string) (map[string]CounterValue, error) {
	var rows []CounterValue
	if len(keys) == 0 {
		return map[string]CounterValue{}, nil
	}
	if err := s.DB.WithContext(ctx).Raw("SELECT counter_key AS key, spent_micros, reserved_micros FROM cost_budget_counters WHERE counter_key IN ?", keys).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read budget counters: %w", err)
	}
	out := make(map[string]CounterValue, len(rows))
	for _, r := range rows {
		out[r.Key] = r
	}
	if s.Group != nil && s.hook.journal != nil {
		s.hook.journal.reservedSnapshot(out) // admissions not written yet
	}
	return out, nil
}

// UpsertPrices records published prices; a price of the same provider,
// model and effective date is replaced (a correction).
func (s *Store) UpsertPrices(ctx context.Context, prices []PriceVersion) error {
	if len(prices) == 0 {
		return nil
	}
	now := time.Now().UTC()
	for i := range prices {
		prices[i].ID = 0
		prices[i].UpdatedAt = now
	}
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "provider"}, {Name: "model"}, {Name: "effective_date"}},
		DoUpdates: clause.AssignmentColumns([]string{"version", "source", "input_per_m_tok", "output_per_m_tok", "cached_input_per_m_tok", "updated_at"}),
	}).Create(&prices).Error
	if err != nil {
		return fmt.Errorf("record prices: %w", err)
	}
	return nil
}

// ListPrices returns every recorded price.
func (s *Store) ListPrices(ctx context.Context) ([]PriceVersion, error) {
	var out []PriceVersion
	if err := s.DB.WithContext(ctx).Order("provider, model, effective_date").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list prices: %w", err)
	}
	return out, nil
}

// MicrosToUSD converts micro-dollars to dollars for display.
func MicrosToUSD(m int64) float64 { return float64(m) / MicrosPerUSD }

// USDToMicros converts a configured dollar amount to micro-dollars, rounding
// to the nearest micro-dollar.
func USDToMicros(usd float64) int64 {
	if usd <= 0 {
		return 0
	}
	if usd*MicrosPerUSD >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Round(usd * MicrosPerUSD))
}
