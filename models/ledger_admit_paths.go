package models

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

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
	err := l.store.Group.AdmitJournaled(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
		res = AdmitResult{}
		if other := l.store.hook.journal.sameCall(e.CallID); other != nil {
			// Another execution of this call is journaled: its row goes to
			// the database first, so the rows of both are written in the
			// order they were admitted (see settleJournaled).
			if tx == nil {
				return sqlitewriter.ErrNeedsTx
			}
			if err := l.store.hook.writeAdmission(ctx, tx, other); err != nil {
				return err
			}
			l.store.hook.journal.writeNow(other)
		}
		before, err := l.store.hook.decisionValues(ctx, tx, keys)
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
				return sqlitewriter.ErrNeedsTx
			}
			return l.writeRejected(ctx, tx, e, at)
		}
		if len(keys) > 0 {
			e.ReservedMicros = amount
		}
		l.store.hook.journal.admit(&deferredAdmission{id: p.AdmissionID, entry: *e, encoded: encoded, keys: keys, amount: amount, expiresAt: p.ExpiresAt}, l.store.Group.Job())
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
  VALUES (?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, '', ?::text, ?::boolean, '', '', 'pending', '', '', '',
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
		l.store.DB.WithContext(ctx).Exec("UPDATE cost_ledger SET executions = executions - 1, attempts = attempts - 1 WHERE call_id = ?", e.CallID)
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
