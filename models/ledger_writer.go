package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// CostLedger is the hot path of cost accounting: every inference is
// admitted and settled through it, so it speaks SQL directly with prepared
// statements (GORM's per-statement reflection and SQLite's per-statement
// parsing cost more than the statements themselves) and takes each
// transaction with as few statements, and locks held for as short, as
// possible. It holds the Store (store) for everything else, and exposes only
// the ledger: a consumer of the ledger does not reach the rest of the store.
type CostLedger struct {
	store *Store
	db    *sql.DB

	mu    sync.Mutex
	stmts map[string]*sql.Stmt

	// writers bounds this process's admissions and settlements in the
	// database at once. They all update the same day counter row; past a
	// few at a time they only queue on its row lock (or on SQLite's write
	// lock), and a queue in the database costs far more than one here.
	writers chan struct{}
}

// Writers in the database at once per process (see CostLedger.writers):
// measured, more only lengthen the queue on the hot row.
const (
	PostgresLedgerWriters = 4
	SQLiteLedgerWriters   = 2
)

func (l *CostLedger) acquire(ctx context.Context) (func(), error) {
	if l.store.Group != nil {
		return func() {}, nil // the group commit writer is the only writer
	}
	select {
	case l.writers <- struct{}{}:
		return func() { <-l.writers }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// NewCostLedger returns the cost ledger of the store, with its statements
// prepared. Close it to release them.
func NewCostLedger(ctx context.Context, s *Store) (*CostLedger, error) {
	db, err := s.DB.DB()
	if err != nil {
		return nil, fmt.Errorf("cost ledger: %w", err)
	}
	n := SQLiteLedgerWriters
	if s.Driver == DriverPostgres {
		n = PostgresLedgerWriters
	}
	l := &CostLedger{store: s, db: db, stmts: map[string]*sql.Stmt{}, writers: make(chan struct{}, max(n, 1))}
	queries := []string{upsertPendingSQL, insertReservationSQL, reserveSQL, settleOneSQL, settleReturningSQL,
		releaseSQL, clampReservationSQL, clampLedgerSQL}
	if s.Driver == DriverPostgres {
		queries = append(queries, settlePostgresSQL, admitPostgresSQL, settleMarkPostgresSQL, applySettledPostgresSQL)
	}
	for n := 1; n <= 4; n++ {
		queries = append(queries, reserveManySQL(n), settleManySQL(n))
	}
	if s.Group != nil {
		queries = append(queries, rejectPendingSQL, settledRowSQL)
	}
	// Prepared here, outside any transaction: preparing needs a connection
	// of its own, and inside a transaction (holding one) a full pool would
	// wait for itself. Transactions then re-prepare on their connection.
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, l.rebind(q))
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("cost ledger: prepare %q: %w", firstWords(q), err)
		}
		l.stmts[q] = st
	}
	return l, nil
}

// OpenCostLedger returns the store's cost ledger (NewCostLedger): what
// LedgerStore's consumers (internal/costs) admit, settle and report with.
func (s *Store) OpenCostLedger(ctx context.Context) (*CostLedger, error) {
	return NewCostLedger(ctx, s)
}

// Close releases the prepared statements.
func (l *CostLedger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for q, st := range l.stmts {
		st.Close()
		delete(l.stmts, q)
	}
	return nil
}

// stmt returns the prepared form of query (written with ? placeholders)
// bound to tx. A query not prepared by NewCostLedger is prepared on the
// transaction's connection for this transaction only.
func (l *CostLedger) stmt(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	l.mu.Lock()
	st, ok := l.stmts[query]
	l.mu.Unlock()
	if ok {
		return tx.StmtContext(ctx, st), nil
	}
	st, err := tx.PrepareContext(ctx, l.rebind(query))
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", firstWords(query), err)
	}
	return st, nil
}

// execLiteral is exec for a literal statement (see literalSQL); it may
// reorder args.
func (l *CostLedger) execLiteral(ctx context.Context, tx *sql.Tx, s *sqlitewriter.Literal, args ...any) (int64, error) {
	query, args := l.store.Group.LiteralText(tx, s, args)
	return l.exec(ctx, tx, query, args...)
}

func (l *CostLedger) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (int64, error) {
	if l.store.Group != nil && l.store.Group.OnWriterConn(tx) {
		n, err := l.store.Group.ExecRaw(ctx, query, args)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", firstWords(query), err)
		}
		return n, nil
	}
	st, err := l.stmt(ctx, tx, query)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	return res.RowsAffected()
}

// counters runs a counter UPDATE ... RETURNING and collects the rows.
func (l *CostLedger) counters(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]CounterValue, error) {
	st, err := l.stmt(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", firstWords(query), err)
	}
	defer rows.Close()
	var out []CounterValue
	for rows.Next() {
		var v CounterValue
		if err := rows.Scan(&v.Key, &v.SpentMicros, &v.ReservedMicros); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// rebind turns ? placeholders into PostgreSQL's $n.
func (l *CostLedger) rebind(q string) string {
	if l.store.Driver != DriverPostgres {
		return q
	}
	return pgPlaceholders(q)
}

func firstWords(q string) string {
	f := strings.Fields(q)
	return strings.Join(f[:min(len(f), 3)], " ")
}

// inTx runs fn in a transaction, repeating it a few times when the database
// reports a deadlock, a serialization failure or a busy SQLite.
//
// On SQLite the transaction is the group commit's (Store.Group): fn runs in
// the writer's next batch and inTx returns once that batch committed. The
// callers pass a ctx without cancellation there (writerCtx), so a caller
// going away never interrupts a statement of the shared connection.
func (l *CostLedger) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if l.store.Group != nil {
		return l.store.Group.Do(ctx, heldFor(ctx), func(_ context.Context, tx *sql.Tx) error { return fn(tx) })
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = l.tx(ctx, fn)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
	return err
}

func (l *CostLedger) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// writerCtx is the context of statements run by fn of inTx: on SQLite's
// group commit without cancellation (see inTx).
func (l *CostLedger) writerCtx(ctx context.Context) context.Context {
	if l.store.Group != nil {
		return detached.Context(ctx)
	}
	return ctx
}

// errRejected rolls an admission back.
var errRejected = errors.New("rejected")
