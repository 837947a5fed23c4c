package models

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The cost ledger: one row per inference call (idempotent on the call id),
// the per-period budget counters that make admission atomic across gateway
// processes, the in-flight reservations, and the history of model prices.
//
// Money is integer micro-dollars everywhere (1 USD = 1,000,000 micros);
// cost_usd is kept beside it for compatibility and is derived from it.
// Prompts and tool contents are never stored here.

// Outcomes of a ledger row.
const (
	// OutcomePending: admitted, the provider request is (or may be) running.
	OutcomePending = "pending"
	// OutcomeSucceeded: the provider answered.
	OutcomeSucceeded = "succeeded"
	// OutcomeFailed: the provider answered with an error or could not be reached.
	OutcomeFailed = "failed"
	// OutcomeIncomplete: a stream (or answer) the provider cut before its end.
	OutcomeIncomplete = "incomplete"
	// OutcomeCancelled: the caller went away or stopped consuming the stream.
	OutcomeCancelled = "cancelled"
	// OutcomeTimeout: the request deadline ended the call.
	OutcomeTimeout = "timeout"
	// OutcomeRejected: admission refused the call before any provider access.
	OutcomeRejected = "rejected"
	// OutcomeExpired: the call was never settled (gateway crash); its
	// reservation was released by the reaper after reservation_ttl.
	OutcomeExpired = "expired"
	// OutcomeUnsettled: the call's reservation lapsed without a settlement
	// (a crash mid-call). It may have reached the provider, so it is priced
	// at its reserved worst case (pricing_status estimated) and counts
	// against budgets until a late settlement or reconciliation corrects it.
	OutcomeUnsettled = "unsettled"
)

// Pricing statuses of a ledger row.
const (
	PricingPriced  = "priced"
	PricingUnknown = "unknown"
	// PricingEstimated: the cost is the reserved worst case of an
	// unsettled call, not a measured usage.
	PricingEstimated = "estimated"
)

// MicrosPerUSD converts micro-dollars to dollars.
const MicrosPerUSD = 1_000_000

// LedgerEntry is one inference call. The call id is durable: retries of the
// call (provider retries, a retried Temporal activity re-using its call id)
// stay on this row, so nothing is counted twice.
type LedgerEntry struct {
	CallID    string `gorm:"primaryKey;size:191" json:"call_id"`
	Subject   string `gorm:"size:191" json:"subject"`
	Workspace string `gorm:"size:512" json:"workspace,omitempty"`
	AgentID   string `gorm:"size:100" json:"agent_id,omitempty"`
	SessionID string `gorm:"size:191" json:"session_id,omitempty"`
	RunID     string `gorm:"size:64;index" json:"run_id,omitempty"`
	// RootRunID is the run id of the run tree's root (RunID itself for a
	// root run, empty for calls of no run): a delegated peer's calls roll
	// up to the run that delegated, however deep.
	RootRunID string `gorm:"size:64;index" json:"root_run_id,omitempty"`
	// Source is the surface (chat, stream, webhook, task, ...): chargeback's "feature".
	Source  string `gorm:"size:32" json:"source"`
	Trigger string `gorm:"size:32" json:"trigger,omitempty"`
	// Provider and Model are what was routed to; ResponseModel is what the provider reported.
	Provider           string `gorm:"size:100" json:"provider"`
	Model              string `gorm:"size:191" json:"model"`
	ResponseModel      string `gorm:"size:191" json:"response_model,omitempty"`
	DataClassification string `gorm:"size:64" json:"data_classification,omitempty"`
	Interactive        bool   `json:"interactive"`
	// ProviderRequestID is the provider's id of the last request; ProviderRequestIDs
	// lists every one seen for this call, comma-separated.
	ProviderRequestID  string `gorm:"size:191" json:"provider_request_id,omitempty"`
	ProviderRequestIDs string `json:"provider_request_ids,omitempty"`

	Outcome string `gorm:"size:16" json:"outcome"`
	// RejectionCode is set on rejected rows (budget_exceeded, rate_limited, ...).
	RejectionCode string `gorm:"size:32" json:"rejection_code,omitempty"`
	// ErrorKind classifies a failure without its text (provider texts may echo
	// prompt content): provider_http_503, unreachable, stream_cut, ...
	ErrorKind    string `gorm:"size:64" json:"error_kind,omitempty"`
	FinishReason string `gorm:"size:32" json:"finish_reason,omitempty"`

	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CachedInputTokens   int64 `json:"cached_input_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	ReasoningTokens     int64 `json:"reasoning_tokens"`
	ToolUsePromptTokens int64 `json:"tool_use_prompt_tokens"`
	// UsageEstimated is set when the provider did not report usage (cut or
	// cancelled stream) and the counts are the gateway's conservative estimate.
	UsageEstimated bool `json:"usage_estimated"`

	// EstimatedInputTokens and MaxOutputTokens are what admission assumed
	// (after any clamping); RequestedMaxOutputTokens is what the caller asked.
	EstimatedInputTokens     int64 `json:"estimated_input_tokens"`
	MaxOutputTokens          int64 `json:"max_output_tokens"`
	RequestedMaxOutputTokens int64 `json:"requested_max_output_tokens"`
	// Clamped tells that admission lowered the output allowance (ceiling,
	// remaining budget or provider TPM).
	Clamped bool `json:"clamped"`

	PricingStatus      string `gorm:"size:16" json:"pricing_status"`
	PriceVersion       string `gorm:"size:64" json:"price_version,omitempty"`
	PriceSource        string `gorm:"size:191" json:"price_source,omitempty"`
	PriceEffectiveDate string `gorm:"size:10" json:"price_effective_date,omitempty"`

	// CostMicros is authoritative; CostUSD = CostMicros / 1e6.
	CostMicros int64   `json:"cost_micros"`
	CostUSD    float64 `json:"cost_usd"`
	// ReservedMicros is the worst case reserved by the last admission.
	ReservedMicros int64  `json:"reserved_micros"`
	Mode           string `gorm:"size:8" json:"enforcement_mode"`

	// Attempts counts provider requests (retries included) over all
	// executions; Executions counts admissions of this call id. An
	// admission counts its first request when it is admitted, its
	// settlement adds the retries beyond it: an execution cut off by a crash
	// (never settled) is still counted, once.
	Attempts   int `json:"attempts"`
	Executions int `json:"executions"`

	CreatedAt  time.Time  `gorm:"index" json:"created_at"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	UpdatedAt  time.Time  `json:"updated_at"`

	// EstimatedCostMicros is the part of CostMicros that is the reserved
	// worst case of an unsettled admission (EstimateAdmission); a late
	// settlement of that admission replaces it with the real cost.
	// ReplacedEstimateMicros is what the last settlement replaced (the
	// settlement moves it off the budget counters).
	EstimatedCostMicros    int64  `gorm:"not null;default:0" json:"estimated_cost_micros"`
	EstimateAdmission      string `gorm:"size:64;not null;default:''" json:"-"`
	ReplacedEstimateMicros int64  `gorm:"not null;default:0" json:"-"`

	// SettledAdmission is the id of the last admission settled on this row;
	// it makes a repeated settlement of one admission a no-op.
	SettledAdmission string `gorm:"size:64" json:"-"`

	// Reconciliation (a later step) fills these from provider usage exports.
	ReconciledAt         *time.Time `json:"reconciled_at,omitempty"`
	ReconciledCostMicros *int64     `json:"reconciled_cost_micros,omitempty"`
}

// TableName implements gorm's Tabler.
func (LedgerEntry) TableName() string { return "cost_ledger" }

// BudgetCounter is the recorded and reserved spend of one budget scope in
// one calendar period (key e.g. "day:2026-01-02", "month:2026-01",
// "user-day:2026-01-02:alice"). Admission locks these rows, so recorded plus
// in-flight spend is checked and changed atomically by every gateway
// sharing the database.
type BudgetCounter struct {
	Key            string `gorm:"column:counter_key;primaryKey;size:400"`
	SpentMicros    int64  `gorm:"not null;default:0"`
	ReservedMicros int64  `gorm:"not null;default:0"`
	UpdatedAt      time.Time
}

// TableName implements gorm's Tabler.
func (BudgetCounter) TableName() string { return "cost_budget_counters" }

// CostReservation is the worst-case cost of one admitted call, held until the
// call settles or the reaper releases it after its expiry.
type CostReservation struct {
	ID           string `gorm:"primaryKey;size:64"`
	CallID       string `gorm:"size:191"`
	AmountMicros int64  `gorm:"not null"`
	// Keys are the budget counters holding the amount, comma-separated.
	Keys      string    `gorm:"column:counter_keys;not null"`
	Provider  string    `gorm:"size:100"`
	ExpiresAt time.Time `gorm:"index"`
	CreatedAt time.Time
	// Settled marks a reservation whose call has settled (PostgreSQL) but
	// whose release and cost (SettledCostMicros) are not yet on the
	// counters; ApplySettled (or the reaper) moves them there and deletes it.
	Settled           bool  `gorm:"not null;default:false"`
	SettledCostMicros int64 `gorm:"not null;default:0"`
}

// TableName implements gorm's Tabler.
func (CostReservation) TableName() string { return "cost_reservations" }

// PriceVersion is one published price of a provider/model, in USD per
// million tokens. Rows are kept when the configuration moves on, so the
// price in effect at any call time stays known.
type PriceVersion struct {
	ID       int64  `gorm:"primaryKey"`
	Provider string `gorm:"size:100;uniqueIndex:idx_cost_prices_key,priority:1"`
	Model    string `gorm:"size:191;uniqueIndex:idx_cost_prices_key,priority:2"`
	// EffectiveDate is YYYY-MM-DD (UTC); "" means always.
	EffectiveDate      string `gorm:"size:10;uniqueIndex:idx_cost_prices_key,priority:3"`
	Version            string `gorm:"size:64"`
	Source             string `gorm:"size:191"`
	InputPerMTok       float64
	OutputPerMTok      float64
	CachedInputPerMTok float64
	UpdatedAt          time.Time
}

// TableName implements gorm's Tabler.
func (PriceVersion) TableName() string { return "cost_prices" }

// CounterSeed describes a budget counter to create when missing. A new
// counter starts from the spend the ledger already recorded for its scope
// and period, so a budget switched on mid-period counts what came before.
type CounterSeed struct {
	Key      string
	From, To time.Time // the period, [From, To)
	Subject  string    // only rows of this subject, when set
	AgentID  string    // only rows of this agent, when set
	RunID    string    // only rows of this run, when set
	// RootRunID: only rows of this run tree (root_run_id), when set.
	RootRunID string
}

// EnsureBudgetCounters creates the counters that do not exist yet.
func (s *Store) EnsureBudgetCounters(ctx context.Context, seeds []CounterSeed) error {
	now := time.Now().UTC()
	for _, seed := range seeds {
		q := `INSERT INTO cost_budget_counters (counter_key, spent_micros, reserved_micros, updated_at)
SELECT ?, COALESCE(SUM(cost_micros), 0), 0, ? FROM cost_ledger WHERE created_at >= ? AND created_at < ?`
		args := []any{seed.Key, now, seed.From.UTC(), seed.To.UTC()}
		if seed.Subject != "" {
			q += " AND subject = ?"
			args = append(args, seed.Subject)
		}
		if seed.AgentID != "" {
			q += " AND agent_id = ?"
			args = append(args, seed.AgentID)
		}
		if seed.RunID != "" {
			q += " AND run_id = ?"
			args = append(args, seed.RunID)
		}
		if seed.RootRunID != "" {
			q += " AND root_run_id = ?"
			args = append(args, seed.RootRunID)
		}
		q += " ON CONFLICT (counter_key) DO NOTHING"
		if err := s.DB.WithContext(ctx).Exec(q, args...).Error; err != nil {
			return fmt.Errorf("create budget counter %s: %w", seed.Key, err)
		}
	}
	return nil
}

// ErrCountersMissing is returned by AdmitCall when a budget counter it was
// given does not exist (EnsureBudgetCounters first).
var ErrCountersMissing = errors.New("budget counters missing")

// CounterValue is a budget counter as read under lock.
type CounterValue struct {
	Key            string
	SpentMicros    int64
	ReservedMicros int64
}
