package models

import (
	"context"
	"sync"

	"github.com/agentryhq/agentry/models/sqlitewriter"
	"github.com/jackc/pgx/v5"
)

type commitLaterKey struct{}

// CommitLater marks ctx as a request that stores its exchange
// (Store.SaveExchange, with this ctx) before it answers: writes it makes
// meanwhile that nobody reads back (the settlement of its LLM calls) ride
// on that exchange's commit instead of waiting for a commit of their own.
//
//   - SQLite: they are held in ctx and run by the request's next write
//     through the group commit (its exchange, or its next LLM call's
//     admission), as jobs of their own in front of it (see
//     sqlitewriter.GroupCommit.Do, which takes them from heldFor).
//   - PostgreSQL: they are held in ctx and sent in the exchange's batch
//     (one round trip, one implicit transaction; see saveExchangePostgres).
//
// The chat path saves one commit wait per LLM call this way. A request so
// marked must end with SaveExchange or FlushLater (a deferred FlushLater
// covers the paths that never reach its exchange).
func CommitLater(ctx context.Context) context.Context {
	return context.WithValue(ctx, commitLaterKey{}, &laterWrites{})
}

// commitsLater reports whether ctx was marked by CommitLater.
func commitsLater(ctx context.Context) bool { return laterWritesOf(ctx) != nil }

func laterWritesOf(ctx context.Context) *laterWrites {
	w, _ := ctx.Value(commitLaterKey{}).(*laterWrites)
	return w
}

// heldFor is what ctx holds for SQLite's writer (sqlitewriter.Held; nil
// when ctx was not marked by CommitLater): every write through the group
// commit passes it, so the writer runs the held writes first.
func heldFor(ctx context.Context) *sqlitewriter.Held {
	if w := laterWritesOf(ctx); w != nil {
		return &w.sqlite
	}
	return nil
}

// laterWrite is one write held for a request's exchange on PostgreSQL: a
// statement. (On SQLite it is a sqlitewriter.HeldWrite, a group commit job.)
type laterWrite struct {
	query string // with $n placeholders
	args  []any
	// scan reads the statement's one result row; then runs after the batch
	// with its error (nil: committed). On an error then writes alone what
	// the statement would have written: the exchange failing never loses
	// it.
	scan func(pgx.Row) error
	then func(ctx context.Context, err error)
}

// laterWrites are the writes a CommitLater request holds for its exchange:
// group commit jobs on SQLite (sqlite), statements on PostgreSQL.
type laterWrites struct {
	sqlite sqlitewriter.Held

	mu     sync.Mutex
	writes []laterWrite
	closed bool // FlushLater ran: the request is over
}

// add holds lw; false when the request is over (a settlement arriving
// after it, a stream's cut-off, say, is written by its caller at once).
func (w *laterWrites) add(lw laterWrite) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.writes = append(w.writes, lw)
	return true
}

// take returns the held writes and forgets them; end also ends the
// holding (see add).
func (w *laterWrites) take(end bool) []laterWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	w.closed = w.closed || end
	return out
}

// FlushLater writes what a CommitLater request still holds (nothing once
// its SaveExchange ran) and ends the holding: a write arriving later is
// made at once by its caller. Deferred by the request, it keeps a path
// that never stores its exchange (a panic, an early return) from dropping
// a settlement.
func (s *Store) FlushLater(ctx context.Context) {
	w := laterWritesOf(ctx)
	if w == nil {
		return
	}
	jobs, held := w.sqlite.Take(true), w.take(true)
	switch {
	case len(jobs) > 0:
		s.Group.WriteHeld(ctx, jobs)
	case len(held) > 0:
		_ = s.writeHeld(ctx, held, nil)
	}
}
