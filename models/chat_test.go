package models

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// An existing database gets the agent_runs indexes no query uses dropped
// (each is one more page every chat request's commit writes).
func TestMigrationsDropTheUnusedAgentRunIndexes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, opts Options) {
		ctx := context.Background()
		old := mustOpen(t, opts)
		// A database from before data migrations 3 and 4.
		for _, stmt := range []string{
			"CREATE INDEX idx_agent_runs_agent_id ON agent_runs (agent_id)",
			"CREATE INDEX idx_agent_runs_session_id ON agent_runs (session_id)",
			"CREATE UNIQUE INDEX idx_agent_runs_response_id ON agent_runs (response_id)",
			"DELETE FROM schema_migrations WHERE version >= 3",
		} {
			if err := old.DB.WithContext(ctx).Exec(stmt).Error; err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		if !old.DB.Migrator().HasIndex(&AgentRun{}, "idx_agent_runs_response_id") {
			t.Fatal("the old database has no response_id index to drop")
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}

		s := mustOpen(t, opts)
		for _, idx := range []string{"idx_agent_runs_agent_id", "idx_agent_runs_session_id", "idx_agent_runs_response_id"} {
			if s.DB.Migrator().HasIndex(&AgentRun{}, idx) {
				t.Errorf("%s still exists after Open", idx)
			}
		}
		assertMigrationsRecordedOnce(t, s)
	})
}

// SQLite's chat_messages loses AUTOINCREMENT (one sqlite_sequence page less
// per commit); an existing table is rebuilt with its rows, ids and index,
// its name quoted as GORM creates it or as SQLite rewrites it after GORM
// rebuilt the table (renamed from a temporary one). Data migration 6 then
// gives the sessions their keys and the messages their session's, and
// swaps the index: the history stays readable, a message without a session
// row included.
func TestMessagesTableWithoutAutoincrementKeepsItsRows(t *testing.T) {
	for _, quoted := range []string{"`chat_messages`", `"chat_messages"`} {
		t.Run(quoted, func(t *testing.T) { testMessagesTableRebuilt(t, quoted) })
	}
}

func testMessagesTableRebuilt(t *testing.T, quotedName string) {
	opts := backends[0].opts(t)
	if opts.Driver != DriverSQLite {
		t.Fatal("backends[0] is not SQLite")
	}
	ctx := context.Background()
	old := mustOpen(t, opts)
	sess := &ChatSession{ID: "kept", AgentID: "a", Subject: "sub", UserID: "u", Username: "u", Source: "chat"}
	if err := old.SaveExchange(ctx, sess, nil, []ChatMessage{{Role: "user", Content: "one"}, {Role: "assistant", Content: "two"}}); err != nil {
		t.Fatal(err)
	}
	// The tables as GORM created them, before data migrations 5 and 6.
	for _, stmt := range []string{
		"CREATE TABLE legacy AS SELECT id, session_id, seq, run_id, role, content, tool_calls, tool_call_id, name, created_at FROM chat_messages",
		"DROP TABLE chat_messages",
		"CREATE TABLE " + quotedName + " (`id` integer PRIMARY KEY AUTOINCREMENT,`session_id` text,`seq` integer,`run_id` text,`role` text,`content` text,`tool_calls` text,`tool_call_id` text,`name` text,`created_at` datetime)",
		"CREATE INDEX `idx_chat_messages_session_seq` ON `chat_messages`(`session_id`,`seq`)",
		"INSERT INTO chat_messages SELECT * FROM legacy",
		"INSERT INTO chat_messages (session_id, seq, run_id, role, content, tool_calls, tool_call_id, name, created_at) VALUES ('orphan', 1, 'r', 'user', 'alone', '', '', '', '2026-01-01 00:00:00')",
		"DROP TABLE legacy",
		// chat_sessions as GORM created it, before data migration 7.
		"CREATE TABLE legacy AS SELECT * FROM chat_sessions",
		"DROP TABLE chat_sessions",
		"CREATE TABLE `chat_sessions` (`id` text,`agent_id` text,`subject` text,`user_id` text,`username` text,`source` text,`created_at` datetime,`updated_at` datetime,`session_key` integer NOT NULL DEFAULT 0,PRIMARY KEY (`id`))",
		"CREATE INDEX `idx_chat_sessions_agent_id` ON `chat_sessions`(`agent_id`)",
		"INSERT INTO chat_sessions SELECT * FROM legacy",
		"DROP TABLE legacy",
		"UPDATE chat_sessions SET session_key = 0",
		"DELETE FROM schema_migrations WHERE version >= 5",
	} {
		if err := old.DB.Exec(stmt).Error; err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var before []ChatMessage
	if err := old.DB.Order("seq").Find(&before, "session_id = ?", "kept").Error; err != nil || len(before) != 2 {
		t.Fatalf("messages before: %v, %v", before, err)
	}
	old.Close()

	for i := range 2 { // the second Open finds nothing to do
		var logged bytes.Buffer
		opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		s := mustOpen(t, opts)
		applying := strings.Contains(logged.String(), `msg="applying data migration" version=5`)
		if applying != (i == 0) {
			t.Errorf("Open %d: logged %q; want the rebuild announced on the first Open only", i+1, logged.String())
		}
		var ddl string
		if err := s.DB.Raw("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chat_messages'").Scan(&ddl).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Contains(ddl, "AUTOINCREMENT") {
			t.Fatalf("chat_messages still has AUTOINCREMENT: %s", ddl)
		}
		// Data migrations 7 to 11, and GORM leaves the key alone on the
		// next Open.
		var sessionsDDL string
		var indexes []string
		if err := s.DB.Raw("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chat_sessions'").Scan(&sessionsDDL).Error; err != nil {
			t.Fatal(err)
		}
		if err := s.DB.Raw("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'chat_sessions' ORDER BY name").Scan(&indexes).Error; err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(sessionsDDL, "PRIMARY KEY (`session_key`))") || len(indexes) != 1 || indexes[0] != sessionsByAgentIndex {
			t.Fatalf("chat_sessions: %s with indexes %v; want it keyed by session_key, no index on the id, one on (agent_id, updated_at)", sessionsDDL, indexes)
		}
		// Data migration 9: every session stored before is in
		// chat_session_ids, and the mark is past the largest key.
		var sessions, digested, through, largest int64
		if err := s.DB.Raw(`SELECT (SELECT COUNT(*) FROM chat_sessions), (SELECT COUNT(*) FROM chat_session_ids d JOIN chat_sessions s ON s.session_key = d.session_key),
(SELECT session_key FROM chat_session_ids_through), (SELECT MAX(session_key) FROM chat_sessions)`).Row().Scan(&sessions, &digested, &through, &largest); err != nil {
			t.Fatal(err)
		}
		if sessions == 0 || digested != sessions || through != largest {
			t.Fatalf("%d sessions, %d of them in chat_session_ids, mark %d, largest key %d", sessions, digested, through, largest)
		}
		if got, err := s.GetSession(ctx, "kept"); err != nil || got.AgentID != "a" || got.Key <= 0 {
			t.Fatalf("GetSession(kept) after the migration: %+v, %v", got, err)
		}
		if s.DB.Migrator().HasIndex(&ChatMessage{}, "idx_chat_messages_session_seq") || !s.DB.Migrator().HasIndex(&ChatMessage{}, "idx_chat_messages_session_key_seq") {
			t.Fatal("want the messages indexed by (session_key, seq) and no longer by (session_id, seq)")
		}
		var keys []int64
		if err := s.DB.Raw("SELECT session_key FROM chat_sessions ORDER BY id").Scan(&keys).Error; err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 || keys[0] <= 0 || keys[1] <= 0 || keys[0] == keys[1] {
			t.Fatalf("session keys %v, want two distinct positive keys (kept and the orphan's new row)", keys)
		}
		for id, want := range map[string]int{"kept": 2, "orphan": 1} {
			msgs, err := s.recentMessages(ctx, id, 50)
			if err != nil || len(msgs) != want {
				t.Fatalf("history of %s after the migration: %d messages (%v), want %d", id, len(msgs), err, want)
			}
		}
		var after []ChatMessage
		if err := s.DB.Order("seq").Find(&after, "session_id = ?", "kept").Error; err != nil {
			t.Fatal(err)
		}
		if len(after) != 2 || after[0].ID != before[0].ID || after[1].Content != "two" {
			t.Fatalf("messages after the rebuild %+v, want %+v", after, before)
		}
		assertMigrationsRecordedOnce(t, s)
		s.Close()
	}

	s := mustOpen(t, opts)
	if err := s.SaveExchange(ctx, sess, nil, []ChatMessage{{Role: "user", Content: "three"}}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := s.DB.Model(&ChatMessage{}).Order("seq").Where("session_id = ?", "kept").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[2] <= ids[1] {
		t.Fatalf("ids after a new exchange: %v", ids)
	}
}
