package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/fault"
)

// GroupCommit is the single writer of the chat path on SQLite (group
// commit). SQLite writes one transaction at a time, and each commit costs a
// WAL append plus, for every other connection, a cold page cache on its next
// read; a transaction per request therefore caps a gateway at a few hundred
// requests per second however many cores it has. Instead, concurrent
// requests hand their writes (ledger admission and settlement, session,
// action-log row and messages) to one goroutine that runs everything queued
// in one transaction per batch. A write arriving when no batch runs and none
// waits is run by its caller instead, as a batch of its own (see submit): at
// low load that saves the hand-off to the writer's goroutine and back, and
// under load the queue is never empty, so the writer batches as before.
// Either way one holder of the writing lock at a time. A job that fails is
// dropped and the batch runs again without it (see commit), so the rest of
// the batch still commits; each caller's Do returns only after its batch
// committed, so a reply is never sent before its rows are durable.
//
// The queue is bounded (DefaultGroupQueue). New work is shed at its door:
// an admission (Admit) finding the queue full fails at once with
// ErrOverloaded, which the API answers with 503 and Retry-After, before any
// provider is called. The writes of work already admitted (settlements,
// exchanges: Do) wait for room instead, so a call the provider served is
// never left unsettled or unrecorded because of load. Their number is bounded
// by the admissions that got in, so neither waiting requests nor memory grow
// without bound.
type GroupCommit struct {
	db       *sql.DB
	jobs     chan *commitJob
	maxBatch int

	// writing is held by whoever runs a batch: the writer's goroutine, or a
	// caller running its own (see submit). Only its holder takes jobs from
	// jobs.
	writing sync.Mutex
	wake    chan struct{} // a job was queued (capacity 1)
	scratch []*commitJob  // the writer's, for admissionsFirst
	// lastBatch is how many jobs the last batch held (see inlineBatchLimit).
	lastBatch atomic.Int32
	// inFlight is how many journaled admissions were not settled yet
	// after the last batch: the calls in flight, whose writes are coming
	// (see gather and inlineInFlightLimit). Zero without a journal.
	inFlight atomic.Int32

	closeOnce sync.Once
	closed    chan struct{}
	stopped   chan struct{}

	stmtMu     sync.Mutex
	stmts      map[string]*sql.Stmt
	unprepared map[string]bool // first used in a transaction, prepared after it (prepareNew)

	// counters are the budget counters held by the writer (counterBook):
	// jobs read and change them in memory, and each batch writes what it
	// changed once, before its commit.
	counters *counterBook

	// journal, when set, holds admissions instead of committing them
	// (admissionJournal); dueTimer wakes the writer when the oldest is to be
	// written to the database.
	journal  *admissionJournal
	dueTimer *time.Timer
	armedAt  time.Time // when dueTimer fires (zero: not armed)

	// onFull, when set, is called when a batch is refused for lack of
	// space (Store.NoteStorageFull).
	onFull func()
	// onCommit, when set, is called after every commit, under the writing
	// lock (historyCache.committed).
	onCommit func()

	// redo, when set, lets batches be acknowledged before SQLite commits
	// them (see redoLog): open is the lingering transaction, begun at
	// openSince. acked is closed when the batches acknowledged and not yet
	// committed are (nil: none are waiting); sync waits for it.
	redo      *redoLog
	conn      *sql.Conn
	lingerFor time.Duration
	open      *sql.Tx
	openSince time.Time
	// connTx is the transaction in progress on conn; raw holds the
	// statements run in it without database/sql (see execRaw).
	connTx      *sql.Tx
	raw         rawStatements
	acked       atomic.Pointer[chan struct{}]
	lingerTimer *time.Timer
	lingerArmed time.Time // openSince of the batches lingerTimer is armed for
	// wantSync asks the writer to commit at once (a reader waits); outside
	// counts transactions and writes of other connections, for which the
	// writer commits every batch instead of lingering; closing stops
	// lingering for good.
	wantSync atomic.Bool
	outside  atomic.Int32
	closing  bool

	// stats (read by benchmarks and tests through Stats).
	mu              sync.Mutex
	batches, writes int64
}

type commitJob struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error
	// noTx marks a journaled admission: it runs without the batch's
	// transaction (nil tx) unless it asks for it with errNeedsTx, so a
	// batch of admissions alone commits nothing to SQLite.
	noTx bool
	// afterHeld marks a job queued right behind writes its request held
	// (CommitLater: the settlements of its earlier LLM calls). Such an
	// admission keeps its place behind them (see admissionsFirst), so a
	// tool-using request's next turn is decided with its last turn
	// settled, not still counted at its worst case.
	afterHeld bool
}

// run runs the job's fn in tx. A panic becomes the job's error: the batch
// is rolled back and runs again without it, as for any failed job. A batch
// may run on a request's goroutine (see submit), whose panic handler would
// otherwise leave the writing lock held and every later write waiting.
func (j *commitJob) run(tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("database write panicked: %v", p)
		}
	}()
	return j.fn(j.ctx, tx)
}

// Group commit limits.
const (
	// DefaultGroupQueue is how many writes may wait for the writer before
	// new ones are refused with ErrOverloaded (a request makes two or three).
	DefaultGroupQueue = 4096
	// DefaultGroupBatch bounds the jobs of one transaction, so one commit
	// never holds SQLite's write lock for long.
	DefaultGroupBatch = 256
)

// ErrOverloaded is returned when the writer's queue is full: the gateway is
// receiving more work than the database can take. The API answers 503
// (overloaded) with Retry-After: shed at once rather than queued without
// bound.
var ErrOverloaded = &fault.Error{Kind: fault.KindUnavailable, Code: "overloaded", Opaque: true, RetryAfter: time.Second,
	Msg: "the gateway is overloaded: too many writes waiting for the database; retry shortly"}

var errGroupClosed = errors.New("database writer stopped")

// NewGroupCommit starts the writer over db. queue and maxBatch of 0 take
// the defaults.
func NewGroupCommit(db *sql.DB, queue, maxBatch int) *GroupCommit {
	g, _ := newGroupCommit(db, queue, maxBatch, nil, nil, 0) // no redo log: no connection to take
	return g
}

// writerCacheKiB bounds the page cache of the writer's connection (SQLite's
// default is 2 MiB). Every batch descends each B-tree it writes from the
// root: with the default, the interior pages of a large database fell out
// of the cache and were read again from the WAL or the file batch after
// batch, and throughput fell as the database grew. 64 MiB holds the
// interior pages of a database of several GiB; measured on the chat path
// it served about 12 % more at 64 connections (docs/benchmarks.md). The
// cache fills only as pages are read, and the other connections keep the
// default.
const writerCacheKiB = 64 << 10

// newGroupCommit starts the writer, with an admission journal when j is
// set and a redo log (and a connection of its own) when redo is.
func newGroupCommit(db *sql.DB, queue, maxBatch int, j *admissionJournal, redo *redoLog, linger time.Duration) (*GroupCommit, error) {
	if queue <= 0 {
		queue = DefaultGroupQueue
	}
	if maxBatch <= 0 {
		maxBatch = DefaultGroupBatch
	}
	g := &GroupCommit{db: db, jobs: make(chan *commitJob, queue), maxBatch: maxBatch, stmts: map[string]*sql.Stmt{}, unprepared: map[string]bool{},
		wake: make(chan struct{}, 1), closed: make(chan struct{}), stopped: make(chan struct{}), journal: j}
	g.counters = newCounterBook(g)
	g.lingerTimer = time.NewTimer(time.Hour)
	g.lingerTimer.Stop()
	if redo != nil {
		// A connection of its own: after a rollback the writer begins
		// again while readers wait for the batches it acknowledged (sync),
		// each holding a pooled connection, so it must not need one.
		conn, err := db.Conn(context.Background())
		if err != nil {
			return nil, fmt.Errorf("open database: the writer's connection: %w", err)
		}
		if _, err := conn.ExecContext(context.Background(), fmt.Sprintf("PRAGMA cache_size = -%d", writerCacheKiB)); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("open database: the writer's page cache: %w", err)
		}
		if linger == 0 {
			linger = DefaultLinger
		}
		g.conn, g.redo, g.lingerFor = conn, redo, linger
	}
	if j != nil {
		g.dueTimer = time.NewTimer(time.Hour)
		g.dueTimer.Stop()
	}
	go g.run()
	return g, nil
}

var jobPool = sync.Pool{New: func() any { return &commitJob{done: make(chan error, 1)} }}

// Do runs fn inside the next batch's transaction and returns once that
// transaction committed (fn's error or the commit's error). When the queue
// is full it waits for room: Do is for the writes of work already admitted
// (see Admit). fn may run again if the batch is retried after a transient
// error or another job's failure, so it must only write through tx and set,
// not add to, its own results. fn gets ctx without its cancellation: a
// caller that gives up does not tear a batch apart; its writes land or fail
// with it.
//
// Writes ctx holds for its request (CommitLater: the settlements of its LLM
// calls) go first, as jobs of their own of the same batch or an earlier
// one, so they commit whatever fn does.
func (g *GroupCommit) Do(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return g.do(ctx, fn, false, false)
}

// Admit is Do for new work (a cost admission): when the queue is full it
// fails at once with ErrOverloaded instead of waiting.
func (g *GroupCommit) Admit(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return g.do(ctx, fn, true, false)
}

// admitJournaled is Admit for an admission that journals itself (see
// admissionJournal): fn gets a nil tx, or the batch's transaction after it
// returned errNeedsTx. Its caller is answered once the batch's journal
// lines are written.
func (g *GroupCommit) admitJournaled(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return g.do(ctx, fn, true, true)
}

// do runs the writes ctx holds, then fn (see submit).
func (g *GroupCommit) do(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error, shed, noTx bool) error {
	select {
	case <-g.closed:
		return errGroupClosed
	default:
	}
	var held []laterWrite
	if w := laterWritesOf(ctx); w != nil {
		held = w.take(false)
	}
	j := g.newJob(ctx, fn, noTx)
	j.afterHeld = len(held) > 0
	return g.submit(ctx, held, j, shed)
}

// writeHeld commits writes a request held (FlushLater) in one batch.
func (g *GroupCommit) writeHeld(ctx context.Context, held []laterWrite) {
	_ = g.submit(ctx, held, nil, false)
}

// submit runs held's jobs, then j (when not nil), answers held's
// follow-ups and returns j's outcome. When no batch is running, none waits,
// the last one was small (inlineBatchLimit) and few calls are in flight
// (inlineInFlightLimit), the caller runs them itself: at low load a write
// then costs no hand-off to the writer's goroutine and back, two goroutine
// wake-ups that cost about as much as the statements on a 2-core machine.
// Otherwise they are queued for the writer, which gathers them and
// batches them with everybody else's.
func (g *GroupCommit) submit(ctx context.Context, held []laterWrite, j *commitJob, shed bool) error {
	jobs := make([]*commitJob, 0, len(held)+1)
	for _, h := range held {
		jobs = append(jobs, g.newJob(ctx, h.sqlite, false))
	}
	if g.callerMayWrite() && g.writing.TryLock() {
		if len(g.jobs) == 0 {
			// Nothing older waits (only the holder of writing takes jobs
			// from the queue), so running ours now keeps the queue's order.
			if j != nil {
				jobs = append(jobs, j)
			}
			errs := make([]error, len(jobs))
			g.runBatch(jobs, errs)
			wake := g.dueBeforeArmed() || g.lingerNotArmed()
			g.writing.Unlock()
			if wake {
				g.wakeWriter()
			}
			for i := range held {
				held[i].then(ctx, errs[i])
			}
			for _, job := range jobs {
				g.putJob(job)
			}
			if j == nil {
				return nil
			}
			return errs[len(errs)-1]
		}
		g.writing.Unlock()
	}
	for _, job := range jobs {
		if err := g.enqueue(job, false); err != nil {
			job.done <- err // read by wait below, like the writer's answer
		}
	}
	var err error
	if j != nil {
		if err = g.enqueue(j, shed); err == nil {
			err = g.wait(j)
		} else {
			g.putJob(j)
		}
	}
	for i, job := range jobs {
		held[i].then(ctx, g.wait(job))
	}
	return err
}

// callerMayWrite reports whether load is low enough for a caller to run
// its writes itself (see submit).
func (g *GroupCommit) callerMayWrite() bool {
	return g.lastBatch.Load() <= inlineBatchLimit && g.inFlight.Load() <= inlineInFlightLimit
}

func (g *GroupCommit) newJob(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error, noTx bool) *commitJob {
	j := jobPool.Get().(*commitJob)
	j.ctx, j.fn, j.noTx, j.afterHeld = detached.Context(ctx), fn, noTx, false
	return j
}

func (g *GroupCommit) putJob(j *commitJob) {
	j.ctx, j.fn = nil, nil
	jobPool.Put(j)
}

// enqueue queues j for the writer and wakes it. shed refuses at once with
// ErrOverloaded when the queue is full; otherwise it waits for room.
func (g *GroupCommit) enqueue(j *commitJob, shed bool) error {
	if shed {
		select {
		case g.jobs <- j:
		default:
			return ErrOverloaded
		}
	} else {
		select {
		case g.jobs <- j:
		case <-g.closed:
			return errGroupClosed
		}
	}
	g.wakeWriter()
	return nil
}

func (g *GroupCommit) wakeWriter() {
	select {
	case g.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// wait returns j's outcome once the writer answered it, and recycles j.
func (g *GroupCommit) wait(j *commitJob) error {
	var err error
	select {
	case err = <-j.done:
	case <-g.stopped:
		// The writer ran every job queued before it stopped, and answered
		// each before stopping; a job not answered was queued too late.
		select {
		case err = <-j.done:
		default:
			return errGroupClosed // j stays in the dead queue, not in the pool
		}
	}
	g.putJob(j)
	return err
}

// inlineBatchLimit: a caller runs its writes itself only while the last
// batch held at most this many jobs (one chat request's settlement and
// exchange). Under concurrent load the writer's batches are larger, and a
// caller committing a batch of its own would only make smaller batches
// (more commits per request: BenchmarkChatRequestWrites/parallel measured
// 12 % more time per request with callers always running their own).
const inlineBatchLimit = 2

// runBatch commits batch (with the journaled admissions that are due) and
// prepares the statements it used first. The caller holds writing.
func (g *GroupCommit) runBatch(batch []*commitJob, errs []error) {
	if len(batch) > 0 {
		g.lastBatch.Store(int32(len(batch)))
	}
	var held []*deferredAdmission
	if g.journal != nil {
		held = g.journal.due(false)
	}
	g.commit(batch, errs, held)
	if g.journal != nil {
		g.inFlight.Store(int32(len(g.journal.deferred)))
	}
	if !g.unsettled() {
		// Not while batches wait for their commit: readers waiting for it
		// (sync) may hold every pooled connection, and preparing needs one.
		g.prepareNew()
	}
}

// Close stops the writer after the queued jobs ran.
func (g *GroupCommit) Close() {
	g.closeOnce.Do(func() { close(g.closed) })
	<-g.stopped
	g.stmtMu.Lock()
	defer g.stmtMu.Unlock()
	for q, st := range g.stmts {
		st.Close()
		delete(g.stmts, q)
	}
}

// Stmt returns query prepared once (SQLite parses a statement at every
// plain Exec) and bound to tx, the writer's transaction.
func (g *GroupCommit) Stmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	g.stmtMu.Lock()
	st, ok := g.stmts[query]
	if !ok {
		g.unprepared[query] = true
	}
	g.stmtMu.Unlock()
	if ok {
		// database/sql keeps the statement prepared on the writer's
		// connection after its first use there.
		return tx.StmtContext(ctx, st), nil
	}
	// First use: prepare it on the transaction's own connection, for this
	// transaction only. Preparing on the pool here would wait for a free
	// connection while this transaction may hold SQLite's write lock, and
	// under load every pooled connection is held by a writer waiting for
	// that very lock: each waits out its busy_timeout ("database is
	// locked"), again and again (seen as task runs failing with 500s). The
	// writer prepares it for good between batches (prepareNew).
	return tx.PrepareContext(ctx, query)
}

// prepareNew prepares, for every later batch, the statements first used by
// the batch just committed. It runs between batches (runBatch), when no
// transaction is held, so waiting for a pooled connection cannot deadlock
// with writers waiting for the write lock.
func (g *GroupCommit) prepareNew() {
	g.stmtMu.Lock()
	defer g.stmtMu.Unlock()
	for query := range g.unprepared { // usually none
		// On the pool, not on the writer's own connection: database/sql
		// binds a statement prepared on a Conn to it and prepares it again
		// for every transaction; one prepared on the pool it prepares once
		// per connection and keeps.
		st, err := g.db.PrepareContext(context.Background(), query)
		if err != nil {
			continue // prepared on its transaction again next time
		}
		g.stmts[query] = st
		delete(g.unprepared, query)
	}
}

// Exec runs a prepared query in tx.
func (g *GroupCommit) Exec(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	_, err := g.ExecCount(ctx, tx, query, args...)
	return err
}

// ExecCount is Exec returning how many rows the statement changed.
func (g *GroupCommit) ExecCount(ctx context.Context, tx *sql.Tx, query string, args ...any) (int64, error) {
	if g.onWriterConn(tx) {
		return g.execRaw(ctx, query, args)
	}
	st, err := g.Stmt(ctx, tx, query)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Stats returns how many batches committed and how many jobs they held.
func (g *GroupCommit) Stats() (batches, writes int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.batches, g.writes
}

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
			g.closeJournal()
			g.commitAcked()
			if g.redo != nil {
				if !g.redo.recorded() {
					_ = g.redo.truncate()
				}
				g.redo.close()
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
// at 8 to 64 connections (docs/benchmarks.md, "Chat path: batches that
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
const inlineInFlightLimit = 2

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

// armDueTimer sets the timer of the oldest journaled admission and returns
// its channel (nil: nothing held, or no journal).
func (g *GroupCommit) armDueTimer() <-chan time.Time {
	if g.journal == nil {
		return nil
	}
	at, ok := g.journal.nextDue()
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
	if g.journal == nil {
		return false
	}
	at, ok := g.journal.nextDue()
	return ok && (g.armedAt.IsZero() || at.Before(g.armedAt))
}

// closeJournal writes the admissions still held to the database when the
// writer stops, then empties and closes the journal (what cannot be
// written stays in it for the next start's recovery).
func (g *GroupCommit) closeJournal() {
	j := g.journal
	if j == nil {
		return
	}
	g.dueTimer.Stop()
	if held := j.due(true); len(held) > 0 {
		g.commit(nil, nil, held)
	}
	if len(j.deferred) == 0 {
		// Every admission is in the database: done lines still owed are
		// not needed any more.
		j.doneToDo = j.doneToDo[:0]
		_ = j.reset()
	}
	j.close()
}

// heldFailed is tryCommit's failed index when writing the held admissions
// failed: they stay held, and the batch runs again without them.
const heldFailed = -2

// commit runs one batch in one transaction. A job that fails is dropped
// with its error and the batch runs again without it (its writes, and the
// others' so far, were rolled back with the transaction). Jobs are written
// to decide before they write, so failures are rare (database errors, not
// rejections) and no savepoint is needed: a SAVEPOINT per job makes SQLite
// copy every page a job touches to a sub-journal, which cost more than
// the jobs themselves. A busy database (another process or connection
// holding the write lock past busy_timeout) repeats the batch a few times.
// held are journaled admissions to write to the database in this batch.
func (g *GroupCommit) commit(batch []*commitJob, errs []error, held []*deferredAdmission) {
	for i := range errs {
		errs[i] = nil
	}
	live := len(batch)
	busy := 0
	for live > 0 || len(held) > 0 {
		failed, err := g.tryCommit(batch, errs, held)
		switch {
		case err == nil && failed == -1:
			live, held = 0, nil // committed
		case err == nil && failed == heldFailed:
			held = nil // written by a later batch
			g.journal.backOff()
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
			live, held = 0, nil
		}
	}
	if g.onFull != nil {
		// A refusal for lack of space, of one job's statement or of the
		// commit (which every job then carries).
		for _, err := range errs {
			if IsStorageFull(err) {
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
func (g *GroupCommit) tryCommit(batch []*commitJob, errs []error, held []*deferredAdmission) (failed int, err error) {
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
		g.redo.startBatch()
	}
	g.counters.begin()
	committed := false
	defer func() { g.counters.end(committed) }()
	jr := g.journal
	if jr != nil {
		jr.begin()
	}
	if len(held) > 0 {
		if err := begin(); err != nil {
			return -1, err
		}
		for _, d := range held {
			if err := g.writeAdmission(ctx, tx, d); err != nil {
				rollback()
				if transient(err) {
					return -1, err
				}
				if IsStorageFull(err) && g.onFull != nil {
					g.onFull()
				}
				return heldFailed, nil
			}
			jr.resolve(d)
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
		if jr != nil {
			jr.job = i
		}
		err := j.run(tx)
		if errors.Is(err, errNeedsTx) && tx == nil {
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
	if tx != nil {
		if err := g.counters.flush(ctx, tx); err != nil {
			rollback()
			return -1, fmt.Errorf("write budget counters: %w", err)
		}
		if g.mayLinger() {
			if err := g.redo.write(); err != nil {
				rollback()
				return -1, err
			}
			g.linger(tx)
		} else if err := g.commitTx(ctx, tx); err != nil {
			return -1, fmt.Errorf("commit: %w", err)
		}
	}
	committed = true
	if jr != nil {
		// After the commit: an admission decided on this batch's counters
		// is acknowledged only once they are durable, and a journal write
		// that fails only takes admissions back (never budget).
		if err := jr.committed(); err != nil {
			for _, i := range jr.failedJobs() {
				errs[i] = err
			}
		}
	}
	return -1, nil
}
