// Package sqlitewriter is the SQLite write engine under the store's chat
// path: the single writer (GroupCommit) with its lingering transaction,
// redo log and driver wrapper. It knows no table: the store (package
// models) opens the database, starts the writer (Start) and hands it jobs
// (Do, Admit, AdmitJournaled) that are "write this durably": each call
// returns once its job is acknowledged as the contract below says, or
// failed. What the cost ledger keeps beside the batches (its budget
// counters, its admission journal) it plugs in through a Hook.
//
// # Durability contract
//
// The database runs in WAL mode with synchronous=NORMAL (FULL under
// durability power, below); one writer (the
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
//     (<db>-admissions-0/-1, in models), appended the same way once the
//     batch that decided it committed (Hook.End).
//   - A job that fails is answered with its error and its writes are rolled
//     back; the batch runs again without it, so the others' writes still
//     commit. A write a request holds back (HeldWrite: the settlement of an
//     LLM call) is acknowledged with the batch of the request's next write
//     and hears its outcome then (Then); until then it is in memory only
//     and is lost with the process, like a reply not yet sent.
//   - SIGKILL (or any crash of the process alone) loses nothing acknowledged.
//     The WAL, the redo log and the admission journal are files the kernel
//     keeps. When the store opens again, the redo log's records past
//     redo_applied.seq run again, in order, in one transaction, before
//     migrations (OpenRedoLog); the statements are deterministic given their
//     arguments, so they rebuild exactly the rows the dead process had
//     acknowledged. A record cut short or damaged was never acknowledged and
//     ends the log. The admission journal's unfinished admissions become
//     pending ledger rows holding their reservations.
//   - Durability process (storage.sqlite.durability, the default unless
//     costs.enforcement_mode is hard): a power cut or kernel crash may lose
//     what was acknowledged since the last sync to disk: synchronous=NORMAL
//     syncs the WAL only at checkpoints, and the redo log and the journal
//     are not fsynced either. The database file itself stays consistent
//     (SQLite's WAL guarantees it); the most recent writes may be missing
//     (docs/decisions.md, "SQLite group commit" and "SQLite: batches
//     acknowledged from a redo log").
//   - Durability power (the default under hard enforcement, where a lost
//     ledger row could let a hard budget overshoot): the database runs
//     synchronous=FULL and the redo log record or journal lines a batch is
//     acknowledged from are fsynced first (SyncForAck), one fsync per batch,
//     so a power cut loses nothing acknowledged.
//   - Readers never see less than was acknowledged to them: a read outside
//     a transaction first waits for the acknowledged batches to commit
//     (Connector), unless it says it needs none of them (SettledRead).
//   - When the queue is full (DefaultGroupQueue) new work (Admit) is refused
//     at once with ErrOverloaded; writes of work already admitted (Do) wait
//     for room. Close runs every queued job before the writer stops.
//   - Only the process holding the admission journal's lock has a redo log
//     and a journal; another process on the same file commits every batch.
//     PostgreSQL does not use this package.
//
// # What is here
//
//   - GroupCommit (groupcommit*.go): the queue, batches and their commit;
//     a caller runs its own batch when the writer is idle. Hook: what the
//     domain plugs into every batch. Held, HeldWrite: writes a request
//     holds for its next batch.
//   - The lingering transaction (linger.go) and RedoLog: the batches
//     acknowledged before their commit, and their recovery after a crash.
//   - Connector (redodriver.go): the driver wrapper that records the
//     writer's statements into the redo log and makes other connections
//     wait for (or stop) the lingering.
//   - Raw statements (rawexec.go): the writer's statements prepared on its
//     own connection, run without database/sql's per-statement cost.
//   - Literal: statements that spell their low-cardinality values in the
//     SQL text, prepared once per variant on the writer's connection
//     (ExecLiteral).
//   - PreparedStmt: a statement prepared on the pool once, when first used.
//   - Checkpointer: copies the WAL into the database file from a connection
//     of its own, so commits rarely do.
//   - TimeTexts, UTCTimeText: times bound as the driver's text without its
//     layout interpreter.
//   - BoxStable: strings boxed into interface values without an allocation.
package sqlitewriter
