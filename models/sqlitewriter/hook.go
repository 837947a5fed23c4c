package sqlitewriter

import (
	"context"
	"database/sql"
	"time"
)

// Hook is what the domain plugs into the writer's batches, so the writer
// knows no table. Two things of the cost ledger live there:
//
//   - state the jobs keep in memory and write once per batch, just before
//     its commit (the budget counters: read and changed by the jobs,
//     written with their final values by Flush);
//   - writes acknowledged from a file of their own and written to the
//     database later (the admission journal: admissions a job journaled
//     are written to the file once the batch committed, by End; the ones
//     held too long are written to the database by a later batch,
//     WriteDue).
//
// The writer calls the hook under its writing lock only (never two calls
// at once), a fixed number of times per batch and never per job: Due once
// per batch; Begin, Flush and End once per attempt at it (a batch is
// attempted again without a job that failed); NextDue and InFlight once
// per round of the writer. A job learns its index in the batch (for
// End's failed) from GroupCommit.Job.
type Hook interface {
	// Begin starts an attempt at a batch: what the last attempt changed
	// in memory and did not commit is forgotten.
	Begin()
	// Flush writes, in tx just before it commits, what the attempt's
	// jobs changed in memory. An error rolls the attempt back and fails
	// the batch.
	Flush(ctx context.Context, tx *sql.Tx) error
	// End ends the attempt: committed says its transaction committed (or
	// it had none and every job succeeded). After a commit the hook
	// acknowledges what it holds outside the database (the journal's
	// write); when that fails it returns the indexes of the jobs whose
	// writes were not acknowledged and the error they get.
	End(committed bool) (failed []int, err error)
	// Due reports whether writes the hook holds outside the database are
	// due for this batch (all of them when all is set, as the writer
	// stops); WriteDue then writes them in the batch's transaction.
	Due(all bool) bool
	// WriteDue writes the due writes in tx. On an error the writer rolls
	// back and runs the batch again without them (BackOff), unless the
	// error is transient (SQLITE_BUSY), which fails the batch.
	WriteDue(ctx context.Context, tx *sql.Tx) error
	// BackOff notes that writing the due writes failed: they are tried
	// again later, not at every batch.
	BackOff()
	// NextDue is when the oldest write held outside the database falls
	// due (false: none). The writer runs a batch for it then.
	NextDue() (time.Time, bool)
	// InFlight is how many acknowledged writes wait for a follow-up write
	// of their request (the journaled admissions not settled yet): calls
	// in flight, whose writes are coming (see GroupCommit.gather).
	InFlight() int
	// Close is called once as the writer stops, after its last batch.
	Close()
}
