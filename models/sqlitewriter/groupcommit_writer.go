package sqlitewriter

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// run is the writer: it runs the queued jobs in batches whenever woken,
// and the journaled admissions that fall due. It holds writing while it
// runs them, so it and a caller running its own batch (submit) never
// overlap, and only the holder of writing takes jobs from the queue.
func (g *GroupCommit) run() {
	defer close(g.stopped)
	batch := make([]*commitJob, 0, g.maxBatch)
	errs := make([]error, g.maxBatch)
	for {
		g.gather()
		g.writing.Lock()
		g.drain(batch, errs)
		if g.unsettled() && !g.mayLinger() {
			g.commitAcked()
			g.prepareNew()
		}
		due := g.armDueTimer()
		lingered := g.armLingerTimer()
		g.writing.Unlock()
		select {
		case <-g.wake:
		case <-lingered: // committed at the top of the loop
		case <-due:
			// Journaled admissions held too long: a batch of their own.
			g.writing.Lock()
			g.runBatch(nil, nil)
			g.writing.Unlock()
		case <-g.closed:
			// Run what is still queued, then stop. writing stays locked:
			// no caller runs a batch after the writer stopped.
			g.writing.Lock()
			g.closing = true
			g.drain(batch, errs)
			g.closeHook()
			g.commitAcked()
			if g.redo != nil {
				if !g.redo.Recorded() {
					_ = g.redo.Truncate()
				}
				g.redo.Close()
				g.closeRaw()
				_ = g.conn.Close()
			}
			return
		}
	}
}

// gather lets the writes of the calls in flight reach the queue before
// the writer takes a batch, by yielding its processor up to gatherYields
// times while the queue holds fewer jobs than calls are in flight.
//
// Without it the writer, woken by the first job queued, took batches of
// one or two jobs at 64 connections (half of them the callers' own, see
// submit), and each batch paid its commit bookkeeping, its log write and
// two goroutine wake-ups: about as much as the jobs' statements. With it
// batches held about 16 jobs and the gateway served 4-13 % more requests
// at 8 to 64 connections (docs/benchmarks/2026-11-history.md, "Chat path: batches that
// wait for the calls in flight"). Yielding, unlike a timer, never leaves a
// processor idle: with nothing else runnable, Gosched returns at once. At
// one or two connections nothing is gathered (inFlight <= the limit).
func (g *GroupCommit) gather() {
	for i := 0; i < gatherYields; i++ {
		n := g.inFlight.Load()
		if n <= inlineInFlightLimit || len(g.jobs) >= int(n) {
			return
		}
		runtime.Gosched()
	}
}

// gatherYields bounds the writer's wait in gather (8 measured as good as
// 4 and no worse at 8 connections).
const gatherYields = 8

// inlineInFlightLimit: with more calls in flight than this, callers queue
// their writes for the writer (which gathers them) instead of running a
// batch of their own (see submit).
const inlineInFlightLimit = InlineInFlightLimit

// InlineInFlightLimit is inlineInFlightLimit, for tests of the store.
const InlineInFlightLimit = 2

// drain runs the queued jobs in batches of up to maxBatch until the queue
// is empty, answering each job. The caller holds writing.
func (g *GroupCommit) drain(batch []*commitJob, errs []error) {
	for {
		batch = batch[:0]
	fill:
		for len(batch) < g.maxBatch {
			select {
			case j := <-g.jobs:
				batch = append(batch, j)
			default:
				break fill
			}
		}
		if len(batch) == 0 {
			return
		}
		// Journaled admissions go first, in a batch of their own, and are
		// answered before the rest runs: their callers then wait only for
		// the decisions and the journal's write, and call their providers
		// while the writer runs the others' statements, instead of waiting
		// for those statements too. An admission taken ahead of other
		// requests' writes queued before it sees their calls' reservations
		// not yet settled: less room, never more. One queued behind its own
		// request's held settlements keeps its place (afterHeld).
		n := admissionsFirst(batch, &g.scratch)
		for _, part := range [][]*commitJob{batch[:n], batch[n:]} {
			if len(part) == 0 {
				continue
			}
			errs := errs[:len(part)]
			g.runBatch(part, errs)
			for i, j := range part {
				part[i] = nil
				j.done <- errs[i]
			}
		}
	}
}

// admissionsFirst orders batch in place with its journaled admissions
// (noTx jobs, but not those behind their own request's held writes) first,
// each group in its queue order, and returns how many there are. scratch
// is reused between calls.
func admissionsFirst(batch []*commitJob, scratch *[]*commitJob) int {
	others := (*scratch)[:0]
	n := 0
	for _, j := range batch {
		if j.noTx && !j.afterHeld {
			batch[n] = j
			n++
		} else {
			others = append(others, j)
		}
	}
	copy(batch[n:], others)
	clear(others)
	*scratch = others
	return n
}

// armDueTimer sets the timer of the hook's oldest held write (a journaled
// admission) and returns its channel (nil: nothing held, or no hook).
func (g *GroupCommit) armDueTimer() <-chan time.Time {
	if g.hook == nil {
		return nil
	}
	at, ok := g.hook.NextDue()
	if !ok {
		g.armedAt = time.Time{}
		return nil
	}
	g.armedAt = at
	g.dueTimer.Reset(max(time.Until(at), time.Millisecond))
	return g.dueTimer.C
}

// dueBeforeArmed reports whether a journaled admission falls due before
// the writer's timer (a batch run by a caller journaled it): the writer
// must then be woken to arm its timer again. Later admissions need no
// wake-up: when the timer fires, the writer arms it for the next.
func (g *GroupCommit) dueBeforeArmed() bool {
	if g.hook == nil {
		return false
	}
	at, ok := g.hook.NextDue()
	return ok && (g.armedAt.IsZero() || at.Before(g.armedAt))
}

// closeHook writes the hook's held writes (journaled admissions) to the
// database when the writer stops, then closes the hook (what cannot be
// written stays in the journal for the next start's recovery).
func (g *GroupCommit) closeHook() {
	h := g.hook
	if h == nil {
		return
	}
	g.dueTimer.Stop()
	if h.Due(true) {
		g.commit(nil, nil, true)
	}
	h.Close()
}

// heldFailed is tryCommit's failed index when writing the hook's due
// writes failed: they stay held, and the batch runs again without them.
const heldFailed = -2

// commit runs one batch in one transaction. A job that fails is dropped
// with its error and the batch runs again without it (its writes, and the
// others' so far, were rolled back with the transaction). Jobs are written
// to decide before they write, so failures are rare (database errors, not
// rejections) and no savepoint is needed: a SAVEPOINT per job makes SQLite
// copy every page a job touches to a sub-journal, which cost more than
// the jobs themselves. A busy database (another process or connection
// holding the write lock past busy_timeout) repeats the batch a few times.
// held says the hook's due writes (journaled admissions) are written to
// the database in this batch.
func (g *GroupCommit) commit(batch []*commitJob, errs []error, held bool) {
	for i := range errs {
		errs[i] = nil
	}
	live := len(batch)
	busy := 0
	for live > 0 || held {
		failed, err := g.tryCommit(batch, errs, held)
		switch {
		case err == nil && failed == -1:
			live, held = 0, false // committed
		case err == nil && failed == heldFailed:
			held = false // written by a later batch
			g.hook.BackOff()
		case err == nil:
			live-- // drop the failed job, run the others again
		case transient(err) && busy < 4:
			busy++
			time.Sleep(time.Duration(busy) * 5 * time.Millisecond)
		default:
			for i := range errs {
				if errs[i] == nil {
					errs[i] = err
				}
			}
			live, held = 0, false
		}
	}
	if g.onFull != nil {
		// A refusal for lack of space, of one job's statement or of the
		// commit (which every job then carries).
		for _, err := range errs {
			if err != nil && g.isFull(err) {
				g.onFull()
				break
			}
		}
	}
	g.mu.Lock()
	g.batches++
	g.writes += int64(len(batch))
	g.mu.Unlock()
}

// tryCommit runs the jobs without an error yet and commits. failed is the
// index of a job that failed (its error is in errs; the transaction was
// rolled back), heldFailed, or -1; err is a failure of the transaction
// itself. The transaction is begun by the first job that needs it: a batch
// of journaled admissions alone begins none.
func (g *GroupCommit) tryCommit(batch []*commitJob, errs []error, held bool) (failed int, err error) {
	ctx := context.Background()
	var tx *sql.Tx
	begin := func() error {
		if tx != nil {
			return nil
		}
		var err error
		tx, err = g.begin(ctx)
		return err
	}
	rollback := func() {
		if tx != nil {
			g.rollback(tx)
		}
	}
	if g.redo != nil {
		g.redo.StartBatch()
	}
	hook := g.hook
	committed := false
	if hook != nil {
		hook.Begin()
		defer func() {
			if !committed {
				hook.End(false)
			}
		}()
	}
	if held {
		if err := begin(); err != nil {
			return -1, err
		}
		if err := hook.WriteDue(ctx, tx); err != nil {
			rollback()
			if transient(err) {
				return -1, err
			}
			if g.onFull != nil && g.isFull(err) {
				g.onFull()
			}
			return heldFailed, nil
		}
	}
	for i, j := range batch {
		if errs[i] != nil {
			continue // failed in an earlier round
		}
		if !j.noTx {
			if err := begin(); err != nil {
				rollback()
				return -1, err
			}
		}
		g.job = i
		err := j.run(tx)
		if errors.Is(err, ErrNeedsTx) && tx == nil {
			if err = begin(); err != nil {
				return -1, err
			}
			err = j.run(tx)
		}
		if err != nil {
			rollback()
			if transient(err) {
				return -1, err
			}
			errs[i] = err
			return i, nil
		}
	}
	if tx != nil && hook != nil {
		if err := hook.Flush(ctx, tx); err != nil {
			rollback()
			return -1, err
		}
	}
	if tx != nil {
		if g.mayLinger() {
			if err := g.redo.Write(); err != nil {
				rollback()
				return -1, err
			}
			g.linger(tx)
		} else if err := g.commitTx(ctx, tx); err != nil {
			return -1, fmt.Errorf("commit: %w", err)
		}
	}
	committed = true
	if hook != nil {
		// After the commit: an admission decided on this batch's counters
		// is acknowledged only once they are durable, and a journal write
		// that fails only takes admissions back (never budget).
		if failed, err := hook.End(true); err != nil {
			for _, i := range failed {
				errs[i] = err
			}
		}
	}
	return -1, nil
}
