package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
	"github.com/jackc/pgx/v5"
)

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
usage_estimated = CASE WHEN estimate_admission = ? THEN ? ELSE (usage_estimated OR ?) END,
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
		finished, finished, st.AdmissionID, st.AdmissionID, st.UsageEstimated, st.UsageEstimated,
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
	if l.store.Driver == DriverPostgres {
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
	if l.store.Group == nil {
		if l.store.Driver != DriverPostgres {
			return false
		}
		return laterWritesOf(ctx).add(l.heldSettlement(st, keys, finished, done))
	}
	if l.store.Group.Stopping() {
		return false
	}
	var res SettleResult
	return laterWritesOf(ctx).sqlite.Add(sqlitewriter.HeldWrite{
		Job: func(ctx context.Context, tx *sql.Tx) error {
			res = SettleResult{}
			return l.settleSQLite(ctx, tx, st, keys, finished, &res)
		},
		Then: func(_ context.Context, err error) { done(res, err) },
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
	if l.store.Group != nil && l.store.hook.journal != nil {
		if d := l.store.hook.journal.lookup(st.AdmissionID); d != nil {
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
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)
ON CONFLICT (call_id) DO NOTHING`

// settledRowLiteral is settledRowSQL as a literal statement (see
// literalSQL): what a model's calls of one agent share is written into the
// text, in the order of settledRowArgs.
var settledRowLiteral = sqlitewriter.NewLiteral(settledRowSQL,
	sqlitewriter.BindValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.BindValue, // call_id, subject, workspace, agent_id, session_id, run_id, root_run_id
	sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, // source, trigger, provider, model, response_model
	sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.BindValue, sqlitewriter.BindValue, // data_classification, interactive, provider_request_id(s)
	sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, // outcome, error_kind, finish_reason
	sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.InlineIfZero, sqlitewriter.InlineIfZero, sqlitewriter.InlineIfZero, sqlitewriter.InlineIfZero, sqlitewriter.InlineValue, // tokens, usage_estimated
	sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.InlineIfZero, sqlitewriter.InlineValue, // estimated_input_tokens, max_output_tokens, requested_max_output_tokens, clamped
	sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, // pricing_status, price_version, price_source, price_effective_date
	sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, // cost_micros, cost_usd, reserved_micros, mode, attempts
	sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.BindValue) // created_at, started_at, updated_at, settled_admission, finished_at

// settledRowArgs are the values the pending row of e followed by the
// settlement st would leave on a call id seen for the first time.
func settledRowArgs(e *LedgerEntry, st Settlement, finished time.Time) []any {
	// requestID and done are boxed once each, though bound twice (each
	// boxing allocates); what comes from configuration or constants is
	// boxed without an allocation (boxStable).
	requestID, done := any(st.ProviderRequestID), any(finished)
	return []any{e.CallID, sqlitewriter.BoxStable(e.Subject), sqlitewriter.BoxStable(e.Workspace), sqlitewriter.BoxStable(e.AgentID), e.SessionID, e.RunID, e.RootRunID,
		sqlitewriter.BoxStable(e.Source), sqlitewriter.BoxStable(e.Trigger), sqlitewriter.BoxStable(e.Provider), sqlitewriter.BoxStable(e.Model),
		st.ResponseModel, sqlitewriter.BoxStable(e.DataClassification), e.Interactive, requestID, requestID,
		sqlitewriter.BoxStable(st.Outcome), sqlitewriter.BoxStable(st.ErrorKind), st.FinishReason,
		st.InputTokens, st.OutputTokens, st.CachedInputTokens, st.CacheCreationTokens, st.ReasoningTokens, st.ToolUsePromptTokens, st.UsageEstimated,
		e.EstimatedInputTokens, e.MaxOutputTokens, e.RequestedMaxOutputTokens, e.Clamped,
		sqlitewriter.BoxStable(e.PricingStatus), sqlitewriter.BoxStable(e.PriceVersion), sqlitewriter.BoxStable(e.PriceSource), sqlitewriter.BoxStable(e.PriceEffectiveDate),
		st.CostMicros, float64(st.CostMicros) / 1000000.0, e.ReservedMicros, sqlitewriter.BoxStable(e.Mode), max(st.Attempts, 1),
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
	l.store.hook.journal.resolve(d)
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
