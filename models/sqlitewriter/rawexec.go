package sqlitewriter

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"
)

// The writer's statements skip database/sql (on SQLite with a redo log,
// where the writer has a connection of its own).
//
// Every statement run through a *sql.Tx costs a statement handle bound to
// the transaction (Tx.StmtContext), a fresh slice of driver arguments, the
// conversion of each argument and the pool's locks: allocations and work
// the single writer does serially for every write of every request: about
// a sixth of the bytes the chat path allocated and a tenth of the writer's
// time at 64 connections. The writer's connection is its own (no pool, no
// other user), so its statements are prepared once on the driver's
// connection and run with one reused argument slice, inside the open
// transaction (SQLite's transaction is the connection's). They still go
// through the store's driver wrapper, so the redo log records them as it
// records every other statement of the transaction.

// rawStatements are the writer's statements prepared on its connection.
type rawStatements struct {
	stmts map[string]driver.Stmt
	args  []driver.NamedValue // reused; only the writer runs statements here
}

// OnWriterConn reports whether tx is the writer's transaction on its own
// connection (statements in it may run raw, ExecRaw); connTx is only set
// on one.
func (g *GroupCommit) OnWriterConn(tx *sql.Tx) bool {
	return tx != nil && tx == g.connTx
}

// ExecRaw runs query with args in the writer's transaction on its own
// connection and returns the rows it changed. The caller is a job (it
// holds writing) and checked OnWriterConn.
func (g *GroupCommit) ExecRaw(ctx context.Context, query string, args []any) (int64, error) {
	var changed int64
	err := g.conn.Raw(func(dc any) error {
		st, err := g.raw.prepare(ctx, dc, query)
		if err != nil {
			return err
		}
		nv := g.raw.args[:0]
		defer func() { clear(nv); g.raw.args = nv[:0] }()
		for i, a := range args {
			v, err := driverValue(a)
			if err != nil {
				return fmt.Errorf("argument %d of %q: %w", i+1, firstWords(query), err)
			}
			nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: v})
		}
		res, err := st.(driver.StmtExecContext).ExecContext(ctx, nv)
		if err != nil {
			return err
		}
		changed, err = res.RowsAffected()
		return err
	})
	return changed, err
}

// prepare returns query prepared on the driver connection dc.
func (r *rawStatements) prepare(ctx context.Context, dc any, query string) (driver.Stmt, error) {
	if st, ok := r.stmts[query]; ok {
		return st, nil
	}
	st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", firstWords(query), err)
	}
	if r.stmts == nil {
		r.stmts = map[string]driver.Stmt{}
	}
	r.stmts[query] = st
	return st, nil
}

// closeRaw closes the writer's raw statements (before its connection).
func (g *GroupCommit) closeRaw() {
	if g.conn == nil || len(g.raw.stmts) == 0 {
		return
	}
	_ = g.conn.Raw(func(any) error {
		for _, st := range g.raw.stmts {
			_ = st.Close()
		}
		return nil
	})
	g.raw.stmts = nil
}

// driverValue converts an argument as database/sql does
// (driver.DefaultParameterConverter), without reflection for the types the
// store passes.
func driverValue(a any) (driver.Value, error) {
	switch v := a.(type) {
	case nil, string, int64, float64, bool, []byte, time.Time:
		return v, nil
	case int:
		return int64(v), nil
	case int32:
		return int64(v), nil
	}
	return driver.DefaultParameterConverter.ConvertValue(a)
}
