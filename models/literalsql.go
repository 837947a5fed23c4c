package models

import (
	"context"
	"database/sql"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// The writer's hot INSERTs spell their low-cardinality values in the SQL
// text (literal statements: sqlitewriter.Literal).

// ExecLiteral is Exec for a literal statement (see sqlitewriter.Literal). It may
// reorder args: pass a slice of the call's own.
func (g *GroupCommit) ExecLiteral(ctx context.Context, tx *sql.Tx, s *sqlitewriter.Literal, args ...any) error {
	query, args := g.literalText(tx, s, args)
	return g.Exec(ctx, tx, query, args...)
}

// literalText is the text of s to run in tx and the args it binds: a
// variant on the writer's own connection (its raw path), the plain
// statement elsewhere, where every new text would be prepared again in
// every transaction. g may be nil (no group commit: the plain statement).
func (g *GroupCommit) literalText(tx *sql.Tx, s *sqlitewriter.Literal, args []any) (string, []any) {
	if g != nil && g.onWriterConn(tx) {
		return s.Specialize(args)
	}
	return s.Query(), args
}
