package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentryhq/agentry/internal/detached"
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

// CostLedger is the hot path of cost accounting: every inference is
// admitted and settled through it, so it speaks SQL directly with prepared
// statements (GORM's per-statement reflection and SQLite's per-statement
// parsing cost more than the statements themselves) and takes each
// transaction with as few statements, and locks held for as short, as
// possible. It embeds the Store for everything else.
type CostLedger struct {
	*Store
	db *sql.DB

	mu    sync.Mutex
	stmts map[string]*sql.Stmt

	// writers bounds this process's admissions and settlements in the
	// database at once. They all update the same day counter row; past a
	// few at a time they only queue on its row lock (or on SQLite's write
	// lock), and a queue in the database costs far more than one here.
	writers chan struct{}
}

// Writers in the database at once per process (see CostLedger.writers):
// measured, more only lengthen the queue on the hot row.
const (
	PostgresLedgerWriters = 4
	SQLiteLedgerWriters   = 2
)

func (l *CostLedger) acquire(ctx context.Context) (func(), error) {
	if l.Group != nil {
		return func() {}, nil // the group commit writer is the only writer
	}
	select {
	case l.writers <- struct{}{}:
		return func() { <-l.writers }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// NewCostLedger returns the cost ledger of the store, with its statements
// prepared. Close it to release them.
func NewCostLedger(ctx context.Context, s *Store) (*CostLedger, error) {
	db, err := s.DB.DB()
	if err != nil {
		return nil, fmt.Errorf("cost ledger: %w", err)
	}
	n := SQLiteLedgerWriters
	if s.Driver == DriverPostgres {
		n = PostgresLedgerWriters
	}
	l := &CostLedger{Store: s, db: db, stmts: map[string]*sql.Stmt{}, writers: make(chan struct{}, max(n, 1))}
	queries := []string{upsertPendingSQL, insertReservationSQL, reserveSQL, settleOneSQL, settleReturningSQL,
		releaseSQL, clampReservationSQL, clampLedgerSQL}
	if s.Driver == DriverPostgres {
		queries = append(queries, settlePostgresSQL, admitPostgresSQL, settleMarkPostgresSQL, applySettledPostgresSQL)
	}
	for n := 1; n <= 4; n++ {
		queries = append(queries, reserveManySQL(n), settleManySQL(n))
	}
	if s.Group != nil {
		queries = append(queries, rejectPendingSQL, settledRowSQL)
	}
	// Prepared here, outside any transaction: preparing needs a connection
	// of its own, and inside a transaction (holding one) a full pool would
	// wait for itself. Transactions then re-prepare on their connection.
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, l.rebind(q))
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("cost ledger: prepare %q: %w", firstWords(q), err)
		}
		l.stmts[q] = st
	}
	return l, nil
}

// Close releases the prepared statements.
func (l *CostLedger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for q, st := range l.stmts {
		st.Close()
		delete(l.stmts, q)
	}
	return nil
}

// stmt returns the prepared form of query (written with ? placeholders)
// bound to tx. A query not prepared by NewCostLedger is prepared on the
// transaction's connection for this transaction only.
func (l *CostLedger) stmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	l.mu.Lock()
	st, ok := l.stmts[query]
	l.mu.Unlock()
	if ok {
		return tx.StmtContext(ctx, st), nil
	}
	st, err := tx.PrepareContext(ctx, l.rebind(query))
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", firstWords(query), err)
	}
	return st, nil
}

// execLiteral is exec for a literal statement (see literalSQL); it may
// reorder args.
func (l *CostLedger) execLiteral(ctx context.Context, tx *sql.Tx, s *literalSQL, args ...any) (int64, error) {
	query, args := l.Group.literalText(tx, s, args)
	return l.exec(ctx, tx, query, args...)
}

func (l *CostLedger) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (int64, error) {
	if l.Group != nil && l.Group.onWriterConn(tx) {
		n, err := l.Group.execRaw(ctx, query, args)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", firstWords(query), err)
		}
		return n, nil
	}
	st, err := l.stmt(ctx, tx, query)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	return res.RowsAffected()
}

// counters runs a counter UPDATE ... RETURNING and collects the rows.
func (l *CostLedger) counters(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]CounterValue, error) {
	st, err := l.stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	defer rows.Close()
	var out []CounterValue
	for rows.Next() {
		var v CounterValue
		if err := rows.Scan(&v.Key, &v.SpentMicros, &v.ReservedMicros); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// rebind turns ? placeholders into PostgreSQL's $n.
func (l *CostLedger) rebind(q string) string {
	if l.Driver != DriverPostgres {
		return q
	}
	return pgPlaceholders(q)
}

func firstWords(q string) string {
	f := strings.Fields(q)
	return strings.Join(f[:min(len(f), 3)], " ")
}

// inTx runs fn in a transaction, repeating it a few times when the database
// reports a deadlock, a serialization failure or a busy SQLite.
//
// On SQLite the transaction is the group commit's (Store.Group): fn runs in
// the writer's next batch and inTx returns once that batch committed. The
// callers pass a ctx without cancellation there (writerCtx), so a caller
// going away never interrupts a statement of the shared connection.
func (l *CostLedger) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if l.Group != nil {
		return l.Group.Do(ctx, func(_ context.Context, tx *sql.Tx) error { return fn(tx) })
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = l.tx(ctx, fn)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
	return err
}

func (l *CostLedger) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// writerCtx is the context of statements run by fn of inTx: on SQLite's
// group commit without cancellation (see inTx).
func (l *CostLedger) writerCtx(ctx context.Context) context.Context {
	if l.Group != nil {
		return detached.Context(ctx)
	}
	return ctx
}

// errRejected rolls an admission back.
var errRejected = errors.New("rejected")

// AdmitParams is one admission: the pending ledger row, and (when Keys is
// set) the reservation to take against those budget counters.
type AdmitParams struct {
	Entry *LedgerEntry
	// AdmissionID identifies this admission (and its reservation).
	AdmissionID string
	// Keys are the budget counters the reservation is taken against. Empty:
	// no reservation (enforcement off).
	Keys []string
	// WorstMicros is the reservation wanted.
	WorstMicros int64
	// Fit, when set, decides under lock how much to reserve given the
	// counters as they were before this admission: it returns the amount (at
	// most WorstMicros) and true, or false to reject. It may change Entry
	// (clamped allowance) and, when it rejects, fills the rejection fields of
	// Entry. Nil reserves WorstMicros.
	Fit func(counters []CounterValue) (int64, bool)
	// Limits are the budgets of the keys in micro-dollars (missing or 0:
	// none); Fit must admit the worst case whenever it fits them. When it
	// does, PostgreSQL admits in one statement; otherwise (and on SQLite, and
	// when Fit is set without Limits) Fit decides.
	Limits    map[string]int64
	ExpiresAt time.Time
}

// AdmitResult tells what AdmitCall did.
type AdmitResult struct {
	Admitted       bool
	ReservedMicros int64
	// Counters are the values read under lock, before this reservation.
	Counters []CounterValue
}

// ledgerColumns are written by the pending row's INSERT, in this order.
const ledgerColumns = `call_id, subject, workspace, agent_id, session_id, run_id, source, "trigger", provider, model, response_model,
data_classification, interactive, provider_request_id, provider_request_ids, outcome, rejection_code, error_kind, finish_reason,
input_tokens, output_tokens, cached_input_tokens, cache_creation_tokens, reasoning_tokens, tool_use_prompt_tokens, usage_estimated,
estimated_input_tokens, max_output_tokens, requested_max_output_tokens, clamped, pricing_status, price_version, price_source,
price_effective_date, cost_micros, cost_usd, reserved_micros, mode, attempts, executions, created_at, started_at, updated_at, settled_admission`

// upsertPendingSQL inserts the pending row of a call or, for a call id seen
// before (a retried activity), marks it pending again and counts the
// execution and its first provider request; usage and cost already
// recorded stay. A rejection takes both counts back.
var upsertPendingSQL = `INSERT INTO cost_ledger (` + ledgerColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, '', '', 'pending', '', '', '', 0, 0, 0, 0, 0, 0, FALSE, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, 1, 1, ?, ?, ?, '')
ON CONFLICT (call_id) DO UPDATE SET ` + pendingConflictSet

// pendingConflictSet marks a call id seen before pending again and counts
// the execution; usage and cost already recorded stay.
const pendingConflictSet = `outcome = 'pending', rejection_code = '', error_kind = '',
executions = cost_ledger.executions + 1, attempts = cost_ledger.attempts + 1, started_at = excluded.started_at, updated_at = excluded.updated_at, finished_at = NULL,
provider = excluded.provider, model = excluded.model, mode = excluded.mode, reserved_micros = excluded.reserved_micros,
max_output_tokens = excluded.max_output_tokens, requested_max_output_tokens = excluded.requested_max_output_tokens,
estimated_input_tokens = excluded.estimated_input_tokens, clamped = excluded.clamped, pricing_status = excluded.pricing_status,
price_version = excluded.price_version, price_source = excluded.price_source, price_effective_date = excluded.price_effective_date`

func pendingArgs(e *LedgerEntry) []any {
	return []any{e.CallID, e.Subject, e.Workspace, e.AgentID, e.SessionID, e.RunID, e.Source, e.Trigger, e.Provider, e.Model,
		e.DataClassification, e.Interactive, e.EstimatedInputTokens, e.MaxOutputTokens, e.RequestedMaxOutputTokens, e.Clamped,
		e.PricingStatus, e.PriceVersion, e.PriceSource, e.PriceEffectiveDate, e.ReservedMicros, e.Mode,
		e.CreatedAt.UTC(), e.StartedAt.UTC(), e.StartedAt.UTC()}
}

const insertReservationSQL = `INSERT INTO cost_reservations (id, call_id, amount_micros, counter_keys, provider, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`

// reserveSQL adds to one counter (PostgreSQL: one statement per key, in
// key order, so concurrent transactions lock the counters in one order).
const reserveSQL = `UPDATE cost_budget_counters SET reserved_micros = reserved_micros + ?, updated_at = ? WHERE counter_key = ?
RETURNING counter_key, spent_micros, reserved_micros`

// reserveManySQL adds to several counters at once (SQLite: one writer, no
// lock order to keep).
func reserveManySQL(n int) string {
	return `UPDATE cost_budget_counters SET reserved_micros = reserved_micros + ?, updated_at = ? WHERE counter_key IN (` +
		strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `) RETURNING counter_key, spent_micros, reserved_micros`
}

// addToCounters adds delta to the reserved amount (and spent to the spent
// amount) of every key, returning the counters after the change, in key
// order.
func (l *CostLedger) addToCounters(ctx context.Context, tx *sql.Tx, keys []string, reserved, spent int64, at time.Time) ([]CounterValue, error) {
	if l.Group != nil {
		return l.Group.counters.add(ctx, tx, keys, reserved, spent, at) // held by the writer
	}
	var out []CounterValue
	if l.Driver == DriverPostgres {
		q := settleOneSQL
		for _, k := range keys {
			vs, err := l.counters(ctx, tx, q, spent, reserved, at, k)
			if err != nil {
				return nil, err
			}
			out = append(out, vs...)
		}
	} else {
		args := []any{spent, reserved, at}
		for _, k := range keys {
			args = append(args, k)
		}
		vs, err := l.counters(ctx, tx, settleManySQL(len(keys)), args...)
		if err != nil {
			return nil, err
		}
		out = vs
	}
	if len(out) != len(keys) {
		return nil, fmt.Errorf("update budget counters: %d of %d exist: %w", len(out), len(keys), ErrCountersMissing)
	}
	slices.SortFunc(out, func(a, b CounterValue) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

const (
	clampReservationSQL = `UPDATE cost_reservations SET amount_micros = ? WHERE id = ?`
	clampLedgerSQL      = `UPDATE cost_ledger SET reserved_micros = ?, max_output_tokens = ?, clamped = ? WHERE call_id = ?`
	releaseSQL          = `DELETE FROM cost_reservations WHERE id = ? RETURNING amount_micros`
)

const settleOneSQL = `UPDATE cost_budget_counters SET spent_micros = spent_micros + ?, reserved_micros = reserved_micros + ?, updated_at = ?
WHERE counter_key = ? RETURNING counter_key, spent_micros, reserved_micros`

func settleManySQL(n int) string {
	return `UPDATE cost_budget_counters SET spent_micros = spent_micros + ?, reserved_micros = reserved_micros + ?, updated_at = ? WHERE counter_key IN (` +
		strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `) RETURNING counter_key, spent_micros, reserved_micros`
}

// AdmitCall writes the pending ledger row and takes the reservation in one
// transaction: it adds the worst case to every counter (row locks on
// PostgreSQL, taken in key order; SQLite's single writer), hands Fit the
// counters as they were, and keeps, lowers (clamping) or rolls back the
// reservation. Recorded plus in-flight spend checked by Fit therefore can
// never be exceeded by concurrent admissions of any number of processes.
// A rejected call's row is written with its rejection code.
//
// The ledger and reservation rows are written first and the hot counter
// rows last, so their locks are held for as short as possible.
func (l *CostLedger) AdmitCall(ctx context.Context, p AdmitParams) (AdmitResult, error) {
	var res AdmitResult
	if w := laterWritesOf(ctx); w != nil && l.Group == nil {
		// A later call of a request holding settlements (an agent's next
		// turn): they are written first, so the budget sees what the
		// earlier turns cost instead of their reserved worst case.
		if held := w.take(false); len(held) > 0 {
			// Not cancelled with the caller: a written settlement is owed
			// whatever the request does next. On an error each held one
			// wrote itself alone.
			_ = l.writeHeld(detached.Context(ctx), held, nil)
		}
	}
	ctx = l.writerCtx(ctx)
	release, err := l.acquire(ctx)
	if err != nil {
		return res, err
	}
	defer release()
	keys := slices.Clone(p.Keys)
	slices.Sort(keys)
	e := p.Entry
	e.Outcome, e.Executions = OutcomePending, 1
	if e.CreatedAt.IsZero() {
		e.CreatedAt = e.StartedAt
	}
	e.UpdatedAt = e.StartedAt
	at := e.StartedAt.UTC()
	if l.Group != nil && l.Group.journal != nil {
		return l.admitJournaled(ctx, p, keys)
	}
	if len(keys) == 0 && l.Group != nil {
		err := l.Group.Admit(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := l.exec(ctx, tx, upsertPendingSQL, pendingArgs(e)...)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("write ledger row %s: %w", e.CallID, err)
		}
		res.Admitted = true
		return res, nil
	}
	if len(keys) == 0 {
		// Nothing to reserve: the pending row alone, no transaction.
		l.mu.Lock()
		st := l.stmts[upsertPendingSQL]
		l.mu.Unlock()
		if _, err := st.ExecContext(ctx, pendingArgs(e)...); err != nil {
			return res, fmt.Errorf("write ledger row %s: %w", e.CallID, err)
		}
		res.Admitted = true
		return res, nil
	}
	if l.Group != nil {
		return l.admitGrouped(ctx, p, keys)
	}
	rowWritten := false
	if l.Driver == DriverPostgres && (p.Fit == nil || p.Limits != nil) {
		done, err := l.admitPostgres(ctx, p, keys, &res)
		if done || err != nil {
			return res, err
		}
		rowWritten = true
	}
	err = l.inTx(ctx, func(tx *sql.Tx) error {
		res = AdmitResult{}
		if !rowWritten {
			if _, err := l.exec(ctx, tx, upsertPendingSQL, pendingArgs(e)...); err != nil {
				return fmt.Errorf("write ledger row %s: %w", e.CallID, err)
			}
		}
		if len(keys) == 0 {
			res.Admitted = true
			return nil
		}
		worst := p.WorstMicros
		if _, err := l.exec(ctx, tx, insertReservationSQL, p.AdmissionID, e.CallID, worst, strings.Join(keys, ","), e.Provider, p.ExpiresAt.UTC(), at); err != nil {
			return fmt.Errorf("insert reservation: %w", err)
		}
		var after []CounterValue
		if l.Driver == DriverPostgres {
			for _, k := range keys {
				vs, err := l.counters(ctx, tx, reserveSQL, worst, at, k)
				if err != nil {
					return err
				}
				after = append(after, vs...)
			}
		} else {
			args := []any{worst, at}
			for _, k := range keys {
				args = append(args, k)
			}
			vs, err := l.counters(ctx, tx, reserveManySQL(len(keys)), args...)
			if err != nil {
				return err
			}
			after = vs
		}
		if len(after) != len(keys) {
			return fmt.Errorf("reserve: %d of %d counters exist: %w", len(after), len(keys), ErrCountersMissing)
		}
		before := make([]CounterValue, len(after))
		for i, v := range after {
			v.ReservedMicros -= worst
			before[i] = v
		}
		slices.SortFunc(before, func(a, b CounterValue) int { return strings.Compare(a.Key, b.Key) })
		res.Counters = before
		amount, ok := worst, true
		if p.Fit != nil {
			amount, ok = p.Fit(before)
		}
		if !ok {
			return errRejected
		}
		if amount != worst {
			if _, err := l.addToCounters(ctx, tx, keys, amount-worst, 0, at); err != nil {
				return err
			}
			if _, err := l.exec(ctx, tx, clampReservationSQL, amount, p.AdmissionID); err != nil {
				return err
			}
			if _, err := l.exec(ctx, tx, clampLedgerSQL, amount, e.MaxOutputTokens, e.Clamped, e.CallID); err != nil {
				return err
			}
			e.ReservedMicros = amount
		}
		res.Admitted, res.ReservedMicros = true, amount
		return nil
	})
	if errors.Is(err, errRejected) {
		// Nothing was taken; the row records the rejection.
		e.ReservedMicros, e.Executions = 0, 0
		if rowWritten {
			e.Outcome = OutcomeRejected
			finished := e.StartedAt.UTC()
			e.FinishedAt = &finished
			err := l.DB.WithContext(ctx).Model(&LedgerEntry{}).Where("call_id = ?", e.CallID).Updates(map[string]any{
				"outcome": OutcomeRejected, "rejection_code": e.RejectionCode, "reserved_micros": 0, "finished_at": finished,
				"max_output_tokens": e.MaxOutputTokens, "executions": gorm.Expr("executions - 1"), "attempts": gorm.Expr("attempts - 1")}).Error
			if err != nil {
				return res, fmt.Errorf("record rejected call %s: %w", e.CallID, err)
			}
			return res, nil
		}
		return res, l.RecordRejection(ctx, e)
	}
	return res, err
}

const rejectPendingSQL = `UPDATE cost_ledger SET outcome = 'rejected', rejection_code = ?, reserved_micros = 0, finished_at = ?,
executions = executions - 1, attempts = attempts - 1, max_output_tokens = ?, clamped = ? WHERE call_id = ?`

// admitGrouped is the admission on SQLite, as one job of the group commit:
// read the counters (held by the writer: counterBook), let Fit decide, then
// write the pending row, the reservation and the counters, or the rejected
// row. It decides before it writes, so a rejection is a committed row and
// not a rolled-back job (the group commit runs its batch without
// savepoints; see GroupCommit).
func (l *CostLedger) admitGrouped(ctx context.Context, p AdmitParams, keys []string) (AdmitResult, error) {
	e := p.Entry
	at := e.StartedAt.UTC()
	var res AdmitResult
	err := l.Group.Admit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res = AdmitResult{}
		before, err := l.Group.decisionValues(ctx, tx, keys)
		if err != nil {
			return err
		}
		res.Counters = before
		amount, ok := p.WorstMicros, true
		if p.Fit != nil {
			amount, ok = p.Fit(before)
		}
		if !ok {
			return l.writeRejected(ctx, tx, e, at)
		}
		e.ReservedMicros = amount
		if _, err := l.exec(ctx, tx, upsertPendingSQL, pendingArgs(e)...); err != nil {
			return fmt.Errorf("write ledger row %s: %w", e.CallID, err)
		}
		if _, err := l.exec(ctx, tx, insertReservationSQL, p.AdmissionID, e.CallID, amount, strings.Join(keys, ","), e.Provider, p.ExpiresAt.UTC(), at); err != nil {
			return fmt.Errorf("insert reservation: %w", err)
		}
		if _, err := l.Group.counters.add(ctx, tx, keys, amount, 0, at); err != nil {
			return err
		}
		res.Admitted, res.ReservedMicros = true, amount
		return nil
	})
	return rejectedOrAdmitted(res, err, e, at)
}

// writeRejected writes the row of a call its admission rejected.
func (l *CostLedger) writeRejected(ctx context.Context, tx *sql.Tx, e *LedgerEntry, at time.Time) error {
	e.ReservedMicros = 0
	if _, err := l.exec(ctx, tx, upsertPendingSQL, pendingArgs(e)...); err != nil {
		return fmt.Errorf("write ledger row %s: %w", e.CallID, err)
	}
	_, err := l.exec(ctx, tx, rejectPendingSQL, e.RejectionCode, at, e.MaxOutputTokens, e.Clamped, e.CallID)
	return err
}

// rejectedOrAdmitted ends a grouped admission: the caller's entry says
// rejected when it was.
func rejectedOrAdmitted(res AdmitResult, err error, e *LedgerEntry, at time.Time) (AdmitResult, error) {
	if err != nil {
		return AdmitResult{}, err
	}
	if !res.Admitted {
		e.Outcome, e.Executions = OutcomeRejected, 0
		finished := at
		e.FinishedAt = &finished
	}
	return res, nil
}

// admitJournaled is the admission on SQLite with the admission journal:
// decided in the writer like admitGrouped, but journaled instead of
// written (see admissionJournal); its settlement writes the row. A
// rejection, or a counter not held in memory, takes the batch's
// transaction and is written as admitGrouped writes it.
func (l *CostLedger) admitJournaled(ctx context.Context, p AdmitParams, keys []string) (AdmitResult, error) {
	e := p.Entry
	at := e.StartedAt.UTC()
	// Encoded here, off the writer's goroutine (see appendAdmissionLine);
	// the writer's decision goes into the line beside it.
	encoded := encodeForJournal(e)
	var res AdmitResult
	err := l.Group.admitJournaled(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res = AdmitResult{}
		if other := l.Group.journal.sameCall(e.CallID); other != nil {
			// Another execution of this call is journaled: its row goes to
			// the database first, so the rows of both are written in the
			// order they were admitted (see settleJournaled).
			if tx == nil {
				return errNeedsTx
			}
			if err := l.Group.writeAdmission(ctx, tx, other); err != nil {
				return err
			}
			l.Group.journal.writeNow(other)
		}
		before, err := l.Group.decisionValues(ctx, tx, keys)
		if err != nil {
			return err
		}
		res.Counters = before
		amount, ok := p.WorstMicros, true
		if len(keys) == 0 {
			amount = 0 // enforcement off: the row alone
		} else if p.Fit != nil {
			amount, ok = p.Fit(before)
		}
		if !ok {
			if tx == nil {
				return errNeedsTx
			}
			return l.writeRejected(ctx, tx, e, at)
		}
		if len(keys) > 0 {
			e.ReservedMicros = amount
		}
		l.Group.journal.admit(&deferredAdmission{id: p.AdmissionID, entry: *e, encoded: encoded, keys: keys, amount: amount, expiresAt: p.ExpiresAt})
		res.Admitted, res.ReservedMicros = true, amount
		return nil
	})
	return rejectedOrAdmitted(res, err, e, at)
}

// admitPostgresSQL is the common admission on PostgreSQL in one statement
// (one round trip): write the pending row, then lock the counters in key
// order, check that the worst case fits every limit, and only then add it
// to the counters and insert the reservation. The row is written before the
// counters are locked (the EXISTS makes the lock wait for it), so the hot
// counter rows stay locked only for the short rest of the statement. It
// returns whether it fitted, how many counters exist, and the counters as
// they were ("key spent reserved,...").
var admitPostgresSQL = `WITH led AS (
  INSERT INTO cost_ledger (` + ledgerColumns + `)
  VALUES (?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, '', ?::text, ?::boolean, '', '', 'pending', '', '', '',
    0, 0, 0, 0, 0, 0, FALSE, ?::bigint, ?::bigint, ?::bigint, ?::boolean, ?::text, ?::text, ?::text, ?::text, 0, 0, ?::bigint, ?::text, 1, 1,
    ?::timestamptz, ?::timestamptz, ?::timestamptz, '')
  ON CONFLICT (call_id) DO UPDATE SET ` + pendingConflictSet + `
  RETURNING 1
), lk AS (
  SELECT counter_key, spent_micros, reserved_micros FROM cost_budget_counters
  WHERE counter_key = ANY(?::text[]) AND EXISTS (SELECT 1 FROM led) ORDER BY counter_key FOR UPDATE
), lim AS (
  SELECT * FROM unnest(?::text[], ?::bigint[]) AS l(counter_key, limit_micros)
), ok AS (
  SELECT COUNT(*) AS n, COALESCE(bool_and(lk.spent_micros + lk.reserved_micros + ?::bigint <= lim.limit_micros), false) AS fits
  FROM lk JOIN lim USING (counter_key)
), upd AS (
  UPDATE cost_budget_counters c SET reserved_micros = c.reserved_micros + ?::bigint, updated_at = ?::timestamptz
  FROM ok WHERE ok.fits AND ok.n = ?::bigint AND c.counter_key = ANY(?::text[])
  RETURNING c.counter_key
), rsv AS (
  INSERT INTO cost_reservations (id, call_id, amount_micros, counter_keys, provider, expires_at, created_at)
  SELECT ?::text, ?::text, ?::bigint, ?::text, ?::text, ?::timestamptz, ?::timestamptz FROM ok WHERE ok.fits AND ok.n = ?::bigint
  RETURNING 1
)
SELECT ok.fits, ok.n, COALESCE((SELECT string_agg(counter_key || ' ' || spent_micros || ' ' || reserved_micros, ',' ORDER BY counter_key) FROM lk), ''),
  (SELECT COUNT(*) FROM upd) + (SELECT COUNT(*) FROM rsv)
FROM ok`

// admitPostgres tries the one-statement admission. done is false when the
// worst case does not fit: the pending row is then written and the caller
// clamps or rejects in a transaction.
func (l *CostLedger) admitPostgres(ctx context.Context, p AdmitParams, keys []string, res *AdmitResult) (done bool, err error) {
	e := p.Entry
	limits := make([]int64, len(keys))
	for i, k := range keys {
		limits[i] = math.MaxInt64
		if v := p.Limits[k]; v > 0 {
			limits[i] = v
		}
	}
	n := int64(len(keys))
	at := e.StartedAt.UTC()
	args := pendingArgs(e)
	args = append(args, keys, keys, limits, p.WorstMicros, p.WorstMicros, at, n, keys)
	args = append(args, p.AdmissionID, e.CallID, p.WorstMicros, strings.Join(keys, ","), e.Provider, p.ExpiresAt.UTC(), at, n)
	l.mu.Lock()
	st := l.stmts[admitPostgresSQL]
	l.mu.Unlock()
	var fits bool
	var found, written int64
	var before string
	for attempt := 0; ; attempt++ {
		err = st.QueryRowContext(ctx, args...).Scan(&fits, &found, &before, &written)
		if err == nil || !transient(err) || attempt == 4 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
	if err != nil {
		return false, fmt.Errorf("admit call %s: %w", e.CallID, err)
	}
	if found != n {
		// The row was written; the caller creates the counters and admits
		// again, which counts the execution again.
		l.DB.WithContext(ctx).Exec("UPDATE cost_ledger SET executions = executions - 1, attempts = attempts - 1 WHERE call_id = ?", e.CallID)
		return false, fmt.Errorf("reserve: %d of %d counters exist: %w", found, n, ErrCountersMissing)
	}
	if !fits {
		// The pending row is written; the caller's transaction takes it from
		// there.
		return false, nil
	}
	*res = AdmitResult{Admitted: true, ReservedMicros: p.WorstMicros, Counters: parseCounters(before)}
	return true, nil
}

// parseCounters reads "key spent reserved,..." (keys contain no spaces or
// commas).
func parseCounters(s string) []CounterValue {
	var out []CounterValue
	for _, item := range strings.Split(s, ",") {
		f := strings.Fields(item)
		if len(f) != 3 {
			continue
		}
		v := CounterValue{Key: f[0]}
		fmt.Sscan(f[1], &v.SpentMicros)
		fmt.Sscan(f[2], &v.ReservedMicros)
		out = append(out, v)
	}
	return out
}

// Settlement is the final state of one admission of a call: usage and cost
// are added to the row (a call id executed twice was billed twice).
type Settlement struct {
	CallID      string
	AdmissionID string
	// ReservationID is released when set and still held (the reaper may
	// have released it already).
	ReservationID string
	// Keys are the counters of the admission (also when no reservation was
	// taken: spend is recorded on them in every mode).
	Keys []string

	Outcome, ErrorKind, FinishReason       string
	ResponseModel, ProviderRequestID       string
	Attempts                               int // provider requests of this admission (the first was counted at admission)
	InputTokens, OutputTokens              int64
	CachedInputTokens, CacheCreationTokens int64
	ReasoningTokens, ToolUsePromptTokens   int64
	UsageEstimated                         bool
	CostMicros                             int64
	FinishedAt                             time.Time
}

// SettleResult tells what SettleCall did.
type SettleResult struct {
	// Applied is false when this admission had been settled already.
	Applied bool
	// Released is true when the reservation was still held and is now gone
	// (false when the reaper had released it).
	Released       bool
	ReleasedMicros int64
	// Pending is true when the release and the cost are left for
	// ApplySettled (PostgreSQL): until then the reservation still counts,
	// in full, as reserved.
	Pending bool
	// Counters are the counters after the settlement, in key order.
	Counters []CounterValue
	// replaced is the unsettled estimate the settlement replaced.
	replaced int64
}

const settleLedgerSQL = `UPDATE cost_ledger SET outcome = ?, error_kind = ?, finish_reason = ?, attempts = attempts + ?,
input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cached_input_tokens = cached_input_tokens + ?,
cache_creation_tokens = cache_creation_tokens + ?, reasoning_tokens = reasoning_tokens + ?, tool_use_prompt_tokens = tool_use_prompt_tokens + ?,
cost_micros = cost_micros + ? - CASE WHEN estimate_admission = ? THEN estimated_cost_micros ELSE 0 END,
cost_usd = (cost_micros + ? - CASE WHEN estimate_admission = ? THEN estimated_cost_micros ELSE 0 END) / 1000000.0,
replaced_estimate_micros = CASE WHEN estimate_admission = ? THEN estimated_cost_micros ELSE 0 END,
estimated_cost_micros = CASE WHEN estimate_admission = ? THEN 0 ELSE estimated_cost_micros END,
pricing_status = CASE WHEN estimate_admission = ? AND pricing_status = 'estimated' THEN 'priced' ELSE pricing_status END,
estimate_admission = CASE WHEN estimate_admission = ? THEN '' ELSE estimate_admission END,
finished_at = ?, updated_at = ?, settled_admission = ?,
usage_estimated = (usage_estimated OR ?),
response_model = CASE WHEN ? = '' THEN response_model ELSE ? END,
provider_request_id = CASE WHEN ? = '' THEN provider_request_id ELSE ? END,
provider_request_ids = CASE WHEN ? = '' THEN provider_request_ids WHEN provider_request_ids = '' THEN ? ELSE provider_request_ids || ',' || ? END
WHERE call_id = ? AND settled_admission <> ?`

func settleArgs(st Settlement, finished time.Time) []any {
	// The admission counted the first provider request; the settlement adds
	// the retries beyond it.
	return []any{st.Outcome, st.ErrorKind, st.FinishReason, max(st.Attempts, 1) - 1,
		st.InputTokens, st.OutputTokens, st.CachedInputTokens, st.CacheCreationTokens, st.ReasoningTokens, st.ToolUsePromptTokens,
		st.CostMicros, st.AdmissionID, st.CostMicros, st.AdmissionID, st.AdmissionID, st.AdmissionID, st.AdmissionID, st.AdmissionID,
		finished, finished, st.AdmissionID, st.UsageEstimated,
		st.ResponseModel, st.ResponseModel, st.ProviderRequestID, st.ProviderRequestID,
		st.ProviderRequestID, st.ProviderRequestID, st.ProviderRequestID,
		st.CallID, st.AdmissionID}
}

// settlePostgresSQL is a settlement on PostgreSQL in one statement: complete
// the row (once per admission), release the reservation if still held, and
// record spend and release on the counters (locked in key order). It
// returns whether the row changed, whether and how much was released, and
// the counters after ("key spent reserved,...").
var settlePostgresSQL = `WITH led AS (` + settleLedgerSQL + ` RETURNING replaced_estimate_micros
), rsv AS (
  DELETE FROM cost_reservations WHERE id = ?::text AND EXISTS (SELECT 1 FROM led) RETURNING amount_micros
), lk AS (
  SELECT counter_key FROM cost_budget_counters WHERE counter_key = ANY(?::text[]) AND EXISTS (SELECT 1 FROM led)
    AND (SELECT COUNT(*) FROM rsv) >= 0 -- release the reservation before locking the counters
  ORDER BY counter_key FOR UPDATE
), upd AS (
  UPDATE cost_budget_counters c SET spent_micros = c.spent_micros + ?::bigint - COALESCE((SELECT SUM(replaced_estimate_micros) FROM led), 0),
    reserved_micros = c.reserved_micros - COALESCE((SELECT SUM(amount_micros) FROM rsv), 0), updated_at = ?::timestamptz
  FROM lk WHERE c.counter_key = lk.counter_key
  RETURNING c.counter_key, c.spent_micros, c.reserved_micros
)
SELECT (SELECT COUNT(*) FROM led), (SELECT COUNT(*) FROM rsv), COALESCE((SELECT SUM(amount_micros) FROM rsv), 0),
  COALESCE((SELECT string_agg(counter_key || ' ' || spent_micros || ' ' || reserved_micros, ',' ORDER BY counter_key) FROM upd), '')`

// SettleCall completes a call's row, releases its reservation exactly once
// and records the cost on the budget counters, in one transaction. A second
// settlement of the same admission changes nothing.
func (l *CostLedger) SettleCall(ctx context.Context, st Settlement) (SettleResult, error) {
	var res SettleResult
	ctx = l.writerCtx(ctx)
	release, err := l.acquire(ctx)
	if err != nil {
		return res, err
	}
	defer release()
	keys := slices.Clone(st.Keys)
	slices.Sort(keys)
	finished := st.FinishedAt.UTC()
	if l.Driver == DriverPostgres {
		return l.settlePostgres(ctx, st, keys, finished)
	}
	err = l.inTx(ctx, func(tx *sql.Tx) error {
		res = SettleResult{}
		return l.settleSQLite(ctx, tx, st, keys, finished, &res)
	})
	return res, err
}

// SettleCallLater settles like SettleCall without waiting for the commit,
// for a request marked with CommitLater (its later commit covers this
// one): the settlement is held in ctx and written with the request's next
// write (see CommitLater), and done receives the result once that is
// committed, on the goroutine of that write. It reports false, having done
// nothing, when that does not apply (ctx not marked or its request over,
// SQLite without a group commit, writer stopped): call SettleCall then.
func (l *CostLedger) SettleCallLater(ctx context.Context, st Settlement, done func(SettleResult, error)) bool {
	if !commitsLater(ctx) {
		return false
	}
	keys := slices.Clone(st.Keys)
	slices.Sort(keys)
	finished := st.FinishedAt.UTC()
	if l.Group == nil {
		if l.Driver != DriverPostgres {
			return false
		}
		return laterWritesOf(ctx).add(l.heldSettlement(st, keys, finished, done))
	}
	select {
	case <-l.Group.closed:
		return false
	default:
	}
	var res SettleResult
	return laterWritesOf(ctx).add(laterWrite{
		sqlite: func(ctx context.Context, tx *sql.Tx) error {
			res = SettleResult{}
			return l.settleSQLite(ctx, tx, st, keys, finished, &res)
		},
		then: func(_ context.Context, err error) { done(res, err) },
	})
}

// heldSettlement is a settlement on PostgreSQL as a statement for the
// request's exchange batch: the statement settlePostgres would run, and the
// same follow-up (a reservation the reaper released already gets its spend
// recorded on the counters now). The batch has it last, so a counter row
// it locks stays locked only until the commit right after.
func (l *CostLedger) heldSettlement(st Settlement, keys []string, finished time.Time, done func(SettleResult, error)) laterWrite {
	var res SettleResult
	alone := func(ctx context.Context) { // the batch failed: settle by itself
		done(l.SettleCall(ctx, st))
	}
	if st.ReservationID != "" {
		// Mark the reservation settled and leave the hot counters to
		// ApplySettled, even when alone (unlike settlePostgres): the
		// applier's statement runs after the reply, and measured
		// (BenchmarkChatGovernance on PostgreSQL) the reply came sooner.
		var changed, marked int64
		return laterWrite{
			query: settleMarkPostgresPG,
			args:  append(settleArgs(st, finished), st.CostMicros, st.ReservationID),
			scan:  func(r pgx.Row) error { return r.Scan(&changed, &marked, &res.replaced) },
			then: func(ctx context.Context, err error) {
				if err != nil {
					alone(ctx)
					return
				}
				done(l.markedSettled(ctx, st, keys, finished, res, changed, marked))
			},
		}
	}
	var changed, deleted int64
	var after string
	return laterWrite{
		query: settlePostgresPG,
		args:  append(settleArgs(st, finished), st.ReservationID, keys, st.CostMicros, finished),
		scan:  func(r pgx.Row) error { return r.Scan(&changed, &deleted, &res.ReleasedMicros, &after) },
		then: func(ctx context.Context, err error) {
			if err != nil {
				alone(ctx)
				return
			}
			done(countersSettled(st, keys, res, changed, deleted, after))
		},
	}
}

// The settlement statements with PostgreSQL's placeholders, for batches.
var (
	settleMarkPostgresPG = pgPlaceholders(settleMarkPostgresSQL)
	settlePostgresPG     = pgPlaceholders(settlePostgresSQL)
)

// settleSQLite is a settlement in SQLite's transaction.
func (l *CostLedger) settleSQLite(ctx context.Context, tx *sql.Tx, st Settlement, keys []string, finished time.Time, res *SettleResult) error {
	if l.Group != nil && l.Group.journal != nil {
		if d := l.Group.journal.lookup(st.AdmissionID); d != nil {
			return l.settleJournaled(ctx, tx, d, st, keys, finished, res)
		}
	}
	q, err := l.stmt(ctx, tx, settleReturningSQL)
	if err != nil {
		return err
	}
	// replaced is the estimate of an unsettled admission this
	// settlement replaces: it leaves the counters as the cost enters.
	var replaced int64
	switch err := q.QueryRowContext(ctx, settleArgs(st, finished)...).Scan(&replaced); {
	case errors.Is(err, sql.ErrNoRows):
		return nil // settled before: nothing to do twice
	case err != nil:
		return fmt.Errorf("complete ledger row %s: %w", st.CallID, err)
	}
	res.Applied = true
	if st.ReservationID != "" {
		q, err := l.stmt(ctx, tx, releaseSQL)
		if err != nil {
			return err
		}
		switch err := q.QueryRowContext(ctx, st.ReservationID).Scan(&res.ReleasedMicros); {
		case err == nil:
			res.Released = true
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("release reservation: %w", err)
		}
	}
	if len(keys) == 0 || (st.CostMicros == replaced && res.ReleasedMicros == 0) {
		return nil
	}
	cs, err := l.addToCounters(ctx, tx, keys, -res.ReleasedMicros, st.CostMicros-replaced, finished)
	if err != nil {
		return err
	}
	res.Counters = cs
	return nil
}

// settledRowSQL writes the complete row of a call settled in the batch
// after its journaled admission, unless the call id has a row already (a
// retried call: see settleJournaled).
var settledRowSQL = `INSERT INTO cost_ledger (` + ledgerColumns + `, finished_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)
ON CONFLICT (call_id) DO NOTHING`

// settledRowLiteral is settledRowSQL as a literal statement (see
// literalSQL): what a model's calls of one agent share is written into the
// text, in the order of settledRowArgs.
var settledRowLiteral = newLiteralSQL(settledRowSQL,
	bindValue, inlineValue, inlineValue, inlineValue, bindValue, bindValue, // call_id, subject, workspace, agent_id, session_id, run_id
	inlineValue, inlineValue, inlineValue, inlineValue, inlineValue, // source, trigger, provider, model, response_model
	inlineValue, inlineValue, bindValue, bindValue, // data_classification, interactive, provider_request_id(s)
	inlineValue, inlineValue, inlineValue, // outcome, error_kind, finish_reason
	bindValue, bindValue, inlineIfZero, inlineIfZero, inlineIfZero, inlineIfZero, inlineValue, // tokens, usage_estimated
	bindValue, bindValue, inlineIfZero, inlineValue, // estimated_input_tokens, max_output_tokens, requested_max_output_tokens, clamped
	inlineValue, inlineValue, inlineValue, inlineValue, // pricing_status, price_version, price_source, price_effective_date
	bindValue, bindValue, bindValue, inlineValue, inlineValue, // cost_micros, cost_usd, reserved_micros, mode, attempts
	bindValue, bindValue, bindValue, bindValue, bindValue) // created_at, started_at, updated_at, settled_admission, finished_at

// settledRowArgs are the values the pending row of e followed by the
// settlement st would leave on a call id seen for the first time.
func settledRowArgs(e *LedgerEntry, st Settlement, finished time.Time) []any {
	// requestID and done are boxed once each, though bound twice (each
	// boxing allocates); what comes from configuration or constants is
	// boxed without an allocation (boxStable).
	requestID, done := any(st.ProviderRequestID), any(finished)
	return []any{e.CallID, boxStable(e.Subject), boxStable(e.Workspace), boxStable(e.AgentID), e.SessionID, e.RunID,
		boxStable(e.Source), boxStable(e.Trigger), boxStable(e.Provider), boxStable(e.Model),
		st.ResponseModel, boxStable(e.DataClassification), e.Interactive, requestID, requestID,
		boxStable(st.Outcome), boxStable(st.ErrorKind), st.FinishReason,
		st.InputTokens, st.OutputTokens, st.CachedInputTokens, st.CacheCreationTokens, st.ReasoningTokens, st.ToolUsePromptTokens, st.UsageEstimated,
		e.EstimatedInputTokens, e.MaxOutputTokens, e.RequestedMaxOutputTokens, e.Clamped,
		boxStable(e.PricingStatus), boxStable(e.PriceVersion), boxStable(e.PriceSource), boxStable(e.PriceEffectiveDate),
		st.CostMicros, float64(st.CostMicros) / 1000000.0, e.ReservedMicros, boxStable(e.Mode), max(st.Attempts, 1),
		e.CreatedAt.UTC(), e.StartedAt.UTC(), done, st.AdmissionID, done}
}

// settleJournaled settles a call whose admission is still journaled (see
// admissionJournal): its row is written once, complete, and its
// reservation, never written, is dropped from the journal as the cost
// enters the counters. A call id with a row already (a retried call) gets
// the pending row and the settlement as SQL, as if the admission had been
// committed.
func (l *CostLedger) settleJournaled(ctx context.Context, tx *sql.Tx, d *deferredAdmission, st Settlement, keys []string, finished time.Time, res *SettleResult) error {
	e := &d.entry
	n, err := l.execLiteral(ctx, tx, settledRowLiteral, settledRowArgs(e, st, finished)...)
	if err != nil {
		return fmt.Errorf("write ledger row %s: %w", st.CallID, err)
	}
	var replaced int64
	if n == 0 {
		if _, err := l.exec(ctx, tx, upsertPendingSQL, pendingArgs(e)...); err != nil {
			return fmt.Errorf("write ledger row %s: %w", st.CallID, err)
		}
		q, err := l.stmt(ctx, tx, settleReturningSQL)
		if err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, settleArgs(st, finished)...).Scan(&replaced); err != nil {
			return fmt.Errorf("complete ledger row %s: %w", st.CallID, err)
		}
	}
	l.Group.journal.resolve(d)
	res.Applied = true
	if len(d.keys) > 0 {
		res.Released, res.ReleasedMicros = true, d.amount
	}
	if len(keys) == 0 || st.CostMicros == replaced {
		return nil
	}
	cs, err := l.addToCounters(ctx, tx, keys, 0, st.CostMicros-replaced, finished)
	if err != nil {
		return err
	}
	res.Counters = cs
	return nil
}

// settleReturningSQL completes the row and returns the estimate it replaced.
var settleReturningSQL = settleLedgerSQL + ` RETURNING replaced_estimate_micros`

// settleMarkPostgresSQL completes the row and marks the reservation settled
// with the call's cost, without touching the counters (ApplySettled moves
// both to the counters in batches, off the hot row's critical path).
var settleMarkPostgresSQL = `WITH led AS (` + settleLedgerSQL + ` RETURNING replaced_estimate_micros
), rsv AS (
  UPDATE cost_reservations SET settled = TRUE, settled_cost_micros = ?::bigint
  WHERE id = ?::text AND NOT settled AND EXISTS (SELECT 1 FROM led) RETURNING amount_micros
)
SELECT (SELECT COUNT(*) FROM led), (SELECT COUNT(*) FROM rsv), COALESCE((SELECT SUM(replaced_estimate_micros) FROM led), 0)`

func (l *CostLedger) settlePostgres(ctx context.Context, st Settlement, keys []string, finished time.Time) (SettleResult, error) {
	var res SettleResult
	if st.ReservationID != "" && len(l.writers) > 1 {
		// Other admissions or settlements are in the database right now:
		// mark the reservation settled and leave the counters to
		// ApplySettled, which updates the hot rows once per batch. Alone, a
		// settlement records itself on the counters at once (below).
		args := append(settleArgs(st, finished), st.CostMicros, st.ReservationID)
		var changed, marked int64
		err := l.queryRetry(ctx, settleMarkPostgresSQL, args, &changed, &marked, &res.replaced)
		if err != nil {
			return res, fmt.Errorf("settle call %s: %w", st.CallID, err)
		}
		return l.markedSettled(ctx, st, keys, finished, res, changed, marked)
	}
	return l.settleCounters(ctx, st, keys, finished, res)
}

// markedSettled follows settleMarkPostgresSQL up: a settled reservation is
// left to ApplySettled (Pending); one the reaper released already gets its
// spend recorded on the counters now.
func (l *CostLedger) markedSettled(ctx context.Context, st Settlement, keys []string, finished time.Time, res SettleResult, changed, marked int64) (SettleResult, error) {
	res.Applied = changed > 0
	if !res.Applied || marked > 0 {
		res.Pending = marked > 0
		return res, nil
	}
	st.ReservationID = ""
	return l.settleCounters(ctx, st, keys, finished, res)
}

// settleCounters completes the row and records spend and release on the
// counters in one statement.
func (l *CostLedger) settleCounters(ctx context.Context, st Settlement, keys []string, finished time.Time, res SettleResult) (SettleResult, error) {
	applied := res.Applied
	var changed, deleted int64
	var after string
	var err error
	if applied {
		// The row is complete already (a late settlement after the reaper):
		// only the spend is left to record.
		if len(keys) == 0 || st.CostMicros == res.replaced {
			return res, nil
		}
		var cs []CounterValue
		err = l.inTx(ctx, func(tx *sql.Tx) error {
			var e error
			cs, e = l.addToCounters(ctx, tx, keys, 0, st.CostMicros-res.replaced, finished)
			return e
		})
		if err != nil {
			return res, fmt.Errorf("settle call %s: %w", st.CallID, err)
		}
		res.Counters = cs
		return res, nil
	}
	args := append(settleArgs(st, finished), st.ReservationID, keys, st.CostMicros, finished)
	err = l.queryRetry(ctx, settlePostgresSQL, args, &changed, &deleted, &res.ReleasedMicros, &after)
	if err != nil {
		return SettleResult{}, fmt.Errorf("settle call %s: %w", st.CallID, err)
	}
	return countersSettled(st, keys, res, changed, deleted, after)
}

// countersSettled reads what settlePostgresSQL returned.
func countersSettled(st Settlement, keys []string, res SettleResult, changed, deleted int64, after string) (SettleResult, error) {
	res.Applied, res.Released, res.Counters = changed > 0, deleted > 0, parseCounters(after)
	if res.Applied && len(res.Counters) != len(keys) {
		return res, fmt.Errorf("settle call %s: %d of %d counters exist: %w", st.CallID, len(res.Counters), len(keys), ErrCountersMissing)
	}
	return res, nil
}

// queryRetry runs a prepared single-row query, repeating it on deadlocks
// and serialization failures.
func (l *CostLedger) queryRetry(ctx context.Context, query string, args []any, dest ...any) error {
	l.mu.Lock()
	q := l.stmts[query]
	l.mu.Unlock()
	var err error
	for attempt := 0; ; attempt++ {
		err = q.QueryRowContext(ctx, args...).Scan(dest...)
		if err == nil || !transient(err) || attempt == 4 || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
}

// applySettledPostgresSQL moves settled reservations to the counters: it
// deletes them, sums release and cost per counter, locks the counters in key
// order and updates each once. It returns the counters after
// ("key spent reserved,...").
var applySettledPostgresSQL = `WITH r AS (
  DELETE FROM cost_reservations WHERE id = ANY(?::text[]) AND settled RETURNING counter_keys, amount_micros, settled_cost_micros
), agg AS (
  SELECT k AS counter_key, SUM(amount_micros) AS released, SUM(settled_cost_micros) AS cost
  FROM r, unnest(string_to_array(r.counter_keys, ',')) AS k GROUP BY k
), lk AS (
  SELECT c.counter_key FROM cost_budget_counters c JOIN agg USING (counter_key) ORDER BY c.counter_key FOR UPDATE OF c
), upd AS (
  UPDATE cost_budget_counters c SET spent_micros = c.spent_micros + agg.cost, reserved_micros = c.reserved_micros - agg.released,
    updated_at = ?::timestamptz
  FROM agg, lk WHERE c.counter_key = agg.counter_key AND lk.counter_key = agg.counter_key
  RETURNING c.counter_key, c.spent_micros, c.reserved_micros
)
SELECT COALESCE((SELECT string_agg(counter_key || ' ' || spent_micros || ' ' || reserved_micros, ',' ORDER BY counter_key) FROM upd), '')`

// ApplySettled records settled reservations (SettleResult.Pending) on the
// budget counters and deletes them, in one statement whatever their
// number; ids already applied are skipped. It returns the counters after.
func (l *CostLedger) ApplySettled(ctx context.Context, ids []string, at time.Time) ([]CounterValue, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if l.Driver != DriverPostgres {
		var out []CounterValue
		for _, id := range ids {
			cs, _, _, err := l.applyOne(ctx, id, at)
			if err != nil {
				return out, err
			}
			out = append(out, cs...)
		}
		return out, nil
	}
	release, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var after string
	if err := l.queryRetry(ctx, applySettledPostgresSQL, []any{ids, at.UTC()}, &after); err != nil {
		return nil, fmt.Errorf("record settled calls: %w", err)
	}
	return parseCounters(after), nil
}

// priceUnsettledSQL prices a call whose reservation lapsed unsettled at the
// reserved worst case. The row is marked unsettled/estimated only while it
// is pending; a row a later admission already settled keeps its outcome and
// carries the estimate beside its cost.
const priceUnsettledSQL = `UPDATE cost_ledger SET cost_micros = cost_micros + ?, cost_usd = (cost_micros + ?) / 1000000.0,
estimated_cost_micros = estimated_cost_micros + ?, estimate_admission = ?, usage_estimated = TRUE, updated_at = ?,
outcome = CASE WHEN outcome = 'pending' THEN 'unsettled' ELSE outcome END,
pricing_status = CASE WHEN outcome = 'pending' THEN 'estimated' ELSE pricing_status END
WHERE call_id = ?`

// applyOne records one settled or expired reservation on its counters and
// deletes it: the cost is added when it settled; when it never settled its
// amount is priced on the ledger row (priceUnsettledSQL) and moves from
// reserved to spent. It reports whether it found the reservation and whether it had
// settled.
func (l *CostLedger) applyOne(ctx context.Context, id string, at time.Time) (out []CounterValue, found, settled bool, err error) {
	ctx = l.writerCtx(ctx)
	err = l.inTx(ctx, func(tx *sql.Tx) error {
		out, found, settled = nil, false, false
		q, err := l.stmt(ctx, tx, `DELETE FROM cost_reservations WHERE id = ? RETURNING counter_keys, amount_micros, settled, settled_cost_micros, call_id`)
		if err != nil {
			return err
		}
		var keys, callID string
		var amount, cost int64
		switch err := q.QueryRowContext(ctx, id).Scan(&keys, &amount, &settled, &cost, &callID); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		found = true
		if !settled {
			// Never settled: the call may have reached the provider, so
			// its worst case is recorded as spent rather than released.
			cost = amount
			if _, err := l.exec(ctx, tx, priceUnsettledSQL, amount, amount, amount, id, at, callID); err != nil {
				return fmt.Errorf("price unsettled call %s: %w", callID, err)
			}
		}
		ks := strings.Split(keys, ",")
		slices.Sort(ks)
		out, err = l.addToCounters(ctx, tx, ks, -amount, cost, at)
		return err
	})
	return out, found, settled, err
}

// RecordRejection writes the row of a call refused before any reservation
// (allowlist, data class, rate limit, ...). A call id seen before keeps its
// outcome; only the rejection code is noted.
func (s *Store) RecordRejection(ctx context.Context, e *LedgerEntry) error {
	e.Outcome = OutcomeRejected
	if e.CreatedAt.IsZero() {
		e.CreatedAt = e.StartedAt
	}
	e.UpdatedAt = e.StartedAt
	finished := e.StartedAt
	e.FinishedAt = &finished
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "call_id"}},
		DoUpdates: clause.Assignments(map[string]any{"rejection_code": e.RejectionCode, "updated_at": e.UpdatedAt}),
	}).Create(e).Error
	if err != nil {
		return fmt.Errorf("record rejected call %s: %w", e.CallID, err)
	}
	return nil
}

// ReapExpired handles reservations whose expiry has passed: a call that
// was never settled (a crashed process) is priced at its reserved worst
// case (outcome unsettled, pricing_status estimated) and the amount moves
// from reserved to spent on its counters; one that settled but whose settlement never
// reached the counters (a crash between the two) gets it recorded there.
// A call that settles later still records its spend; nothing is released
// twice. It returns how many reservations it handled.
func (l *CostLedger) ReapExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	// Journaled admissions are written after a second; one already expired
	// by the caller's clock is written now, so it is reaped with the rest.
	if err := l.Group.writeHeldWhere(ctx, func(d *deferredAdmission) bool { return len(d.keys) > 0 && d.expiresAt.Before(now) }); err != nil {
		return 0, fmt.Errorf("write held admissions: %w", err)
	}
	var due []CostReservation
	if err := l.DB.WithContext(ctx).Where("expires_at < ?", now.UTC()).Order("expires_at").Limit(limit).Find(&due).Error; err != nil {
		return 0, fmt.Errorf("find expired reservations: %w", err)
	}
	handled := 0
	for _, r := range due {
		_, found, _, err := l.applyOne(ctx, r.ID, now)
		if err != nil {
			return handled, fmt.Errorf("release expired reservation %s: %w", r.ID, err)
		}
		if !found {
			continue // settled and applied meanwhile
		}
		handled++
	}
	return handled, nil
}

// ExpireStalePending marks pending rows started before cutoff and holding no
// reservation as expired (enforcement off has no reservations to reap).
// Only rows created in the two days before cutoff are looked at (the
// created_at index bounds the scan; older ones were expired by earlier
// passes).
func (s *Store) ExpireStalePending(ctx context.Context, cutoff time.Time) (int64, error) {
	cutoff = cutoff.UTC()
	if err := s.Group.writeHeldWhere(ctx, func(d *deferredAdmission) bool { return d.entry.StartedAt.Before(cutoff) }); err != nil {
		return 0, fmt.Errorf("write held admissions: %w", err)
	}
	r := s.DB.WithContext(ctx).Model(&LedgerEntry{}).
		Where("created_at >= ? AND created_at < ? AND outcome = ? AND started_at < ?", cutoff.Add(-48*time.Hour), cutoff, OutcomePending, cutoff).
		Where("NOT EXISTS (SELECT 1 FROM cost_reservations r WHERE r.call_id = cost_ledger.call_id)").
		Updates(map[string]any{"outcome": OutcomeExpired, "updated_at": time.Now().UTC()})
	if r.Error != nil {
		return 0, fmt.Errorf("expire stale calls: %w", r.Error)
	}
	return r.RowsAffected, nil
}

// PurgeBudgetCounters deletes counters not touched since before: their
// periods (a day, a month, a build) are over.
func (s *Store) PurgeBudgetCounters(ctx context.Context, before time.Time) (int64, error) {
	r := s.DB.WithContext(ctx).Where("updated_at < ?", before.UTC()).Delete(&BudgetCounter{})
	if r.Error != nil {
		return 0, fmt.Errorf("purge budget counters: %w", r.Error)
	}
	return r.RowsAffected, nil
}

func transient(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "40P01") || strings.Contains(msg, "40001") || // deadlock, serialization
		strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

// ---- reading the ledger ----

// LedgerFilter selects ledger rows. Zero fields do not filter.
type LedgerFilter struct {
	From, To                      time.Time // created_at in [From, To)
	CallID, RunID, SessionID      string
	AgentID, Subject, Outcome     string
	ExcludeRejected, OnlyRejected bool
}

func (f LedgerFilter) apply(q *gorm.DB) *gorm.DB {
	if !f.From.IsZero() {
		q = q.Where("created_at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		q = q.Where("created_at < ?", f.To.UTC())
	}
	for col, v := range map[string]string{"call_id": f.CallID, "run_id": f.RunID, "session_id": f.SessionID,
		"agent_id": f.AgentID, "subject": f.Subject, "outcome": f.Outcome} {
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
	if s.Group != nil && s.Group.journal != nil {
		// Admissions not written to the database yet (held at most a
		// second; none expired).
		n, micros := s.Group.journal.heldReservations()
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
	if s.Group != nil && s.Group.journal != nil {
		s.Group.journal.reservedSnapshot(out) // admissions not written yet
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
