package sqlitewriter

import (
	"context"
	"database/sql"
)

// The writer's hot INSERTs spell their low-cardinality values in the SQL
// text (literal statements: Literal).

// ExecLiteral is Exec for a literal statement (see Literal). It may
// reorder args: pass a slice of the call's own.
func (g *GroupCommit) ExecLiteral(ctx context.Context, tx *sql.Tx, s *Literal, args ...any) error {
	query, args := g.LiteralText(tx, s, args)
	return g.Exec(ctx, tx, query, args...)
}

// LiteralText is the text of s to run in tx and the args it binds: a
// variant on the writer's own connection (its raw path), the plain
// statement elsewhere, where every new text would be prepared again in
// every transaction. g may be nil (no group commit: the plain statement).
func (g *GroupCommit) LiteralText(tx *sql.Tx, s *Literal, args []any) (string, []any) {
	if g != nil && g.OnWriterConn(tx) {
		return s.Specialize(args)
	}
	return s.Query(), args
}
