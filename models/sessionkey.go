package models

import (
	"context"
	"fmt"
	"regexp"

	"gorm.io/gorm"
)

// Messages hang off their session's key, a number given to each session in
// creation order, not off its id; on SQLite sessions do too.
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
// the ledger's time-ordered ids already do.
//
// On SQLite, data migration 7 makes session_key chat_sessions' key (its
// rows in creation order) and migration 8 gives the id an index of its
// own, by which a session's key is found. For a while the gateway had
// no index on the id and found keys in memory instead, which saved a
// random leaf page per new session (2-3 % of the chat path's throughput)
// but held every session in memory: memory grew with the number of
// sessions, without bound (docs/decisions.md).
//
// A session gets its key when it is created and keeps it, from a counter
// the store holds (the group commit is the only writer; primeSessions
// starts it past the largest stored key).
//
// SQLite only. On PostgreSQL the change of the messages' index served
// about 13 % fewer requests at 64 connections (docs/benchmarks.md), and
// many gateways share the database, so no process's memory can index its
// sessions: there messages stay keyed by session id with the index on
// (session_id, seq), sessions by their id, and session_key stays 0.
// SessionMessagesJoin gives each database its condition.
func init() {
	registerDataMigration(dataMigration{Version: 6, Name: "chat_messages: found by their session's sequential key, not its random id",
		Up: keyMessagesBySession})
	registerDataMigration(dataMigration{Version: 7, Name: "chat_sessions: keyed by their sequential key on SQLite, without an index on the id",
		Up: keySessionsByKey})
	registerDataMigration(dataMigration{Version: 8, Name: "chat_sessions: an index on the id on SQLite",
		Up: indexSessionIDs})
}

// indexSessionIDs gives SQLite's chat_sessions (keyed by session_key since
// migration 7) an index on the id, where the store finds a session's key
// by its id. It is not a unique index: the writer keeps the ids unique
// (see storeSession), and a unique index's check would cost every new
// session a statement journal.
func indexSessionIDs(_ context.Context, tx *gorm.DB, driver string) error {
	if driver != DriverSQLite {
		return nil
	}
	if err := tx.Exec("CREATE INDEX IF NOT EXISTS idx_chat_sessions_id ON chat_sessions (id)").Error; err != nil {
		return fmt.Errorf("index chat_sessions' ids: %w", err)
	}
	return nil
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
		// Row ids are unique, and in creation order.
		"UPDATE chat_sessions SET session_key = rowid WHERE session_key = 0",
		// Keys past the largest (where migration 7 made session_key the
		// row id, this also runs again without a collision).
		`INSERT INTO chat_sessions (id, agent_id, subject, user_id, username, source, created_at, updated_at, session_key)
SELECT m.session_id, '', '', '', '', '', MIN(m.created_at), MAX(m.created_at),
(SELECT COALESCE(MAX(session_key), 0) FROM chat_sessions) + ROW_NUMBER() OVER (ORDER BY m.session_id) FROM chat_messages m
WHERE NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE s.id = m.session_id) GROUP BY m.session_id`,
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

// keySessionsByKey rebuilds SQLite's chat_sessions with session_key as its
// INTEGER PRIMARY KEY (the rowid) instead of the id. A session without a
// key of its own (0, or one another session has: only rows written by hand
// can be so) first gets a new one, and so do its messages. GORM created
// the table with the id as its key and never changes a table's key
// afterwards, so this runs once, after the table exists.
func keySessionsByKey(_ context.Context, tx *gorm.DB, driver string) error {
	if driver != DriverSQLite {
		return nil
	}
	var ddl string
	if err := tx.Raw("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chat_sessions'").Scan(&ddl).Error; err != nil {
		return fmt.Errorf("read chat_sessions' definition: %w", err)
	}
	name := createTableName("chat_sessions").FindString(ddl)
	pk := sessionsIDKey.FindStringIndex(ddl)
	if pk == nil && sessionsKeyKey.MatchString(ddl) {
		return nil // rebuilt already (the migration runs again)
	}
	if name == "" || pk == nil {
		return fmt.Errorf("rebuild chat_sessions: unexpected definition %q", ddl)
	}
	var indexes []string
	if err := tx.Raw("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'chat_sessions' AND sql IS NOT NULL").Scan(&indexes).Error; err != nil {
		return fmt.Errorf("read chat_sessions' indexes: %w", err)
	}
	var unkeyed int64
	if err := tx.Raw(`SELECT COUNT(*) FROM chat_sessions WHERE session_key <= 0
OR session_key IN (SELECT session_key FROM chat_sessions GROUP BY session_key HAVING COUNT(*) > 1)`).Scan(&unkeyed).Error; err != nil {
		return fmt.Errorf("rebuild chat_sessions: count sessions without a key of their own: %w", err)
	}
	var steps []string
	if unkeyed > 0 {
		steps = append(steps,
			// Row ids are unique: past the largest key, they are keys no
			// session has.
			`UPDATE chat_sessions SET session_key = (SELECT MAX(session_key) FROM chat_sessions) + rowid WHERE session_key <= 0
OR session_key IN (SELECT session_key FROM chat_sessions GROUP BY session_key HAVING COUNT(*) > 1)`,
			`UPDATE chat_messages SET session_key = (SELECT s.session_key FROM chat_sessions s WHERE s.id = chat_messages.session_id)
WHERE session_key <> (SELECT s.session_key FROM chat_sessions s WHERE s.id = chat_messages.session_id)`)
	}
	rebuilt := "CREATE TABLE `chat_sessions_rebuilt`" + ddl[len(name):pk[0]] + "PRIMARY KEY (`session_key`)" + ddl[pk[1]:]
	steps = append(steps,
		rebuilt,
		"INSERT INTO chat_sessions_rebuilt SELECT * FROM chat_sessions ORDER BY session_key",
		"DROP TABLE chat_sessions",
		"ALTER TABLE chat_sessions_rebuilt RENAME TO chat_sessions")
	steps = append(steps, indexes...)
	for i, q := range steps {
		if err := tx.Exec(q).Error; err != nil {
			return fmt.Errorf("rebuild chat_sessions, step %d of %d: %w", i+1, len(steps), err)
		}
	}
	return nil
}

// sessionsIDKey and sessionsKeyKey match chat_sessions' PRIMARY KEY clause
// on the id and on session_key, however quoted.
var (
	sessionsIDKey  = primaryKeyClause("id")
	sessionsKeyKey = primaryKeyClause("session_key")
)

func primaryKeyClause(column string) *regexp.Regexp {
	return regexp.MustCompile("(?i)PRIMARY KEY\\s*\\(\\s*[`\"\\[]?" + column + "[`\"\\]]?\\s*\\)")
}

// The SQLite writer's statements of a session (see storeSession): an
// existing session's key is read by its id and the session touched by its
// key (an UPDATE ... RETURNING would make SQLite journal the statement's
// pages); a new one is inserted with its key; lastSeqSQL reads the number
// of a session's last message.
const (
	sessionKeySQL    = `SELECT session_key FROM chat_sessions WHERE id = ? ORDER BY session_key LIMIT 1`
	touchSessionSQL  = `UPDATE chat_sessions SET updated_at = ?, username = ? WHERE session_key = ?`
	insertSessionSQL = `INSERT INTO chat_sessions (id, agent_id, subject, user_id, username, source, created_at, updated_at, session_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	lastSeqSQL = `SELECT COALESCE(MAX(seq), 0) FROM chat_messages WHERE session_key = ?`
)

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
