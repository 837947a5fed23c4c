package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/agentryhq/agentry/internal/detached"
)

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
const ledgerColumns = `call_id, subject, workspace, agent_id, session_id, run_id, root_run_id, source, "trigger", provider, model, response_model,
data_classification, interactive, provider_request_id, provider_request_ids, outcome, rejection_code, error_kind, finish_reason,
input_tokens, output_tokens, cached_input_tokens, cache_creation_tokens, reasoning_tokens, tool_use_prompt_tokens, usage_estimated,
estimated_input_tokens, max_output_tokens, requested_max_output_tokens, clamped, pricing_status, price_version, price_source,
price_effective_date, cost_micros, cost_usd, reserved_micros, mode, attempts, executions, created_at, started_at, updated_at, settled_admission`

// upsertPendingSQL inserts the pending row of a call or, for a call id seen
// before (a retried activity), marks it pending again and counts the
// execution and its first provider request; usage and cost already
// recorded stay. A rejection takes both counts back.
var upsertPendingSQL = `INSERT INTO cost_ledger (` + ledgerColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, '', '', 'pending', '', '', '', 0, 0, 0, 0, 0, 0, FALSE, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, 1, 1, ?, ?, ?, '')
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
	return []any{e.CallID, e.Subject, e.Workspace, e.AgentID, e.SessionID, e.RunID, e.RootRunID, e.Source, e.Trigger, e.Provider, e.Model,
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
	if l.store.Group != nil {
		return l.store.hook.counters.add(ctx, tx, keys, reserved, spent, at) // held by the writer
	}
	var out []CounterValue
	if l.store.Driver == DriverPostgres {
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
	if w := laterWritesOf(ctx); w != nil && l.store.Group == nil {
		// A later call of a request holding settlements (an agent's next
		// turn): they are written first, so the budget sees what the
		// earlier turns cost instead of their reserved worst case.
		if held := w.take(false); len(held) > 0 {
			// Not cancelled with the caller: a written settlement is owed
			// whatever the request does next. On an error each held one
			// wrote itself alone.
			_ = l.store.writeHeld(detached.Context(ctx), held, nil)
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
	if l.store.Group != nil && l.store.hook.journal != nil {
		return l.admitJournaled(ctx, p, keys)
	}
	if len(keys) == 0 && l.store.Group != nil {
		err := l.store.Group.Admit(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
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
	if l.store.Group != nil {
		return l.admitGrouped(ctx, p, keys)
	}
	rowWritten := false
	if l.store.Driver == DriverPostgres && (p.Fit == nil || p.Limits != nil) {
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
		if l.store.Driver == DriverPostgres {
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
			err := l.store.DB.WithContext(ctx).Model(&LedgerEntry{}).Where("call_id = ?", e.CallID).Updates(map[string]any{
				"outcome": OutcomeRejected, "rejection_code": e.RejectionCode, "reserved_micros": 0, "finished_at": finished,
				"max_output_tokens": e.MaxOutputTokens, "executions": gorm.Expr("executions - 1"), "attempts": gorm.Expr("attempts - 1")}).Error
			if err != nil {
				return res, fmt.Errorf("record rejected call %s: %w", e.CallID, err)
			}
			return res, nil
		}
		return res, l.store.RecordRejection(ctx, e)
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
// savepoints; see sqlitewriter.GroupCommit).
func (l *CostLedger) admitGrouped(ctx context.Context, p AdmitParams, keys []string) (AdmitResult, error) {
	e := p.Entry
	at := e.StartedAt.UTC()
	var res AdmitResult
	err := l.store.Group.Admit(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
		res = AdmitResult{}
		before, err := l.store.hook.decisionValues(ctx, tx, keys)
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
		if _, err := l.store.hook.counters.add(ctx, tx, keys, amount, 0, at); err != nil {
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
