package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Messages hang off their session's key, a number given to each session in
// creation order, not off its id.
//
// A session id is random as far as an index is concerned: the server
// issues a hash of the caller, agent and user (chat.SessionIDFor), and
// webhook threads and callers name theirs. An index on (session_id, seq)
// therefore took every new session's first messages into a random leaf
// page, and each such page is one more page a commit writes, the
// checkpoint copies back and the page cache holds. On the chat path, where
// most requests start a session, keying the messages by session_key served
// 3-10 % more requests at 64 connections and cut the disk writes per
// request by a third (docs/benchmarks.md). With (session_key, seq) a new
// session's messages go to the end of the index, as the action log's and
// the ledger's time-ordered ids already do. Only chat_sessions' primary key
// stays random: it is how a stable session id finds its session.
//
// A session gets its key when it is created and keeps it, from a counter
// the store holds (the group commit is the only writer; primeSessions
// starts it). Sessions' keys have no index: nothing looks a session up by
// its key, and the store reads the largest key only when it opens.
//
// SQLite only. On PostgreSQL the same change served about 13 % fewer
// requests at 64 connections (docs/benchmarks.md), so there
// messages stay keyed by session id with the index on (session_id, seq),
// and session_key stays 0. messagesOfSession and SessionMessagesJoin give
// each database its condition.
func init() {
	registerDataMigration(dataMigration{Version: 6, Name: "chat_messages: found by their session's sequential key, not its random id",
		Up: keyMessagesBySession})
}

// keyMessagesBySession gives every session its key and every message its
// session's, then swaps the messages' index. A message whose session has
// no row (none is written that way, but rows may have been deleted by
// hand) gets a session row without agent or subject, so that its history
// stays readable by session id.
func keyMessagesBySession(_ context.Context, tx *gorm.DB, driver string) error {
	if driver == DriverPostgres {
		// The index GORM made from the model's tags before they were
		// removed; a new database gets it here.
		return tx.Exec("CREATE INDEX IF NOT EXISTS idx_chat_messages_session_seq ON chat_messages (session_id, seq)").Error
	}
	steps := []string{
		`INSERT INTO chat_sessions (id, agent_id, subject, user_id, username, source, created_at, updated_at, session_key)
SELECT m.session_id, '', '', '', '', '', MIN(m.created_at), MAX(m.created_at), 0 FROM chat_messages m
WHERE NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE s.id = m.session_id) GROUP BY m.session_id`,
		// Row ids are unique, and in creation order.
		"UPDATE chat_sessions SET session_key = rowid WHERE session_key = 0",
		`UPDATE chat_messages SET session_key = (SELECT s.session_key FROM chat_sessions s WHERE s.id = chat_messages.session_id)
WHERE session_key = 0`,
		"DROP INDEX IF EXISTS idx_chat_messages_session_seq",
		"CREATE INDEX IF NOT EXISTS idx_chat_messages_session_key_seq ON chat_messages (session_key, seq)",
	}
	for i, q := range steps {
		if err := tx.Exec(q).Error; err != nil {
			return fmt.Errorf("key messages by session, step %d of %d: %w", i+1, len(steps), err)
		}
	}
	return nil
}

// The session's upserts, with the key a new session gets as an argument:
// not a subquery or RETURNING, which make SQLite journal every page the
// statement changes (RETURNING runs as a trigger), and the redo log then
// replays the very key the writer gave. upsertSessionSQL keeps the key of
// a session that exists; upsertFreshSessionSQL, for a session known to
// have no messages, gives it the new one (no message has the old one), so
// the writer need not read the key first.
const (
	upsertSessionSQL = `INSERT INTO chat_sessions (id, agent_id, subject, user_id, username, source, created_at, updated_at, session_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at, username = excluded.username`
	upsertFreshSessionSQL = upsertSessionSQL + `, session_key = excluded.session_key`
	// sessionKeyAndLastSeqSQL reads a session's key and the number of its
	// last message.
	sessionKeyAndLastSeqSQL = `SELECT s.session_key, COALESCE((SELECT MAX(m.seq) FROM chat_messages m WHERE m.session_key = s.session_key), 0)
FROM chat_sessions s WHERE s.id = ?`
)

// messagesOfSession is the condition on chat_messages that selects the
// messages of the session whose id is its one argument.
func (s *Store) messagesOfSession() string {
	if s.Driver == DriverPostgres {
		return "session_id = ?"
	}
	return "session_key = (SELECT session_key FROM chat_sessions WHERE id = ?)"
}

// SessionMessagesJoin is the condition joining chat_messages AS m to the
// chat_sessions AS s they belong to.
func (s *Store) SessionMessagesJoin() string {
	if s.Driver == DriverPostgres {
		return "m.session_id = s.id"
	}
	return "m.session_key = s.session_key"
}

// newSessionKey returns a key no session has (SQLite). A key given to a
// session whose batch rolls back is not given again: keys have gaps.
func (s *Store) newSessionKey() int64 { return s.sessionKeys.Add(1) }
