package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// CallOutcome is the outcome of the ledger row of callID (found false: no
// row). On SQLite with the admission journal it sees an admission
// journaled and not yet written too (pending): it runs as a job of the
// group commit, on the writer that holds the journal, inside the batch's
// transaction. Durable LLM turns use it to give each execution its own row
// (internal/costs ExecutionCallID).
func (l *CostLedger) CallOutcome(ctx context.Context, callID string) (outcome string, found bool, err error) {
	const q = `SELECT outcome FROM cost_ledger WHERE call_id = ?`
	if l.store.Group == nil || l.store.hook.journal == nil {
		err := l.store.DB.WithContext(ctx).Raw(q, callID).Row().Scan(&outcome)
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("read ledger row %s: %w", callID, err)
		}
		return outcome, true, nil
	}
	err = l.store.Group.Do(ctx, nil, func(ctx context.Context, tx *sql.Tx) error {
		outcome, found = "", false
		if l.store.hook.journal.holds(callID) {
			outcome, found = OutcomePending, true
			return nil
		}
		err := tx.QueryRowContext(ctx, q, callID).Scan(&outcome)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return "", false, fmt.Errorf("read ledger row %s: %w", callID, err)
	}
	return outcome, found, nil
}

// holds reports whether an admission of callID is journaled and not yet
// written (by an earlier batch or the current one, resolving or not).
// Only the writer calls it.
func (j *admissionJournal) holds(callID string) bool {
	for _, d := range j.added {
		if d.entry.CallID == callID {
			return true
		}
	}
	return j.byCall[callID] != nil
}
