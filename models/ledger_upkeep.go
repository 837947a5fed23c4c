package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm/clause"
)

// ApplySettled records settled reservations (SettleResult.Pending) on the
// budget counters and deletes them, in one statement whatever their
// number; ids already applied are skipped. It returns the counters after.
func (l *CostLedger) ApplySettled(ctx context.Context, ids []string, at time.Time) ([]CounterValue, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if l.store.Driver != DriverPostgres {
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
	if err := l.store.hook.writeHeldWhere(ctx, func(d *deferredAdmission) bool { return len(d.keys) > 0 && d.expiresAt.Before(now) }); err != nil {
		return 0, fmt.Errorf("write held admissions: %w", err)
	}
	var due []CostReservation
	if err := l.store.DB.WithContext(ctx).Where("expires_at < ?", now.UTC()).Order("expires_at").Limit(limit).Find(&due).Error; err != nil {
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
	if err := s.hook.writeHeldWhere(ctx, func(d *deferredAdmission) bool { return d.entry.StartedAt.Before(cutoff) }); err != nil {
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
