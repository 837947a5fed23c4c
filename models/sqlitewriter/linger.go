package sqlitewriter

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The group commit's lingering transaction (see redoLog for why): with a
// redo log, a batch is acknowledged once its statements are written to the
// log, and the transaction stays open for the next batches until
//
//   - it has been open for lingerFor (DefaultLinger),
//   - its acknowledged statements pass lingerBytes,
//   - a read on another connection needs its rows (sync),
//   - another connection begins a transaction or writes (outsideBegin):
//     SQLite has one write lock, and that connection should not poll for it
//     while the writer holds it batch after batch;
//   - or the writer stops.
//
// Everything here runs under the writing lock except sync, outsideBegin
// and outsideEnd.

// DefaultLinger is how long the writer's transaction may stay open after
// its first acknowledged batch: a commit per about twenty requests at one
// connection and per many more under load. A reader or another writer
// never waits for it (they make the writer commit at once); it bounds how
// late another process sees the writes. Measured on the chat path
// (docs/benchmarks/2026-11-history.md): 20 ms served 6-9 % more than 5 ms at one, two and
// 64 connections; 50 and 100 ms no more at one or two, and less at 64.
const DefaultLinger = 20 * time.Millisecond

// lingerBytes bounds the statements acknowledged and not yet committed
// (they are kept in memory for running them again after a rollback).
const lingerBytes = 4 << 20

// begin returns the transaction for a batch: the lingering one, or a new
// one that first runs again the batches acknowledged in a transaction that
// was rolled back.
func (g *GroupCommit) begin(ctx context.Context) (*sql.Tx, error) {
	if g.open != nil {
		return g.open, nil
	}
	if g.redo != nil {
		ctx = withRedo(ctx, g.redo)
	}
	var tx *sql.Tx
	var err error
	if g.conn != nil {
		tx, err = g.conn.BeginTx(ctx, nil)
		if err == nil {
			g.connTx = tx
		}
	} else {
		tx, err = g.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	if g.redo != nil {
		if err := g.redo.RunPending(ctx, tx); err != nil {
			_ = tx.Rollback()
			g.endTx(tx)
			return nil, fmt.Errorf("run acknowledged batches again: %w", err)
		}
		if g.unsettled() {
			// They are in tx now: it lingers for them.
			g.open = tx
		}
	}
	return tx, nil
}

// rollback rolls tx back. When it was the lingering transaction, the
// batches it held stay acknowledged (pending): the next begin runs them
// again.
func (g *GroupCommit) rollback(tx *sql.Tx) {
	_ = tx.Rollback()
	g.endTx(tx)
}

// mayLinger reports whether the batch just run may be acknowledged from
// the redo log and its transaction left open.
func (g *GroupCommit) mayLinger() bool {
	if g.redo == nil || g.lingerFor <= 0 || g.closing || g.wantSync.Load() || g.outside.Load() > 0 {
		return false
	}
	if g.redo.Buffered() > lingerBytes {
		return false
	}
	return !g.unsettled() || time.Since(g.openSince) < g.lingerFor
}

// unsettled reports whether batches were acknowledged and not committed.
func (g *GroupCommit) unsettled() bool {
	return g.acked.Load() != nil || (g.redo != nil && g.redo.Recorded())
}

// linger keeps tx open after its batch was written to the redo log.
func (g *GroupCommit) linger(tx *sql.Tx) {
	g.open = tx
	if g.acked.Load() == nil {
		g.openSince = time.Now()
		ch := make(chan struct{})
		g.acked.Store(&ch)
	}
}

// endTx forgets tx, committed or rolled back.
func (g *GroupCommit) endTx(tx *sql.Tx) {
	if tx == g.open {
		g.open = nil
	}
	if tx == g.connTx {
		g.connTx = nil
	}
}

// commitTx commits tx, noting in it the last batch of the redo log it
// holds; whatever the outcome, tx is no longer the lingering one.
func (g *GroupCommit) commitTx(ctx context.Context, tx *sql.Tx) error {
	var seq uint64
	if g.redo != nil && g.redo.Recorded() {
		seq = g.redo.Seq()
		g.redo.SetReplaying(true) // not a batch's statement
		err := g.Exec(ctx, tx, SetRedoSQL, int64(seq))
		g.redo.SetReplaying(false)
		if err != nil {
			g.rollback(tx)
			return err
		}
	}
	err := tx.Commit()
	g.endTx(tx)
	if err != nil {
		return err
	}
	if seq != 0 {
		g.redo.CommittedUpTo(seq)
	}
	if g.onCommit != nil {
		g.onCommit()
	}
	// A reader that asked for this commit (sync) may have asked after
	// the batch decided; the next one may linger again.
	g.wantSync.Store(false)
	g.releaseAcked()
	return nil
}

// releaseAcked answers the readers waiting for the acknowledged batches
// (sync), once they are committed.
func (g *GroupCommit) releaseAcked() {
	if ch := g.acked.Swap(nil); ch != nil {
		close(*ch)
	}
}

// commitAcked commits the batches acknowledged and not yet committed: the
// lingering transaction, or a new one running them again after the last
// one failed. On failure they stay pending for the next try (the writer's
// timer, or the next batch); readers waiting for them are answered anyway
// rather than held indefinitely.
func (g *GroupCommit) commitAcked() {
	g.wantSync.Store(false)
	if !g.unsettled() {
		return
	}
	ctx := context.Background()
	tx, err := g.begin(ctx)
	if err == nil {
		err = g.commitTx(ctx, tx)
	}
	if err != nil {
		if g.redo.Recorded() {
			g.openSince = time.Now() // try again after another lingerFor
		}
		g.releaseAcked()
		if g.onFull != nil && g.isFull(err) {
			g.onFull()
		}
	}
}

// armLingerTimer sets the writer's timer for the end of the lingering and
// returns its channel (nil: nothing lingers).
func (g *GroupCommit) armLingerTimer() <-chan time.Time {
	if !g.unsettled() {
		g.lingerArmed = time.Time{}
		return nil
	}
	g.lingerArmed = g.openSince
	g.lingerTimer.Reset(max(time.Until(g.openSince.Add(g.lingerFor)), 100*time.Microsecond))
	return g.lingerTimer.C
}

// lingerNotArmed reports whether a batch run by a caller began lingering:
// the writer must then be woken to arm its timer.
func (g *GroupCommit) lingerNotArmed() bool {
	return g.acked.Load() != nil && !g.lingerArmed.Equal(g.openSince)
}

// sync returns once what the writer acknowledged is committed, so a read
// on another connection sees it.
func (g *GroupCommit) sync() {
	ch := g.acked.Load()
	if ch == nil {
		return
	}
	g.wantSync.Store(true)
	g.wakeWriter()
	<-*ch
}

// outsideBegin is called before another connection begins a transaction
// or writes: the writer commits what it acknowledged and stops lingering
// until outsideEnd.
func (g *GroupCommit) outsideBegin() {
	g.outside.Add(1)
	g.sync()
}

func (g *GroupCommit) outsideEnd() { g.outside.Add(-1) }

// The lingering as tests (models' included) see and steer it.

// SetLinger changes how long the transaction may linger (DefaultLinger;
// 0 or less: it commits every batch). Only a job (under the writing lock)
// calls it.
func (g *GroupCommit) SetLinger(d time.Duration) { g.lingerFor = d }

// Unsettled reports, under the writing lock, whether acknowledged batches
// wait for their commit.
func (g *GroupCommit) Unsettled() bool {
	g.writing.Lock()
	defer g.writing.Unlock()
	return g.unsettled()
}

// Acknowledged reports whether batches were acknowledged from the redo log
// and not committed yet (without the writing lock: what a reader on
// another connection would wait for).
func (g *GroupCommit) Acknowledged() bool { return g.acked.Load() != nil }

// Sync returns once what the writer acknowledged is committed, as a read
// on another connection does first.
func (g *GroupCommit) Sync() { g.sync() }
