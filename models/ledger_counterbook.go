package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// counterBook holds SQLite's budget counters in the group-commit writer.
//
// On SQLite the writer is the only writer of the counters (one gateway
// process owns the file; see docs/decisions.md), so it can keep their
// values in memory instead of reading them for every admission and
// updating them once per admission and once per settlement: a job reads
// and changes the counters here, and the batch writes each counter it
// changed once, with its absolute value, just before it commits (flush).
// Decisions are made inside the serial writer exactly as before (read,
// decide, write as one step of one transaction), only from memory, so hard
// budgets stay exact.
//
// held is the committed value of every counter known; changes of the batch
// being run stay apart (changed) until its commit succeeds, and are dropped
// when it rolls back. After every commit the database holds exactly what
// held says, so held may be forgotten between batches (to bound it) and a
// counter is read from the database the first time a batch needs it.
//
// Only the holder of the group commit's writing lock uses a counterBook
// (jobs, and the writer through ledgerHook: begin, flush, end).
type counterBook struct {
	h       *ledgerHook // its writer, h.g
	held    map[string]CounterValue
	changed map[string]CounterValue // this attempt's values, after its changes
	order   []string                // keys in changed, in first-change order
	at      time.Time               // updated_at of this attempt's changes
}

// maxHeldCounters bounds the counters kept between batches (one per day,
// plus one per user, agent and build with such budgets); past it the book
// starts again from the database.
const maxHeldCounters = 10_000

func newCounterBook(h *ledgerHook) *counterBook {
	return &counterBook{h: h, held: map[string]CounterValue{}, changed: map[string]CounterValue{}}
}

// begin starts an attempt at a batch.
func (b *counterBook) begin() {
	clear(b.changed)
	b.order, b.at = b.order[:0], time.Time{}
}

// end keeps the attempt's changes when its transaction committed.
func (b *counterBook) end(committed bool) {
	if committed {
		if len(b.held)+len(b.changed) > maxHeldCounters {
			clear(b.held) // the database has them all
		}
		for k, v := range b.changed {
			b.held[k] = v
		}
	}
	clear(b.changed)
	b.order = b.order[:0]
}

const (
	readCounterSQL = `SELECT spent_micros, reserved_micros FROM cost_budget_counters WHERE counter_key = ?`
	// writeCounterSQL writes a counter's value; a counter deleted behind the
	// writer's back (the purge of counters idle for 40 days) is written again.
	writeCounterSQL = `INSERT INTO cost_budget_counters (counter_key, spent_micros, reserved_micros, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (counter_key) DO UPDATE SET spent_micros = excluded.spent_micros, reserved_micros = excluded.reserved_micros, updated_at = excluded.updated_at`
)

// value is a counter as this attempt sees it; ok is false when the counter
// does not exist.
func (b *counterBook) value(ctx context.Context, tx *sql.Tx, key string) (CounterValue, bool, error) {
	if v, ok := b.changed[key]; ok {
		return v, true, nil
	}
	if v, ok := b.held[key]; ok {
		return v, true, nil
	}
	q, err := b.h.g.Stmt(ctx, tx, readCounterSQL)
	if err != nil {
		return CounterValue{}, false, err
	}
	v := CounterValue{Key: key}
	switch err := q.QueryRowContext(ctx, key).Scan(&v.SpentMicros, &v.ReservedMicros); {
	case errors.Is(err, sql.ErrNoRows):
		return CounterValue{}, false, nil
	case err != nil:
		return CounterValue{}, false, fmt.Errorf("read budget counter %s: %w", key, err)
	}
	b.held[key] = v // committed: the writer has not changed it since
	return v, true, nil
}

// values returns the counters of keys (sorted) in key order, or
// ErrCountersMissing when one does not exist.
func (b *counterBook) values(ctx context.Context, tx *sql.Tx, keys []string) ([]CounterValue, error) {
	out := make([]CounterValue, 0, len(keys))
	for _, k := range keys {
		v, ok, err := b.value(ctx, tx, k)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("budget counter %s: %w", k, ErrCountersMissing)
		}
		out = append(out, v)
	}
	return out, nil
}

// add changes the counters of keys by reserved and spent and returns them
// after the change, in key order (ErrCountersMissing when one does not
// exist; nothing is changed then).
func (b *counterBook) add(ctx context.Context, tx *sql.Tx, keys []string, reserved, spent int64, at time.Time) ([]CounterValue, error) {
	vs, err := b.values(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	for i := range vs {
		vs[i].ReservedMicros += reserved
		vs[i].SpentMicros += spent
		if _, seen := b.changed[vs[i].Key]; !seen {
			b.order = append(b.order, vs[i].Key)
		}
		b.changed[vs[i].Key] = vs[i]
	}
	if at.After(b.at) {
		b.at = at
	}
	slices.SortFunc(vs, func(a, b CounterValue) int { return strings.Compare(a.Key, b.Key) })
	return vs, nil
}

// flush writes the counters this attempt changed, once each.
func (b *counterBook) flush(ctx context.Context, tx *sql.Tx) error {
	if len(b.order) == 0 {
		return nil
	}
	q, err := b.h.g.Stmt(ctx, tx, writeCounterSQL)
	if err != nil {
		return err
	}
	at := b.at.UTC()
	for _, k := range b.order {
		v := b.changed[k]
		if _, err := q.ExecContext(ctx, k, v.SpentMicros, v.ReservedMicros, at); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// has reports whether key's value is in memory (no read needed).
func (b *counterBook) has(key string) bool {
	if _, ok := b.changed[key]; ok {
		return true
	}
	_, ok := b.held[key]
	return ok
}

// decisionValues are the counters of keys (sorted) as an admission decides
// on them: what the database holds plus what journaled admissions reserve
// (admissionJournal). With a nil tx (a journaled admission outside the
// batch's transaction) a counter not in memory asks for the transaction
// (sqlitewriter.ErrNeedsTx).
func (h *ledgerHook) decisionValues(ctx context.Context, tx *sql.Tx, keys []string) ([]CounterValue, error) {
	if tx == nil {
		for _, k := range keys {
			if !h.counters.has(k) {
				return nil, sqlitewriter.ErrNeedsTx
			}
		}
	}
	vs, err := h.counters.values(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	if h.journal != nil {
		for i := range vs {
			vs[i].ReservedMicros += h.journal.reservedFor(vs[i].Key)
		}
	}
	return vs, nil
}
