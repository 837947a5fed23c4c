package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// dropIndexes is a data migration dropping the named indexes where they
// exist.
func dropIndexes(names ...string) func(context.Context, *gorm.DB, string) error {
	return func(_ context.Context, tx *gorm.DB, _ string) error {
		for _, idx := range names {
			if err := tx.Exec("DROP INDEX IF EXISTS " + idx).Error; err != nil {
				return fmt.Errorf("drop %s: %w", idx, err)
			}
		}
		return nil
	}
}

// dropMessagesAutoincrement rebuilds SQLite's chat_messages with a plain
// INTEGER PRIMARY KEY. AUTOINCREMENT keeps its high-water mark in
// sqlite_sequence, a page every chat request's commit wrote once more;
// message ids are internal (messages are read by session and seq), so one
// reused after the newest messages were deleted collides with nothing.
// GORM creates the table with AUTOINCREMENT and never changes a key
// column's keyword afterwards, so this runs once, after the table exists.
func dropMessagesAutoincrement(_ context.Context, tx *gorm.DB, driver string) error {
	if driver != DriverSQLite {
		return nil // PostgreSQL's identity column is a sequence outside the table
	}
	var ddl string
	if err := tx.Raw("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chat_messages'").Scan(&ddl).Error; err != nil {
		return fmt.Errorf("read chat_messages' definition: %w", err)
	}
	if !strings.Contains(ddl, "AUTOINCREMENT") {
		return nil
	}
	var indexes []string
	if err := tx.Raw("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'chat_messages' AND sql IS NOT NULL").Scan(&indexes).Error; err != nil {
		return fmt.Errorf("read chat_messages' indexes: %w", err)
	}
	name := createTableName("chat_messages").FindString(ddl)
	if name == "" {
		return fmt.Errorf("rebuild chat_messages: unexpected definition %q", ddl)
	}
	rebuilt := "CREATE TABLE `chat_messages_rebuilt`" + strings.Replace(ddl[len(name):], " AUTOINCREMENT", "", 1)
	steps := []string{
		rebuilt,
		"INSERT INTO chat_messages_rebuilt SELECT * FROM chat_messages",
		"DROP TABLE chat_messages",
		"ALTER TABLE chat_messages_rebuilt RENAME TO chat_messages",
	}
	steps = append(steps, indexes...)
	steps = append(steps, "DELETE FROM sqlite_sequence WHERE name = 'chat_messages'")
	for i, q := range steps {
		if err := tx.Exec(q).Error; err != nil {
			return fmt.Errorf("rebuild chat_messages, step %d of %d: %w", i+1, len(steps), err)
		}
	}
	return nil
}

// createTableName matches the start of table's CREATE TABLE up to its
// name, however quoted: as GORM wrote it (`name`) or as SQLite rewrites it
// after a table was renamed ("name").
func createTableName(table string) *regexp.Regexp {
	return regexp.MustCompile("(?i)^CREATE TABLE\\s+[`\"\\[]?" + table + "[`\"\\]]?")
}

// ChatSession is one conversation of one caller with one agent. GET
// /memory?agent_id= lists an agent's sessions newest first: the index on
// (agent_id, updated_at) finds them without reading every session (data
// migration 10 had dropped the agent_id index; 11 brings it back, issue 43).
type ChatSession struct {
	ID        string `gorm:"primaryKey;size:191"`
	AgentID   string `gorm:"size:100;index:idx_chat_sessions_agent_updated,priority:1"`
	Subject   string `gorm:"size:191"`
	UserID    string `gorm:"size:191"`
	Username  string `gorm:"size:191"`
	Source    string `gorm:"size:32"`
	CreatedAt time.Time
	UpdatedAt time.Time `gorm:"index:idx_chat_sessions_agent_updated,priority:2"`
	// Key numbers sessions in creation order; messages are found by it
	// (see sessionkey.go). The session's upsert gives it on SQLite; it is
	// 0 on PostgreSQL.
	Key int64 `gorm:"column:session_key;not null;default:0"`
}

// ChatMessage is one message of a session, in order (Seq). Data migration
// 6 indexes (session_key, seq) on SQLite and (session_id, seq) on
// PostgreSQL (see sessionkey.go).
type ChatMessage struct {
	ID         int64  `gorm:"primaryKey"`
	SessionID  string `gorm:"size:191"`
	SessionKey int64  `gorm:"not null;default:0"`
	Seq        int64
	RunID      string `gorm:"size:64"`
	Role       string `gorm:"size:16"`
	Content    string
	ToolCalls  string // JSON array of tool calls of an assistant message
	ToolCallID string `gorm:"size:191"`
	Name       string `gorm:"size:100"`
	CreatedAt  time.Time
}

// AgentRun is the action log: one row per agent run of any surface, with
// the ids handed to the caller. Feedback is validated against it. It is
// read by run id only: every chat request inserts a row, and each index is
// one more page its commit writes (the session id's a random one), so it
// has no others (data migrations 3 and 4 dropped those on agent_id,
// session_id and response_id). Feedback finds its run by run id and checks
// the response id on the row; response ids are fresh UUIDs, so no index
// guards their uniqueness.
type AgentRun struct {
	RunID        string `gorm:"primaryKey;size:64"`
	ResponseID   string `gorm:"size:64"`
	AgentID      string `gorm:"size:100"`
	SessionID    string `gorm:"size:191"`
	Subject      string `gorm:"size:191"`
	Source       string `gorm:"size:32"`
	Provider     string `gorm:"size:100"`
	Model        string `gorm:"size:191"`
	Status       string `gorm:"size:16"`
	Error        string
	Turns        int
	InputTokens  int64
	OutputTokens int64
	// Metadata is JSON (for example the raw webhook payload with include_raw).
	Metadata   string
	StartedAt  time.Time
	FinishedAt *time.Time
}

// Feedback is one vote of one subject on one response (upserted).
type Feedback struct {
	ID         int64  `gorm:"primaryKey"`
	Subject    string `gorm:"size:191;uniqueIndex:idx_feedback_subject_response,priority:1"`
	ResponseID string `gorm:"size:64;uniqueIndex:idx_feedback_subject_response,priority:2"`
	AgentID    string `gorm:"size:100;index"`
	SessionID  string `gorm:"size:191"`
	RunID      string `gorm:"size:64"`
	Rating     int
	Comment    string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// LearningProposal is a pending procedural-learning proposal created from
// a feedback comment, for an operator to review.
type LearningProposal struct {
	ID         int64  `gorm:"primaryKey"`
	FeedbackID int64  `gorm:"uniqueIndex"`
	AgentID    string `gorm:"size:100;index"`
	ResponseID string `gorm:"size:64"`
	Subject    string `gorm:"size:191"`
	Rating     int
	Comment    string
	Status     string `gorm:"size:16"`
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("not found")

// GetSession returns a session by id.
func (s *Store) GetSession(ctx context.Context, id string) (*ChatSession, error) {
	var sess ChatSession
	q := s.DB.WithContext(ctx)
	if s.window != nil {
		if key, ok := s.window.get(id); ok {
			q = q.Where("session_key = ?", key)
		} else {
			q = q.Where("session_key IN (SELECT session_key FROM chat_session_ids WHERE digest = ?)", sessionDigest(id))
		}
	}
	err := q.First(&sess, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	return &sess, err
}

// RecentMessages returns up to limit of the newest messages of a session,
// oldest first.
// On SQLite they come from the history cache when it can answer (see
// historyCache).
func (s *Store) RecentMessages(ctx context.Context, sessionID string, limit int) ([]ChatMessage, error) {
	if s.history == nil {
		return s.recentMessages(ctx, sessionID, limit)
	}
	if msgs, ok := s.history.get(sessionID, limit); ok {
		return msgs, nil
	}
	load := s.history.startLoad(sessionID)
	if s.history.settled(sessionID) {
		ctx = sqlitewriter.SettledRead(ctx)
	}
	msgs, err := s.recentMessages(ctx, sessionID, limit)
	s.history.finishLoad(sessionID, load, msgs, limit, err == nil)
	return msgs, err
}

func (s *Store) recentMessages(ctx context.Context, sessionID string, limit int) ([]ChatMessage, error) {
	var msgs []ChatMessage
	var err error
	if s.Driver == DriverSQLite {
		msgs, err = s.recentMessagesSQLite(ctx, sessionID, limit)
	} else {
		err = s.DB.WithContext(ctx).Where("session_id = ?", sessionID).Order("seq DESC").Limit(limit).Find(&msgs).Error
	}
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
	return msgs, err
}

// recentMessagesSQL reads a session's newest messages, newest first, on
// SQLite. It runs as a prepared statement without GORM: preparing it and
// GORM's reflection were about two thirds of the read's cost (profiled at
// one connection, where returning sessions the history cache does not hold
// read their history). Text columns may be NULL in rows written by hand.
// recentMessagesSQL reads by the key the session window holds,
// spilledMessagesSQL by the keys chat_session_ids holds for the id's
// digest (see sessionWindow).
//
// Neither has a LIMIT: the reader stops after the rows it wants. A bound
// LIMIT (LIMIT ?) made SQLite prepare the statement again at every run,
// half of the read's cost (a constant LIMIT would need a statement per
// limit).
const (
	recentMessagesSQL = `SELECT id, session_id, session_key, seq, COALESCE(run_id, ''), COALESCE(role, ''), COALESCE(content, ''),
COALESCE(tool_calls, ''), COALESCE(tool_call_id, ''), COALESCE(name, ''), created_at
FROM chat_messages WHERE session_key = ? AND session_id = ? ORDER BY seq DESC`
	spilledMessagesSQL = `SELECT id, session_id, session_key, seq, COALESCE(run_id, ''), COALESCE(role, ''), COALESCE(content, ''),
COALESCE(tool_calls, ''), COALESCE(tool_call_id, ''), COALESCE(name, ''), created_at
FROM chat_messages WHERE session_key IN (SELECT session_key FROM chat_session_ids WHERE digest = ?) AND session_id = ?
ORDER BY seq DESC`
)

func (s *Store) recentMessagesSQLite(ctx context.Context, sessionID string, limit int) ([]ChatMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	var (
		stmt  *sqlitewriter.PreparedStmt
		query string
		args  []any
	)
	if key, ok := s.window.get(sessionID); ok {
		stmt, query, args = &s.recentStmt, recentMessagesSQL, []any{key, sessionID}
	} else {
		stmt, query, args = &s.spilledStmt, spilledMessagesSQL, []any{sessionDigest(sessionID), sessionID}
	}
	st, err := stmt.Get(ctx, s.DB, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("read session messages: %w", err)
	}
	defer rows.Close()
	var msgs []ChatMessage
	for rows.Next() {
		var m ChatMessage
		if err := rows.Scan(&m.ID, &m.SessionID, &m.SessionKey, &m.Seq, &m.RunID, &m.Role, &m.Content, &m.ToolCalls, &m.ToolCallID, &m.Name, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("read session messages: %w", err)
		}
		msgs = append(msgs, m)
		if len(msgs) == limit {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read session messages: %w", err)
	}
	return msgs, nil
}

// primeSessions tells the history cache which sessions are stored, fills
// the session window with those chat_session_ids does not hold yet and
// makes newSessionKey continue after the largest key stored, in one pass
// over chat_sessions (SQLite, when the store opens: its writer is the only
// writer of chat_sessions, so no other process adds sessions meanwhile).
func (s *Store) primeSessions(ctx context.Context) error {
	var stored, last, through int64
	if err := s.DB.WithContext(ctx).Raw("SELECT COUNT(*), COALESCE(MAX(session_key), 0), (SELECT session_key FROM chat_session_ids_through) FROM chat_sessions").
		Row().Scan(&stored, &last, &through); err != nil {
		return fmt.Errorf("open database: count sessions: %w", err)
	}
	known := newSessionFilter(int(stored))
	rows, err := s.DB.WithContext(ctx).Raw("SELECT id, session_key FROM chat_sessions ORDER BY session_key").Rows()
	if err != nil {
		return fmt.Errorf("open database: list sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var key int64
		if err := rows.Scan(&id, &key); err != nil {
			return fmt.Errorf("open database: list sessions: %w", err)
		}
		known.add(s.history.hash(id))
		if key > through {
			s.window.add(id, key)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open database: list sessions: %w", err)
	}
	s.history.prime(known)
	s.sessionKeys.Store(last)
	return nil
}

// SaveExchange stores the outcome of one agent run in one transaction: the
// session (created or touched), the action-log row (when run is not nil) and
// the new messages. One write per request keeps SQLite's single writer
// from becoming the chat path's bottleneck.
//
// On SQLite the exchange is one job of the group commit (see
// sqlitewriter.GroupCommit): it returns once the batch holding it
// committed. On PostgreSQL it is one
// batch, carrying the settlements ctx holds (see saveExchangePostgres and
// CommitLater).
func (s *Store) SaveExchange(ctx context.Context, sess *ChatSession, run *AgentRun, msgs []ChatMessage) error {
	if s.Group != nil {
		err := s.Group.Do(ctx, heldFor(ctx), func(ctx context.Context, tx *sql.Tx) error { return s.saveExchangeSQL(ctx, tx, sess, run, msgs) })
		if err == nil && s.history != nil {
			s.history.appended(sess.ID, msgs) // committed: write through
		}
		return err
	}
	return s.saveExchangePostgres(ctx, sess, run, msgs) // Open gives every SQLite store its writer
}

// The exchange's statements in plain SQL, for the group commit's
// transaction (GORM's reflection would cost more than the statements).
const (
	insertRunSQL = `INSERT INTO agent_runs (run_id, response_id, agent_id, session_id, subject, source, provider, model, status, error,
turns, input_tokens, output_tokens, metadata, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertMessageSQL = `INSERT INTO chat_messages (session_id, session_key, seq, run_id, role, content, tool_calls, tool_call_id, name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

func (s *Store) saveExchangeSQL(ctx context.Context, tx *sql.Tx, sess *ChatSession, run *AgentRun, msgs []ChatMessage) error {
	now := time.Now().UTC()
	sess.CreatedAt, sess.UpdatedAt = now, now
	// A session inserted here (most chat requests start a session) numbers
	// its messages from 1 without a read.
	fresh, err := s.storeSession(ctx, tx, sess, now)
	if err != nil {
		return err
	}
	if len(msgs) > 0 && s.history != nil {
		s.history.markWritten(sess.ID)
	}
	if run != nil {
		errText := run.Error
		if s.scrub != nil && errText != "" {
			errText = s.scrub(errText)
		}
		// boxStable: what comes from configuration or constants.
		if err := s.Group.ExecLiteral(ctx, tx, insertRunLiteral, run.RunID, run.ResponseID, sqlitewriter.BoxStable(run.AgentID), run.SessionID, sqlitewriter.BoxStable(run.Subject),
			sqlitewriter.BoxStable(run.Source), sqlitewriter.BoxStable(run.Provider), sqlitewriter.BoxStable(run.Model), sqlitewriter.BoxStable(run.Status), errText, run.Turns, run.InputTokens,
			run.OutputTokens, run.Metadata, run.StartedAt, run.FinishedAt); err != nil {
			return fmt.Errorf("record run: %w", err)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	var last int64
	if !fresh {
		q, err := s.Group.Stmt(ctx, tx, lastSeqSQL)
		if err != nil {
			return err
		}
		if err := q.QueryRowContext(ctx, sess.Key).Scan(&last); err != nil {
			return fmt.Errorf("number messages: %w", err)
		}
	}
	// The messages go in multi-row INSERTs (one statement runs, binds and
	// updates the index once per row instead of once per statement).
	args := make([]any, 0, min(len(msgs), maxMessagesPerInsert)*10)
	// The values every message shares, boxed once (each boxing of a
	// string or time allocates).
	sessionID, sessionKey, created := any(sess.ID), any(sess.Key), any(now)
	for start := 0; start < len(msgs); start += maxMessagesPerInsert {
		part := msgs[start:min(start+maxMessagesPerInsert, len(msgs))]
		args = args[:0]
		for i := range part {
			m := &part[i]
			m.SessionID, m.SessionKey, m.Seq, m.CreatedAt = sess.ID, sess.Key, last+int64(start+i)+1, now
			args = append(args, sessionID, sessionKey, m.Seq, m.RunID, sqlitewriter.BoxStable(m.Role), m.Content, m.ToolCalls, m.ToolCallID, m.Name, created)
		}
		if err := s.Group.ExecLiteral(ctx, tx, messageLiterals[len(part)], args...); err != nil {
			return fmt.Errorf("store message: %w", err)
		}
	}
	return nil
}

// storeSession touches the session sess names, found by its id, or
// inserts it with a new key, sets sess.Key and reports whether it inserted
// it. A session the history cache's filter has certainly not seen is
// inserted without looking for its row first: the writer is the only
// writer of chat_sessions on SQLite and notes every session it stores
// there, so such a session has no row (the filter was primed with every
// row when the store opened). A key found for the id whose row does not
// hold it (its insert rolled back) touches nothing: the session is
// inserted with a new key then.
func (s *Store) storeSession(ctx context.Context, tx *sql.Tx, sess *ChatSession, now time.Time) (inserted bool, err error) {
	if s.history == nil || s.history.noteSession(sess.ID) {
		key, found, err := s.writerSessionKey(ctx, tx, sess.ID)
		if err != nil {
			return false, fmt.Errorf("store session: %w", err)
		}
		if found {
			n, err := s.Group.ExecCount(ctx, tx, touchSessionSQL, now, sess.Username, key, sess.ID)
			if err != nil {
				return false, fmt.Errorf("store session: %w", err)
			}
			if n == 1 {
				sess.Key = key
				return false, nil
			}
		}
	}
	sess.Key = s.newSessionKey()
	if err := s.Group.ExecLiteral(ctx, tx, insertSessionLiteral, sess.ID, sqlitewriter.BoxStable(sess.AgentID), sqlitewriter.BoxStable(sess.Subject), sess.UserID, sess.Username,
		sqlitewriter.BoxStable(sess.Source), now, now, sess.Key); err != nil {
		return false, fmt.Errorf("store session: %w", err)
	}
	s.window.add(sess.ID, sess.Key)
	if s.window.full() && !s.window.spilled {
		// Upkeep, not this exchange's work: a bulk that fails (a statement
		// SQLite refused, which undoes that statement alone) is logged and
		// tried again at the next new session; its sessions stay in the
		// window meanwhile.
		if err := s.spillSessions(ctx, tx, s.window.max/2); err != nil {
			s.log.Warn("session window: write the oldest sessions to chat_session_ids", "err", err)
		}
	}
	return true, nil
}

// maxMessagesPerInsert bounds the rows of one message INSERT (a turn with
// tool calls adds a few messages; a statement per row count is prepared).
const maxMessagesPerInsert = 8

var messageInserts = func() (q [maxMessagesPerInsert + 1]string) {
	for n := 1; n <= maxMessagesPerInsert; n++ {
		q[n] = insertMessageSQL + strings.Repeat(", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", n-1)
	}
	return q
}()

// insertMessagesSQL inserts n (1 to maxMessagesPerInsert) messages.
func insertMessagesSQL(n int) string { return messageInserts[n] }

// The exchange's INSERTs as literal statements (see literalSQL): what an
// agent's requests share is written into the text.
var (
	insertRunLiteral = sqlitewriter.NewLiteral(insertRunSQL,
		sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.InlineValue, sqlitewriter.BindValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, // run_id, response_id, agent_id, session_id, subject, source
		sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.InlineIfZero, sqlitewriter.InlineValue, // provider, model, status, error, turns
		sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.InlineIfZero, sqlitewriter.BindValue, sqlitewriter.BindValue) // input_tokens, output_tokens, metadata, started_at, finished_at
	insertSessionLiteral = sqlitewriter.NewLiteral(insertSessionSQL,
		sqlitewriter.BindValue, sqlitewriter.InlineValue, sqlitewriter.InlineValue, sqlitewriter.BindValue, sqlitewriter.InlineIfZero, sqlitewriter.InlineValue, // id, agent_id, subject, user_id, username, source
		sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.BindValue) // created_at, updated_at, session_key
	messageLiterals = func() (l [maxMessagesPerInsert + 1]*sqlitewriter.Literal) {
		for n := 1; n <= maxMessagesPerInsert; n++ {
			l[n] = sqlitewriter.RepeatLiteral(insertMessagesSQL(n), n,
				sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.BindValue, sqlitewriter.InlineValue, // session_id, session_key, seq, run_id, role
				sqlitewriter.BindValue, sqlitewriter.InlineIfZero, sqlitewriter.InlineIfZero, sqlitewriter.InlineIfZero, sqlitewriter.BindValue) // content, tool_calls, tool_call_id, name, created_at
		}
		return l
	}()
)

// AgentRunByID returns the action-log row with run id runID (ErrNotFound
// if none).
func (s *Store) AgentRunByID(ctx context.Context, runID string) (*AgentRun, error) {
	var r AgentRun
	err := s.DB.WithContext(ctx).Take(&r, "run_id = ?", runID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	return &r, nil
}

// FindRun returns the action-log row of a response.
func (s *Store) FindRun(ctx context.Context, agentID, sessionID, runID, responseID string) (*AgentRun, error) {
	var r AgentRun
	err := s.DB.WithContext(ctx).First(&r, "run_id = ? AND response_id = ? AND agent_id = ? AND session_id = ?", runID, responseID, agentID, sessionID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	return &r, err
}

// UpsertFeedback stores a vote, replacing the subject's earlier vote on the
// same response, and creates or updates the learning proposal when there is
// a comment. It returns the stored row and the proposal (or nil).
func (s *Store) UpsertFeedback(ctx context.Context, fb *Feedback) (*Feedback, *LearningProposal, error) {
	var stored Feedback
	var prop *LearningProposal
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		fb.CreatedAt, fb.UpdatedAt = now, now
		if err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "subject"}, {Name: "response_id"}},
			DoUpdates: clause.Assignments(map[string]any{"rating": fb.Rating, "comment": fb.Comment, "updated_at": now, "agent_id": fb.AgentID, "session_id": fb.SessionID, "run_id": fb.RunID}),
		}).Create(fb).Error; err != nil {
			return fmt.Errorf("upsert feedback: %w", err)
		}
		if err := tx.First(&stored, "subject = ? AND response_id = ?", fb.Subject, fb.ResponseID).Error; err != nil {
			return err
		}
		if stored.Comment == "" {
			return nil
		}
		p := LearningProposal{FeedbackID: stored.ID, AgentID: stored.AgentID, ResponseID: stored.ResponseID, Subject: stored.Subject,
			Rating: stored.Rating, Comment: stored.Comment, Status: "pending", CreatedAt: now, UpdatedAt: now}
		if err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "feedback_id"}},
			DoUpdates: clause.Assignments(map[string]any{"comment": p.Comment, "rating": p.Rating, "status": "pending", "updated_at": now}),
		}).Create(&p).Error; err != nil {
			return fmt.Errorf("upsert learning proposal: %w", err)
		}
		var got LearningProposal
		if err := tx.First(&got, "feedback_id = ?", stored.ID).Error; err != nil {
			return err
		}
		prop = &got
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return &stored, prop, nil
}

// FeedbackWithProposal is a feedback row joined with its proposal.
type FeedbackWithProposal struct {
	Feedback
	ProposalID     *int64
	ProposalStatus *string
}

// ListFeedback returns the newest feedback, optionally for one agent.
func (s *Store) ListFeedback(ctx context.Context, agentID string, limit int) ([]FeedbackWithProposal, error) {
	var rows []FeedbackWithProposal
	q := s.DB.WithContext(ctx).Table("feedbacks AS f").
		Select("f.*, p.id AS proposal_id, p.status AS proposal_status").
		Joins("LEFT JOIN learning_proposals p ON p.feedback_id = f.id").
		Order("f.updated_at DESC, f.id DESC").Limit(limit)
	if agentID != "" {
		q = q.Where("f.agent_id = ?", agentID)
	}
	return rows, q.Scan(&rows).Error
}

// SessionSummary is one remembered conversation as GET /memory lists it.
type SessionSummary struct {
	SessionID string    `json:"session_id"`
	AgentID   string    `json:"agent_id"`
	UserID    string    `json:"user_id"`
	Username  string    `json:"username"`
	Source    string    `json:"source"`
	Messages  int64     `json:"messages"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ListSessionSummaries lists the most recently updated sessions (of one
// agent when agentID is set) with their message counts, newest first.
func (s *Store) ListSessionSummaries(ctx context.Context, agentID string, limit int) ([]SessionSummary, error) {
	q := s.DB.WithContext(ctx).Table("chat_sessions AS s").
		Select("s.id AS session_id, s.agent_id, s.user_id, s.username, s.source, s.updated_at, " +
			"(SELECT COUNT(*) FROM chat_messages m WHERE " + s.SessionMessagesJoin() + ") AS messages").
		Order("s.updated_at DESC, s.id").Limit(limit)
	if agentID != "" {
		q = q.Where("s.agent_id = ?", agentID)
	}
	sessions := []SessionSummary{}
	if err := q.Scan(&sessions).Error; err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return sessions, nil
}
