package sqlitewriter

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
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
	// after the last batch (Hook.InFlight): the calls in flight, whose
	// writes are coming (see gather and inlineInFlightLimit). Zero without
	// a hook.
	inFlight atomic.Int32

	closeOnce sync.Once
	closed    chan struct{}
	stopped   chan struct{}

	stmtMu     sync.Mutex
	stmts      map[string]*sql.Stmt
	unprepared map[string]bool // first used in a transaction, prepared after it (prepareNew)

	// hook, when set, is what the domain plugs into every batch (see
	// Hook: the ledger's budget counters and admission journal); job is
	// the index in the batch of the job running (see Job). dueTimer wakes
	// the writer when the hook's oldest held write falls due.
	hook     Hook
	job      int
	dueTimer *time.Timer
	armedAt  time.Time // when dueTimer fires (zero: not armed)

	// onFull, when set, is called when a batch is refused for lack of
	// space (isFull says which errors say so; Store.NoteStorageFull).
	onFull func()
	isFull func(error) bool
	// onCommit, when set, is called after every commit, under the writing
	// lock (historyCache.committed).
	onCommit func()

	// redo, when set, lets batches be acknowledged before SQLite commits
	// them (see RedoLog): open is the lingering transaction, begun at
	// openSince. acked is closed when the batches acknowledged and not yet
	// committed are (nil: none are waiting); sync waits for it.
	redo      *RedoLog
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
	// transaction (nil tx) unless it asks for it with ErrNeedsTx, so a
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

// ErrNeedsTx, returned by a job run without the batch's transaction
// (AdmitJournaled), asks the writer to run it again inside it: a journaled
// admission needs the database when a counter it decides on is not held
// in memory, or to record a rejection.
var ErrNeedsTx = errors.New("the job needs the batch's transaction")

// NewGroupCommit starts the writer over db, without a hook or a redo log.
// queue and maxBatch of 0 take the defaults.
func NewGroupCommit(db *sql.DB, queue, maxBatch int) *GroupCommit {
	g, _ := Start(db, Config{Queue: queue, MaxBatch: maxBatch}) // no redo log: no connection to take
	return g
}

// Config is what the store gives the writer it starts.
type Config struct {
	// Queue and MaxBatch bound the queue and a batch (0: DefaultGroupQueue
	// and DefaultGroupBatch).
	Queue, MaxBatch int
	// Redo, when set, lets batches be acknowledged from the redo log while
	// the writer's transaction lingers (up to Linger, 0: DefaultLinger; a
	// negative value commits every batch); the writer then takes a
	// connection of its own.
	Redo   *RedoLog
	Linger time.Duration
	// Hook is what the domain plugs into every batch (nil: nothing).
	Hook Hook
	// OnFull, when set, is called when a batch is refused for lack of
	// space, as IsFull (required with OnFull) says of its error.
	OnFull func()
	IsFull func(error) bool
	// OnCommit, when set, is called after every commit, under the writing
	// lock.
	OnCommit func()
}

// writerCacheKiB bounds the page cache of the writer's connection (SQLite's
// default is 2 MiB). Every batch descends each B-tree it writes from the
// root: with the default, the interior pages of a large database fell out
// of the cache and were read again from the WAL or the file batch after
// batch, and throughput fell as the database grew. 64 MiB holds the
// interior pages of a database of several GiB; measured on the chat path
// it served about 12 % more at 64 connections (docs/benchmarks/2026-11-history.md). The
// cache fills only as pages are read, and the other connections keep the
// default.
const writerCacheKiB = 64 << 10

// Start starts the writer over db as cfg says.
func Start(db *sql.DB, cfg Config) (*GroupCommit, error) {
	queue, maxBatch, redo, linger := cfg.Queue, cfg.MaxBatch, cfg.Redo, cfg.Linger
	if queue <= 0 {
		queue = DefaultGroupQueue
	}
	if maxBatch <= 0 {
		maxBatch = DefaultGroupBatch
	}
	g := &GroupCommit{db: db, jobs: make(chan *commitJob, queue), maxBatch: maxBatch, stmts: map[string]*sql.Stmt{}, unprepared: map[string]bool{},
		wake: make(chan struct{}, 1), closed: make(chan struct{}), stopped: make(chan struct{}),
		hook: cfg.Hook, onFull: cfg.OnFull, isFull: cfg.IsFull, onCommit: cfg.OnCommit}
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
	if g.hook != nil {
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
// The writes the request holds (later, nil: none; the settlements of its
// LLM calls) go first, as jobs of their own of the same batch or an
// earlier one, so they commit whatever fn does.
func (g *GroupCommit) Do(ctx context.Context, later *Held, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return g.do(ctx, later, fn, false, false)
}

// Admit is Do for new work (a cost admission): when the queue is full it
// fails at once with ErrOverloaded instead of waiting.
func (g *GroupCommit) Admit(ctx context.Context, later *Held, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return g.do(ctx, later, fn, true, false)
}

// AdmitJournaled is Admit for an admission that journals itself (through
// the Hook): fn gets a nil tx, or the batch's transaction after it
// returned ErrNeedsTx. Its caller is answered once the batch's hook
// acknowledged it (End).
func (g *GroupCommit) AdmitJournaled(ctx context.Context, later *Held, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return g.do(ctx, later, fn, true, true)
}

// Job is the index in its batch of the job running (for the hook's End).
// Only a job (under the writing lock) calls it.
func (g *GroupCommit) Job() int { return g.job }

// Stopping reports whether the writer was told to stop (Close).
func (g *GroupCommit) Stopping() bool {
	select {
	case <-g.closed:
		return true
	default:
		return false
	}
}

// do runs the writes later holds, then fn (see submit).
func (g *GroupCommit) do(ctx context.Context, later *Held, fn func(ctx context.Context, tx *sql.Tx) error, shed, noTx bool) error {
	select {
	case <-g.closed:
		return errGroupClosed
	default:
	}
	var held []HeldWrite
	if later != nil {
		held = later.Take(false)
	}
	j := g.newJob(ctx, fn, noTx)
	j.afterHeld = len(held) > 0
	return g.submit(ctx, held, j, shed)
}

// WriteHeld commits writes a request held (models' FlushLater) in one
// batch.
func (g *GroupCommit) WriteHeld(ctx context.Context, held []HeldWrite) {
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
func (g *GroupCommit) submit(ctx context.Context, held []HeldWrite, j *commitJob, shed bool) error {
	jobs := make([]*commitJob, 0, len(held)+1)
	for _, h := range held {
		jobs = append(jobs, g.newJob(ctx, h.Job, false))
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
				held[i].Then(ctx, errs[i])
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
		held[i].Then(ctx, g.wait(job))
	}
	return err
}

// Load is how busy the writer is, as a caller sees it: the calls in
// flight after the last batch (Hook.InFlight) and whether a caller may run
// its writes itself (see submit). For tests and metrics.
func (g *GroupCommit) Load() (inFlight int, callerMayWrite bool) {
	return int(g.inFlight.Load()), g.callerMayWrite()
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

// runBatch commits batch (with the hook's held writes that are due) and
// prepares the statements it used first. The caller holds writing.
func (g *GroupCommit) runBatch(batch []*commitJob, errs []error) {
	if len(batch) > 0 {
		g.lastBatch.Store(int32(len(batch)))
	}
	g.commit(batch, errs, g.hook != nil && g.hook.Due(false))
	if g.hook != nil {
		g.inFlight.Store(int32(g.hook.InFlight()))
	}
	if !g.unsettled() {
		// Not while batches wait for their commit: readers waiting for it
		// (sync) may hold every pooled connection, and preparing needs one.
		g.prepareNew()
	}
}

// transient reports whether err is worth running the batch again for: a
// busy database (another connection or process holding the write lock past
// busy_timeout). The same test as models' for every transaction, so it
// also names PostgreSQL's deadlock and serialization codes.
func transient(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "40P01") || strings.Contains(msg, "40001") || // deadlock, serialization
		strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
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
	if g.OnWriterConn(tx) {
		return g.ExecRaw(ctx, query, args)
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

// WriterConn is the writer's own connection (nil without a redo log), for
// a read right after a commit (the store's onCommit) that must not wait
// for a pooled connection.
func (g *GroupCommit) WriterConn() *sql.Conn { return g.conn }

// Stats returns how many batches committed and how many jobs they held.
func (g *GroupCommit) Stats() (batches, writes int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.batches, g.writes
}
