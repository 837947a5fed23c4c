package models

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// ledgerHook is what the cost ledger plugs into the SQLite writer's
// batches (sqlitewriter.Hook), so the writer knows no table:
//
//   - the budget counters, held in memory by the writer (counterBook):
//     jobs read and change them there, and each batch writes what it
//     changed once, before its commit (Flush);
//   - the admission journal, when this process holds it (admissionJournal):
//     admissions journaled by a batch are acknowledged once its lines are
//     written (End), and the ones held longer than journalHold are written
//     to the database by a later batch (Due, WriteDue) or as the writer
//     stops (Close).
//
// The writer calls it under its writing lock only, a fixed number of
// times per batch (never per job).
type ledgerHook struct {
	g        *sqlitewriter.GroupCommit
	counters *counterBook
	journal  *admissionJournal // nil: admissions commit through SQLite
	// due are the journaled admissions the current batch writes to the
	// database (Due, then WriteDue on each attempt).
	due []*deferredAdmission
}

func newLedgerHook(j *admissionJournal) *ledgerHook {
	h := &ledgerHook{journal: j}
	h.counters = newCounterBook(h)
	return h
}

// start ties the hook to the writer it was given to (before any job runs).
func (h *ledgerHook) start(g *sqlitewriter.GroupCommit) { h.g = g }

func (h *ledgerHook) Begin() {
	h.counters.begin()
	if h.journal != nil {
		h.journal.begin()
	}
}

func (h *ledgerHook) Flush(ctx context.Context, tx *sql.Tx) error {
	if err := h.counters.flush(ctx, tx); err != nil {
		return fmt.Errorf("write budget counters: %w", err)
	}
	return nil
}

func (h *ledgerHook) End(committed bool) (failed []int, err error) {
	if committed && h.journal != nil {
		if err = h.journal.committed(); err != nil {
			failed = h.journal.failedJobs()
		}
	}
	h.counters.end(committed)
	return failed, err
}

func (h *ledgerHook) Due(all bool) bool {
	if h.journal == nil {
		return false
	}
	h.due = h.journal.due(all)
	return len(h.due) > 0
}

func (h *ledgerHook) WriteDue(ctx context.Context, tx *sql.Tx) error {
	for _, d := range h.due {
		if err := h.writeAdmission(ctx, tx, d); err != nil {
			return err
		}
		h.journal.resolve(d)
	}
	return nil
}

func (h *ledgerHook) BackOff() {
	if h.journal != nil {
		h.journal.backOff()
	}
}

func (h *ledgerHook) NextDue() (time.Time, bool) {
	if h.journal == nil {
		return time.Time{}, false
	}
	return h.journal.nextDue()
}

func (h *ledgerHook) InFlight() int {
	if h.journal == nil {
		return 0
	}
	return len(h.journal.deferred)
}

// Close empties and closes the journal as the writer stops, once its last
// batch wrote the admissions still held (what could not be written stays
// in it for the next start's recovery).
func (h *ledgerHook) Close() {
	j := h.journal
	if j == nil {
		return
	}
	h.due = nil
	if len(j.deferred) == 0 {
		// Every admission is in the database: done lines still owed are
		// not needed any more.
		j.doneToDo = j.doneToDo[:0]
		_ = j.reset()
	}
	j.close()
}

// writeAdmission writes d as a committed admission would have: the pending
// row, the reservation and the amount reserved on the counters.
func (h *ledgerHook) writeAdmission(ctx context.Context, tx *sql.Tx, d *deferredAdmission) error {
	e := d.entry
	if err := h.g.Exec(ctx, tx, upsertPendingSQL, pendingArgs(&e)...); err != nil {
		return fmt.Errorf("write ledger row %s: %w", e.CallID, err)
	}
	if len(d.keys) == 0 {
		return nil
	}
	if err := h.g.Exec(ctx, tx, insertReservationSQL, d.id, e.CallID, d.amount, strings.Join(d.keys, ","), e.Provider,
		d.expiresAt.UTC(), e.StartedAt.UTC()); err != nil {
		return fmt.Errorf("insert reservation: %w", err)
	}
	_, err := h.counters.add(ctx, tx, d.keys, d.amount, 0, e.StartedAt.UTC())
	return err
}

// writeHeldWhere writes the journaled admissions that match to the
// database now: the reaper's, whose clock may run ahead of the hold's
// (ReapExpired, ExpireStalePending).
func (h *ledgerHook) writeHeldWhere(ctx context.Context, match func(*deferredAdmission) bool) error {
	if h == nil || h.journal == nil {
		return nil
	}
	return h.g.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
		for _, d := range h.journal.due(true) {
			if d.resolving || !match(d) {
				continue
			}
			if err := h.writeAdmission(ctx, tx, d); err != nil {
				return err
			}
			h.journal.resolve(d)
		}
		return nil
	})
}

const seedCounterSQL = `INSERT INTO cost_budget_counters (counter_key, spent_micros, reserved_micros, updated_at) VALUES (?, 0, 0, ?)
ON CONFLICT (counter_key) DO NOTHING`

const journaledInDatabaseSQL = `SELECT EXISTS (SELECT 1 FROM cost_ledger WHERE call_id = ? AND settled_admission = ?)
OR EXISTS (SELECT 1 FROM cost_reservations WHERE id = ?)`

// recoverJournal writes the admissions a crashed process left unfinished
// (see admissionJournal), skipping any its database already has, then
// empties the journal.
func (h *ledgerHook) recoverJournal(ctx context.Context, left []*deferredAdmission) error {
	if len(left) > 0 {
		err := h.g.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error {
			q, err := h.g.Stmt(ctx, tx, journaledInDatabaseSQL)
			if err != nil {
				return err
			}
			for _, d := range left {
				var there bool
				if err := q.QueryRowContext(ctx, d.entry.CallID, d.id, d.id).Scan(&there); err != nil {
					return fmt.Errorf("recover admission %s: %w", d.id, err)
				}
				if there {
					continue
				}
				d.keys = slices.Sorted(slices.Values(d.keys))
				for _, k := range d.keys {
					// A counter purged since (idle for 40 days) starts again.
					if err := h.g.Exec(ctx, tx, seedCounterSQL, k, d.entry.StartedAt.UTC()); err != nil {
						return fmt.Errorf("recover admission %s: %w", d.id, err)
					}
				}
				if err := h.writeAdmission(ctx, tx, d); err != nil {
					return fmt.Errorf("recover admission %s: %w", d.id, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return h.journal.reset()
}
