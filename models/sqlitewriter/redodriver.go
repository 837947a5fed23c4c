package sqlitewriter

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"modernc.org/sqlite"
)

// The store's SQLite connections go through this thin wrapper of the
// driver's (Connector), for two jobs of the group commit's lingering
// transaction (see RedoLog):
//
//   - on the writer's connection (a transaction begun with withRedo) it
//     records every statement that changed something, with its arguments as
//     the driver received them, into the redo log;
//   - on every other connection it makes what the writer acknowledged
//     visible first: a read outside a transaction waits until the lingering
//     transaction committed (sync), and a transaction or a write outside one
//     also keeps the writer from lingering until it ends (outsideBegin and
//     outsideEnd), so it gets SQLite's write lock as soon as the writer's
//     current batch commits instead of polling for it.
//
// Wrapping the driver, not GORM, catches every path: GORM's statements, the
// ledger's prepared ones, raw database/sql.
type Connector struct {
	dsn   string
	group atomic.Pointer[GroupCommit] // set once the store's writer runs
}

// NewConnector returns the connector of the SQLite database dsn (the
// driver's data source name), for sql.OpenDB.
func NewConnector(dsn string) *Connector { return &Connector{dsn: dsn} }

// SetWriter tells the connections of c the writer whose acknowledged
// batches they wait for (once it runs).
func (c *Connector) SetWriter(g *GroupCommit) { c.group.Store(g) }

func (c *Connector) Connect(context.Context) (driver.Conn, error) {
	conn, err := (&sqlite.Driver{}).Open(c.dsn)
	if err != nil {
		return nil, err
	}
	base, ok := conn.(baseConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("open database: SQLite's driver connection (%T) lacks an interface the store needs", conn)
	}
	return &redoConn{base: base, connector: c}, nil
}

func (c *Connector) Driver() driver.Driver { return &sqlite.Driver{} }

type redoKey struct{}

// settledKey marks a read whose caller knows the writer holds nothing
// uncommitted that it needs (SettledRead).
type settledKey struct{}

// SettledRead marks ctx for reads whose caller knows the writer holds
// nothing uncommitted that they need (models' history cache): they do not
// wait for the writer's commit, which would end the lingering transaction
// for them.
func SettledRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, settledKey{}, true)
}

// withRedo marks ctx for a transaction whose statements go to r.
func withRedo(ctx context.Context, r *RedoLog) context.Context {
	return context.WithValue(ctx, redoKey{}, r)
}

// the interfaces of modernc's conn the wrapper passes on.
type baseConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type redoConn struct {
	base      baseConn
	connector *Connector
	// rec is the redo log while the writer's transaction runs here.
	rec *RedoLog
	// outside is the writer this connection's own transaction holds back
	// from lingering (nil: none).
	outside *GroupCommit
	times   TimeTexts
}

func (c *redoConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *redoConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.base.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &redoStmt{base: st, conn: c, query: query}, nil
}

func (c *redoConn) Close() error { return c.base.Close() }

func (c *redoConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *redoConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if r, ok := ctx.Value(redoKey{}).(*RedoLog); ok && r != nil {
		tx, err := c.base.BeginTx(ctx, opts)
		if err != nil {
			return nil, err
		}
		c.rec = r
		return &redoTx{base: tx, conn: c}, nil
	}
	g := c.connector.group.Load()
	if g != nil {
		g.outsideBegin()
	}
	tx, err := c.base.BeginTx(ctx, opts)
	if err != nil {
		if g != nil {
			g.outsideEnd()
		}
		return nil, err
	}
	c.outside = g
	return &redoTx{base: tx, conn: c}, nil
}

func (c *redoConn) inTx() bool { return c.rec != nil || c.outside != nil }

func (c *redoConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.exec(query, args, func() (driver.Result, error) { return c.base.ExecContext(ctx, query, args) })
}

// exec runs a statement that may write: recorded on the writer's
// transaction (once it succeeded: a failed statement changed nothing),
// made to wait for the writer's commit outside any transaction.
func (c *redoConn) exec(query string, args []driver.NamedValue, run func() (driver.Result, error)) (driver.Result, error) {
	c.times.TimesAsText(args)
	if !c.inTx() {
		if g := c.connector.group.Load(); g != nil {
			g.outsideBegin()
			defer g.outsideEnd()
		}
	}
	res, err := run()
	if err == nil && c.rec != nil {
		if err := c.rec.Add(query, args); err != nil {
			return nil, err
		}
	}
	return res, err
}

func (c *redoConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.query(ctx, query, args, func() (driver.Rows, error) { return c.base.QueryContext(ctx, query, args) })
}

// query runs a statement that returns rows: on the writer's transaction
// one that writes (UPDATE ... RETURNING) is recorded; outside any
// transaction it reads what the writer acknowledged, unless ctx says the
// caller needs none of it (SettledRead).
func (c *redoConn) query(ctx context.Context, query string, args []driver.NamedValue, run func() (driver.Rows, error)) (driver.Rows, error) {
	c.times.TimesAsText(args)
	if !c.inTx() && ctx.Value(settledKey{}) == nil {
		if g := c.connector.group.Load(); g != nil {
			g.sync()
		}
	}
	rows, err := run()
	if err == nil && c.rec != nil && !readOnlyStatement(query) {
		if err := c.rec.Add(query, args); err != nil {
			rows.Close()
			return nil, err
		}
	}
	return rows, err
}

// readOnlyStatement reports whether query only reads (SELECT, or WITH
// ... SELECT without a writing verb).
func readOnlyStatement(query string) bool {
	q := strings.TrimSpace(query)
	if len(q) < 6 {
		return false
	}
	return strings.EqualFold(q[:6], "SELECT") || strings.EqualFold(q[:6], "PRAGMA")
}

func (c *redoConn) Ping(ctx context.Context) error         { return c.base.Ping(ctx) }
func (c *redoConn) ResetSession(ctx context.Context) error { return c.base.ResetSession(ctx) }
func (c *redoConn) IsValid() bool                          { return c.base.IsValid() }

// endTx ends the connection's transaction.
func (c *redoConn) endTx() {
	c.rec = nil
	if c.outside != nil {
		c.outside.outsideEnd()
		c.outside = nil
	}
}

type redoTx struct {
	base driver.Tx
	conn *redoConn
}

func (t *redoTx) Commit() error {
	defer t.conn.endTx()
	return t.base.Commit()
}

func (t *redoTx) Rollback() error {
	defer t.conn.endTx()
	return t.base.Rollback()
}

type redoStmt struct {
	base  driver.Stmt
	conn  *redoConn
	query string
}

func (s *redoStmt) Close() error  { return s.base.Close() }
func (s *redoStmt) NumInput() int { return s.base.NumInput() }

func (s *redoStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("redo: Exec without a context is not used")
}

func (s *redoStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("redo: Query without a context is not used")
}

func (s *redoStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.conn.exec(s.query, args, func() (driver.Result, error) {
		return s.base.(driver.StmtExecContext).ExecContext(ctx, args)
	})
}

func (s *redoStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.conn.query(ctx, s.query, args, func() (driver.Rows, error) {
		return s.base.(driver.StmtQueryContext).QueryContext(ctx, args)
	})
}
