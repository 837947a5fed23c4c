package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Reconciliation (spec cost rule 12): what the providers' usage and cost
// exports say a day cost, one row per provider, day, model and line item,
// and the runs that imported them and compared them with the ledger. No
// credential is ever stored here: the admin keys stay in the environment.

// ProviderUsageLine is one line of a provider's export for one UTC day:
// a cost line item (CostMicros) or a model's usage (tokens, requests).
// Re-importing a day upserts on (provider, day, model, line item) and drops
// the lines the provider no longer reports, so a day is never counted twice.
type ProviderUsageLine struct {
	ID       int64  `gorm:"primaryKey" json:"-"`
	Provider string `gorm:"size:100;not null;uniqueIndex:idx_provider_usage_key,priority:1" json:"provider"`
	Day      string `gorm:"size:10;not null;uniqueIndex:idx_provider_usage_key,priority:2" json:"day"`
	Model    string `gorm:"size:191;not null;uniqueIndex:idx_provider_usage_key,priority:3" json:"model"`
	LineItem string `gorm:"size:191;not null;uniqueIndex:idx_provider_usage_key,priority:4" json:"line_item"`

	CostMicros          int64 `json:"cost_micros"`
	InputTokens         int64 `json:"input_tokens"`
	CachedInputTokens   int64 `json:"cached_input_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	Requests            int64 `json:"requests"`

	// ImportID is the reconciliation run that wrote the line last.
	ImportID   string    `gorm:"size:64" json:"import_id"`
	ImportedAt time.Time `json:"imported_at"`
}

// TableName implements gorm's Tabler.
func (ProviderUsageLine) TableName() string { return "cost_provider_usage" }

// Reconciliation run statuses.
const (
	ReconcileRunning   = "running"
	ReconcileSucceeded = "succeeded"
	ReconcileFailed    = "failed"
)

// ReconciliationRun is one run of the Reconcile workflow for one day, with
// its per-provider results (variance included) as JSON.
type ReconciliationRun struct {
	// ID is the Temporal run id of the workflow execution.
	ID         string `gorm:"primaryKey;size:64" json:"id"`
	WorkflowID string `gorm:"size:191;index" json:"workflow_id"`
	Day        string `gorm:"size:10;index" json:"day"`
	Trigger    string `gorm:"size:16" json:"trigger"`
	Status     string `gorm:"size:16" json:"status"`
	// Error is the last failure (export API error, missing key variable),
	// scrubbed of secrets.
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `gorm:"index" json:"started_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// ProvidersJSON holds []ProviderReconciliation.
	ProvidersJSON string                   `gorm:"column:providers" json:"-"`
	Providers     []ProviderReconciliation `gorm:"-" json:"providers"`
}

// TableName implements gorm's Tabler.
func (ReconciliationRun) TableName() string { return "cost_reconciliation_runs" }

// ProviderReconciliation is one provider's result in a run: import progress,
// totals and variance (provider cost - ledger cost) for the day, and the
// same per model.
type ProviderReconciliation struct {
	Provider string `json:"provider"`
	Type     string `json:"type"`
	// Status: pending, importing, imported, failed.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Rows   int    `json:"rows"`
	Pages  int    `json:"pages"`
	Variance
	Alert  bool            `json:"alert"`
	Models []ModelVariance `json:"models,omitempty"`
}

// Variance compares the provider's cost with the ledger's.
type Variance struct {
	ProviderMicros int64   `json:"provider_cost_micros"`
	LedgerMicros   int64   `json:"ledger_cost_micros"`
	VarianceMicros int64   `json:"variance_micros"`
	ProviderUSD    float64 `json:"provider_cost_usd"`
	LedgerUSD      float64 `json:"ledger_cost_usd"`
	VarianceUSD    float64 `json:"variance_usd"`
	// Fraction is VarianceMicros relative to the provider's cost (to the
	// ledger's when the provider reports nothing); 0 when both are 0.
	Fraction float64 `json:"variance_fraction"`
}

// NewVariance computes the variance of provider against ledger.
func NewVariance(provider, ledger int64) Variance {
	v := Variance{ProviderMicros: provider, LedgerMicros: ledger, VarianceMicros: provider - ledger}
	v.ProviderUSD, v.LedgerUSD, v.VarianceUSD = MicrosToUSD(provider), MicrosToUSD(ledger), MicrosToUSD(v.VarianceMicros)
	switch {
	case provider != 0:
		v.Fraction = float64(v.VarianceMicros) / float64(provider)
	case ledger != 0:
		v.Fraction = float64(v.VarianceMicros) / float64(ledger)
	}
	return v
}

// ModelVariance is the variance of one model.
type ModelVariance struct {
	Model string `json:"model"`
	Variance
}

func (r *ReconciliationRun) encode() error {
	b, err := json.Marshal(r.Providers)
	if err != nil {
		return err
	}
	r.ProvidersJSON = string(b)
	return nil
}

func (r *ReconciliationRun) decode() error {
	r.Providers = nil
	if r.ProvidersJSON == "" {
		r.Providers = []ProviderReconciliation{}
		return nil
	}
	return json.Unmarshal([]byte(r.ProvidersJSON), &r.Providers)
}

// SaveReconciliationRun writes a run (insert or replace by id).
func (s *Store) SaveReconciliationRun(ctx context.Context, r *ReconciliationRun) error {
	if err := r.encode(); err != nil {
		return fmt.Errorf("save reconciliation run: %w", err)
	}
	r.UpdatedAt = time.Now().UTC()
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(r).Error
	if err != nil {
		return fmt.Errorf("save reconciliation run %s: %w", r.ID, err)
	}
	return nil
}

// GetReconciliationRun reads a run by id (ErrNotFound).
func (s *Store) GetReconciliationRun(ctx context.Context, id string) (*ReconciliationRun, error) {
	var r ReconciliationRun
	err := s.DB.WithContext(ctx).First(&r, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read reconciliation run %s: %w", id, err)
	}
	return &r, r.decode()
}

// LatestReconciliationRun is the run started last (ErrNotFound when none).
func (s *Store) LatestReconciliationRun(ctx context.Context) (*ReconciliationRun, error) {
	var r ReconciliationRun
	err := s.DB.WithContext(ctx).Order("started_at DESC, id").First(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read latest reconciliation run: %w", err)
	}
	return &r, r.decode()
}

// ReplaceProviderUsage stores a provider's complete export of one day in
// one transaction: every line is upserted on its key and the lines of the
// day not in this import are deleted. A day imported twice holds one set
// of lines; a failed import leaves the previous set untouched.
func (s *Store) ReplaceProviderUsage(ctx context.Context, provider, day, importID string, lines []ProviderUsageLine) error {
	now := time.Now().UTC()
	for i := range lines {
		lines[i].ID = 0
		lines[i].Provider, lines[i].Day, lines[i].ImportID, lines[i].ImportedAt = provider, day, importID, now
	}
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if len(lines) > 0 {
			err := tx.Clauses(clause.OnConflict{
				Columns: []clause.Column{{Name: "provider"}, {Name: "day"}, {Name: "model"}, {Name: "line_item"}},
				DoUpdates: clause.AssignmentColumns([]string{"cost_micros", "input_tokens", "cached_input_tokens",
					"cache_creation_tokens", "output_tokens", "requests", "import_id", "imported_at"}),
			}).CreateInBatches(lines, 200).Error
			if err != nil {
				return err
			}
		}
		return tx.Where("provider = ? AND day = ? AND import_id <> ?", provider, day, importID).Delete(&ProviderUsageLine{}).Error
	})
	if err != nil {
		return fmt.Errorf("store %s export of %s: %w", provider, day, err)
	}
	return nil
}

// ProviderUsage lists a provider's lines of one day.
func (s *Store) ProviderUsage(ctx context.Context, provider, day string) ([]ProviderUsageLine, error) {
	var out []ProviderUsageLine
	err := s.DB.WithContext(ctx).Where("provider = ? AND day = ?", provider, day).Order("model, line_item").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read %s export of %s: %w", provider, day, err)
	}
	return out, nil
}

// LedgerCostByModel sums the ledger's cost of one provider's calls created
// in [from, to), per model as the provider reported it (response_model,
// else the model routed to). Rejected calls cost nothing and are left out.
func (s *Store) LedgerCostByModel(ctx context.Context, provider string, from, to time.Time) (map[string]int64, error) {
	var rows []struct {
		Model      string
		CostMicros int64
	}
	err := s.DB.WithContext(ctx).Model(&LedgerEntry{}).
		Select("CASE WHEN response_model <> '' THEN response_model ELSE model END AS model, COALESCE(SUM(cost_micros), 0) AS cost_micros").
		Where("provider = ? AND created_at >= ? AND created_at < ? AND outcome <> ?", provider, from.UTC(), to.UTC(), OutcomeRejected).
		Group("CASE WHEN response_model <> '' THEN response_model ELSE model END").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("ledger cost of %s: %w", provider, err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Model] += r.CostMicros
	}
	return out, nil
}
