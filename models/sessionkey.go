package models

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/agentryhq/agentry/models/sqlitewriter"
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
// request by a third (docs/benchmarks/2026-11-history.md). With (session_key, seq) a new
// session's messages go to the end of the index, as the action log's and
// the ledger's time-ordered ids already do.
//
// On SQLite, data migration 7 makes session_key chat_sessions' key (its
// rows in creation order), without an index on the id; a session's key is
// found by its id through the session window and chat_session_ids
// (migration 9, see sessionWindow). Migration 8 gave the id an index for
// a day; it now does nothing, and migration 9 drops that index where it
// was built.
//
// A session gets its key when it is created and keeps it, from a counter
// the store holds (the group commit is the only writer; primeSessions
// starts it past the largest stored key).
//
// SQLite only. On PostgreSQL the change of the messages' index served
// about 13 % fewer requests at 64 connections (docs/benchmarks/2026-11-history.md), and
// many gateways share the database, so no process's memory can index its
// sessions: there messages stay keyed by session id with the index on
// (session_id, seq), sessions by their id, and session_key stays 0.
// SessionMessagesJoin gives each database its condition.

// digestSessionIDs replaces SQLite's index on chat_sessions.id (migration
// 8) with chat_session_ids, holding every stored session (see
// sessionWindow).
func digestSessionIDs(ctx context.Context, tx *gorm.DB, driver string) error {
	if driver != DriverSQLite {
		return nil
	}
	steps := []string{
		"DROP INDEX IF EXISTS idx_chat_sessions_id",
		`CREATE TABLE IF NOT EXISTS chat_session_ids (digest INTEGER NOT NULL, session_key INTEGER NOT NULL,
PRIMARY KEY (digest, session_key)) WITHOUT ROWID`,
		`CREATE TABLE IF NOT EXISTS chat_session_ids_through (id INTEGER PRIMARY KEY CHECK (id = 1), session_key INTEGER NOT NULL)`,
		"INSERT OR IGNORE INTO chat_session_ids_through (id, session_key) VALUES (1, 0)",
	}
	for i, q := range steps {
		if err := tx.Exec(q).Error; err != nil {
			return fmt.Errorf("digest session ids, step %d of %d: %w", i+1, len(steps), err)
		}
	}
	rows, err := tx.Raw("SELECT id, session_key FROM chat_sessions").Rows()
	if err != nil {
		return fmt.Errorf("digest session ids: %w", err)
	}
	var all []windowEntry
	var last int64
	for rows.Next() {
		var e windowEntry
		if err := rows.Scan(&e.id, &e.key); err != nil {
			rows.Close()
			return fmt.Errorf("digest session ids: %w", err)
		}
		all = append(all, e)
		last = max(last, e.key)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("digest session ids: %w", err)
	}
	exec := func(q string, args ...any) error { return tx.Exec(q, args...).Error }
	if err := writeSessionDigests(all, exec); err != nil {
		return err
	}
	return exec(setSpilledThroughSQL, last)
}

// digestsPerInsert is the rows of one INSERT into chat_session_ids (two
// variables a row, well under SQLite's limit of 32,766).
const digestsPerInsert = 500

// insertDigestsSQL inserts digestsPerInsert rows; a shorter bulk repeats
// its last row (OR IGNORE), so one prepared statement serves every bulk.
var insertDigestsSQL = "INSERT OR IGNORE INTO chat_session_ids (digest, session_key) VALUES (?, ?)" +
	strings.Repeat(", (?, ?)", digestsPerInsert-1)

const (
	setSpilledThroughSQL = "UPDATE chat_session_ids_through SET session_key = ? WHERE id = 1"
	spilledThroughSQL    = "SELECT session_key FROM chat_session_ids_through WHERE id = 1"
)

// writeSessionDigests writes the digests of sessions into
// chat_session_ids, in digest order (each leaf page written once).
func writeSessionDigests(sessions []windowEntry, exec func(q string, args ...any) error) error {
	type row struct{ digest, key int64 }
	rows := make([]row, len(sessions))
	for i, e := range sessions {
		rows[i] = row{sessionDigest(e.id), e.key}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.digest, b.digest), cmp.Compare(a.key, b.key)) })
	args := make([]any, 0, 2*digestsPerInsert)
	for start := 0; start < len(rows); start += digestsPerInsert {
		part := rows[start:min(start+digestsPerInsert, len(rows))]
		args = args[:0]
		for i := range digestsPerInsert {
			r := part[min(i, len(part)-1)]
			args = append(args, r.digest, r.key)
		}
		if err := exec(insertDigestsSQL, args...); err != nil {
			return fmt.Errorf("write session digests: %w", err)
		}
	}
	return nil
}

// spillSessions writes the n oldest sessions of the session window to
// chat_session_ids in the writer's transaction tx and moves the mark past
// them. The window forgets them once a commit is known to hold the mark
// (dropSpilled).
func (s *Store) spillSessions(ctx context.Context, tx *sql.Tx, n int) error {
	oldest := s.window.oldest(n)
	if len(oldest) == 0 {
		return nil
	}
	exec := func(q string, args ...any) error { return s.Group.Exec(ctx, tx, q, args...) }
	if err := writeSessionDigests(oldest, exec); err != nil {
		return err
	}
	if err := exec(setSpilledThroughSQL, oldest[len(oldest)-1].key); err != nil {
		return fmt.Errorf("write session digests: %w", err)
	}
	s.window.spilled = true
	return nil
}

// spillPrimed writes, when the store opens with a full window (rows
// another tool added, or bulks that kept failing), all but the newest
// half-window of its sessions in one bulk, committed at once.
func (s *Store) spillPrimed(ctx context.Context) error {
	if !s.window.full() {
		return nil
	}
	excess := s.window.size() - s.window.max/2
	err := s.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error { return s.spillSessions(ctx, tx, excess) })
	if err != nil {
		return fmt.Errorf("open database: write session digests: %w", err)
	}
	// A read on the pool makes the writer commit (and drop the bulk).
	var one int
	if err := s.DB.WithContext(ctx).Raw("SELECT 1").Row().Scan(&one); err != nil {
		return fmt.Errorf("open database: write session digests: %w", err)
	}
	return nil
}

// dropSpilled runs after each commit (the writer's onCommit): after a
// bulk, it reads the committed mark on the writer's connection and makes
// the window forget the sessions up to it. A bulk that rolled back did
// not move the mark: its sessions stay for the next bulk.
func (s *Store) dropSpilled() {
	if !s.window.spilled {
		return
	}
	s.window.spilled = false
	var through int64
	// The writer's own connection, free after the commit (without a redo
	// log the writer commits on the pool's); a settled read does not ask
	// the writer to commit (it just did).
	ctx := sqlitewriter.SettledRead(context.Background())
	var err error
	if conn := s.Group.WriterConn(); conn != nil {
		err = conn.QueryRowContext(ctx, spilledThroughSQL).Scan(&through)
	} else {
		err = s.DB.WithContext(ctx).Raw(spilledThroughSQL).Row().Scan(&through)
	}
	if err != nil {
		s.log.Warn("session window: read the mark of sessions written to chat_session_ids", "err", err)
		return
	}
	s.window.dropThrough(through)
}

// writerSessionKey finds the key of the session with id for the writer,
// in its transaction: in the window, or in chat_session_ids (the id
// checked on the row).
func (s *Store) writerSessionKey(ctx context.Context, tx *sql.Tx, id string) (int64, bool, error) {
	if s.window == nil {
		return 0, false, nil
	}
	if key, ok := s.window.get(id); ok {
		return key, true, nil
	}
	q, err := s.Group.Stmt(ctx, tx, spilledKeySQL)
	if err != nil {
		return 0, false, err
	}
	var key int64
	switch err := q.QueryRowContext(ctx, sessionDigest(id), id).Scan(&key); {
	case err == nil:
		return key, true, nil
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	default:
		return 0, false, err
	}
}

// indexSessionIDs does nothing any more. It gave SQLite's chat_sessions
// an index on the id for a day, before any release; migration 9 replaced
// it (each new session wrote a random leaf page of that index) and drops
// the index where it was built. Building it only for migration 9 to drop
// it would cost a large database's first start seconds.
func indexSessionIDs(context.Context, *gorm.DB, string) error { return nil }

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
// existing session, its key found by its id (see sessionWindow), is
// touched by its key, the id checked; a new one is inserted with its key;
// lastSeqSQL reads the number of a session's last message.
const (
	spilledKeySQL = `SELECT s.session_key FROM chat_session_ids d JOIN chat_sessions s ON s.session_key = d.session_key
WHERE d.digest = ? AND s.id = ? ORDER BY s.session_key LIMIT 1`
	touchSessionSQL  = `UPDATE chat_sessions SET updated_at = ?, username = ? WHERE session_key = ? AND id = ?`
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
