// Package sqlitewriter is the SQLite write engine under the store's chat
// path: the parts of it that know nothing of Agentry's tables. The store
// (package models) opens the database, runs its single writer (the group
// commit) and hands the engine's pieces their statements; domain code in
// models asks the writer to write durably and is answered once it is.
//
// # Durability contract
//
// The database runs in WAL mode with synchronous=NORMAL; one writer (the
// group commit) runs every queued write of the chat path in one transaction
// per batch.
//
//   - Acknowledged means durable against the process dying. A write is
//     acknowledged (its caller answered, the HTTP reply sent) only once it
//     is in a file the operating system holds: the batch's COMMIT reached the
//     WAL, or, while the writer keeps its transaction open across batches
//     (storage.commit_linger, 20 ms by default), the batch's statements were
//     appended with one write to the redo log (RedoLog, <db>-redo). A cost
//     admission may instead be acknowledged from the admission journal
//     (<db>-admissions-0/-1, in models), appended the same way.
//   - SIGKILL (or any crash of the process alone) loses nothing acknowledged.
//     The WAL, the redo log and the admission journal are files the kernel
//     keeps. When the store opens again, the redo log's records past
//     redo_applied.seq run again, in order, in one transaction, before
//     migrations (OpenRedoLog); the statements are deterministic given their
//     arguments, so they rebuild exactly the rows the dead process had
//     acknowledged. A record cut short or damaged was never acknowledged and
//     ends the log. The admission journal's unfinished admissions become
//     pending ledger rows holding their reservations.
//   - A power cut or kernel crash may lose what was acknowledged since the
//     last sync to disk: synchronous=NORMAL syncs the WAL only at
//     checkpoints, and the redo log and the journal are not fsynced either.
//     The database file itself stays consistent (SQLite's WAL guarantees
//     it); the most recent writes may be missing. FULL would fsync every
//     batch; process crashes are the failure designed for on one host
//     (docs/decisions.md, "SQLite group commit" and "SQLite: batches
//     acknowledged from a redo log").
//   - Readers never see less than was acknowledged to them: a read outside
//     a transaction first waits for the acknowledged batches to commit.
//   - Only the process holding the admission journal's lock has a redo log
//     and a journal; another process on the same file commits every batch.
//     PostgreSQL does not use this package.
//
// # What is here
//
//   - RedoLog: the batches acknowledged before their commit, and their
//     recovery after a crash.
//   - Checkpointer: copies the WAL into the database file from a connection
//     of its own, so commits rarely do.
//   - Literal: statements that spell their low-cardinality values in the
//     SQL text, prepared once per variant on the writer's connection.
//   - TimeTexts, UTCTimeText: times bound as the driver's text without its
//     layout interpreter.
//   - BoxStable: strings boxed into interface values without an allocation.
//
// The writer itself (GroupCommit with its lingering transaction, raw
// statements and driver wrapper) is still in package models, where it holds
// the cost ledger's admission journal and budget counters.
package sqlitewriter
