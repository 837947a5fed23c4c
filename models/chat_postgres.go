package models

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The chat exchange on PostgreSQL in one round trip. Through GORM it took
// seven (BEGIN, the session, the action-log row, the last message number,
// the messages, COMMIT) plus one per settlement of its LLM calls; each
// round trip waits for the server, and on a busy machine that wait is
// most of what the chat path adds. Here the statements go in one pgx
// batch: PostgreSQL runs a batch sent before one Sync as one implicit
// transaction, so the exchange and the settlements it carries commit
// together or not at all, as the transaction did.

// exchangeMessagesPostgresSQL numbers the messages after the session's
// last one in the statement itself (no read first), from arrays so that
// one statement serves any number of messages. On PostgreSQL messages are
// found by session id, not by the session's key (see sessionkey.go).
const exchangeMessagesPostgresSQL = `INSERT INTO chat_messages (session_id, seq, run_id, role, content, tool_calls, tool_call_id, name, created_at)
SELECT $1::text, (SELECT COALESCE(MAX(seq), 0) FROM chat_messages WHERE session_id = $1::text) + m.ord, m.run_id, m.role, m.content, m.tool_calls, m.tool_call_id, m.name, $2::timestamptz
FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY AS m(run_id, role, content, tool_calls, tool_call_id, name, ord)
RETURNING seq`

var (
	upsertSessionPostgresSQL = `INSERT INTO chat_sessions (id, agent_id, subject, user_id, username, source, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, username = excluded.username`
	insertRunPostgresSQL = pgPlaceholders(insertRunSQL)
)

// batchItem is one statement of a batch and how its result is read.
type batchItem struct {
	query string
	args  []any
	read  func(pgx.BatchResults) error
}

func execItem(query string, args ...any) batchItem {
	return batchItem{query: query, args: args, read: func(br pgx.BatchResults) error {
		_, err := br.Exec()
		return err
	}}
}

// saveExchangePostgres is SaveExchange on PostgreSQL: the writes ctx holds
// (CommitLater), the session, the action-log row and the messages in one
// batch.
func (s *Store) saveExchangePostgres(ctx context.Context, sess *ChatSession, run *AgentRun, msgs []ChatMessage) error {
	var held []laterWrite
	if w := laterWritesOf(ctx); w != nil {
		held = w.take(false)
	}
	now := time.Now().UTC()
	sess.CreatedAt, sess.UpdatedAt = now, now
	items := []batchItem{execItem(upsertSessionPostgresSQL, sess.ID, sess.AgentID, sess.Subject, sess.UserID, sess.Username, sess.Source, now, now)}
	if run != nil {
		errText := run.Error
		if s.scrub != nil && errText != "" {
			errText = s.scrub(errText) // no GORM hook on this path
		}
		items = append(items, execItem(insertRunPostgresSQL, run.RunID, run.ResponseID, run.AgentID, run.SessionID, run.Subject, run.Source,
			run.Provider, run.Model, run.Status, errText, run.Turns, run.InputTokens, run.OutputTokens, run.Metadata, run.StartedAt, run.FinishedAt))
	}
	var seqs []int64
	if len(msgs) > 0 {
		cols := make([][]string, 6)
		for i := range cols {
			cols[i] = make([]string, len(msgs))
		}
		for i, m := range msgs {
			cols[0][i], cols[1][i], cols[2][i], cols[3][i], cols[4][i], cols[5][i] = m.RunID, m.Role, m.Content, m.ToolCalls, m.ToolCallID, m.Name
		}
		items = append(items, batchItem{
			query: exchangeMessagesPostgresSQL,
			args:  []any{sess.ID, now, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]},
			read: func(br pgx.BatchResults) error {
				rows, err := br.Query()
				if err != nil {
					return err
				}
				seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				return err
			},
		})
	}
	if err := s.writeHeld(ctx, held, items); err != nil {
		return fmt.Errorf("store exchange: %w", err)
	}
	if len(seqs) != len(msgs) {
		return fmt.Errorf("store exchange: %d of %d messages numbered", len(seqs), len(msgs))
	}
	slices.Sort(seqs) // the numbers are last+1 ... last+n, in the messages' order
	for i := range msgs {
		msgs[i].SessionID, msgs[i].Seq, msgs[i].CreatedAt = sess.ID, seqs[i], now
	}
	return nil
}

// writeHeld sends more, then the held writes, in one batch, then tells
// each held write how it went (on an error it writes itself alone; see
// laterWrite). The held writes (settlements) go last: a hot counter row
// they lock is held only until the commit that follows.
func (s *Store) writeHeld(ctx context.Context, held []laterWrite, more []batchItem) error {
	items := slices.Grow(more, len(held))
	for _, h := range held {
		items = append(items, batchItem{query: h.query, args: h.args, read: func(br pgx.BatchResults) error { return h.scan(br.QueryRow()) }})
	}
	err := s.runBatch(ctx, items)
	for _, h := range held {
		h.then(ctx, err)
	}
	return err
}

// runBatch sends items in one batch, in one implicit transaction, again
// when the server reports a deadlock or a serialization failure.
func (s *Store) runBatch(ctx context.Context, items []batchItem) error {
	db, err := s.DB.DB()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err = func() error {
			conn, err := db.Conn(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			return conn.Raw(func(driverConn any) error {
				pc := driverConn.(*stdlib.Conn).Conn()
				b := &pgx.Batch{}
				for _, it := range items {
					b.Queue(it.query, it.args...)
				}
				br := pc.SendBatch(ctx, b)
				for _, it := range items {
					if err := it.read(br); err != nil {
						br.Close()
						return err
					}
				}
				return br.Close() // after the Sync: committed
			})
		}()
		if err == nil || !transient(err) || attempt == 4 || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
}

// pgPlaceholders turns ? placeholders into PostgreSQL's $n.
func pgPlaceholders(q string) string {
	var b []byte
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b = fmt.Appendf(b, "$%d", n)
			continue
		}
		b = append(b, q[i])
	}
	return string(b)
}
