package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// The memory tables (internal/memory, docs/memory.md): what agents that opt
// into memory remember across sessions. Every row belongs to one scope
// (workspace, agent, subject, user) and every read of the store names a
// whole scope or one row by id, which the service checks against the
// caller: a row of one scope is never returned for another.

// Memory kinds.
const (
	// MemoryFact is a fact the model stored with memory_write (or a person
	// through POST /memory/entries): pinned into the system prompt while it
	// fits in hot memory, searchable always.
	MemoryFact = "fact"
	// MemoryArchive is a finished conversation (a chat exchange, a finished
	// task run): searchable, never pinned.
	MemoryArchive = "archive"
)

// MemoryEntry is one memory.
type MemoryEntry struct {
	ID int64 `gorm:"primaryKey" json:"id"`
	// The scope: the gateway's workspace, the agent, the authenticated
	// subject and the end user the subject named ("" for task runs).
	Workspace string `gorm:"size:512;not null;index:idx_memory_scope,priority:1" json:"-"`
	AgentID   string `gorm:"size:100;not null;index:idx_memory_scope,priority:2" json:"agent_id"`
	Subject   string `gorm:"size:191;not null;index:idx_memory_scope,priority:3" json:"subject"`
	UserID    string `gorm:"size:191;not null;index:idx_memory_scope,priority:4" json:"user_id"`
	Kind      string `gorm:"size:16;not null;index:idx_memory_scope,priority:5" json:"kind"`
	Text      string `gorm:"type:text;not null" json:"text"`
	// Source says where it came from: a session id, task-<id>, or "api".
	Source    string    `gorm:"size:191" json:"source,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// UsedAt is when it was written or last returned by a search: hot
	// memory pins the most recently used facts first.
	UsedAt time.Time `gorm:"not null;index:idx_memory_scope,priority:6" json:"used_at"`
}

// MemoryScope names one scope of memories.
type MemoryScope struct {
	Workspace, AgentID, Subject, UserID string
}

// MemoryFilter selects memories of one workspace and agent. Subject "" or
// UserID "" match every subject or user; the service decides who may ask
// that (GET /memory/entries with memory:read).
type MemoryFilter struct {
	Workspace string
	AgentID   string
	Subject   string
	UserID    string
	// AnyUser: UserID "" matches every user (else only the user "").
	AnyUser bool
	Kind    string
	Limit   int
}

// MemoryHit is a memory a search found, with its relevance (higher is
// better; comparable within one search only).
type MemoryHit struct {
	MemoryEntry
	Score float64 `json:"score"`
}

// MemoryStore is the memory tables as internal/memory uses them.
type MemoryStore interface {
	// AddMemory stores e (its ID and times are set).
	AddMemory(ctx context.Context, e *MemoryEntry) error
	// ListMemories returns the memories f selects, most recently used first.
	ListMemories(ctx context.Context, f MemoryFilter) ([]MemoryEntry, error)
	// GetMemory returns one memory by id (ErrNotFound).
	GetMemory(ctx context.Context, id int64) (*MemoryEntry, error)
	// DeleteMemory deletes one memory by id (ErrNotFound).
	DeleteMemory(ctx context.Context, id int64) error
	// SearchMemories finds the memories of one scope holding any of terms
	// (words of letters and digits), best first: FTS5 on SQLite, tsvector
	// on PostgreSQL.
	SearchMemories(ctx context.Context, scope MemoryScope, terms []string, limit int) ([]MemoryHit, error)
	// TouchMemories sets UsedAt of the memories ids to at.
	TouchMemories(ctx context.Context, ids []int64, at time.Time) error
}

var _ MemoryStore = (*Store)(nil)

// AddMemory implements MemoryStore.
func (s *Store) AddMemory(ctx context.Context, e *MemoryEntry) error {
	now := time.Now().UTC()
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	if e.UsedAt.IsZero() {
		e.UsedAt = e.CreatedAt
	}
	if err := s.DB.WithContext(ctx).Create(e).Error; err != nil {
		return fmt.Errorf("store memory: %w", err)
	}
	return nil
}

// ListMemories implements MemoryStore.
func (s *Store) ListMemories(ctx context.Context, f MemoryFilter) ([]MemoryEntry, error) {
	q := s.DB.WithContext(ctx).Where("workspace = ? AND agent_id = ?", f.Workspace, f.AgentID)
	if f.Subject != "" {
		q = q.Where("subject = ?", f.Subject)
	}
	if f.UserID != "" || !f.AnyUser {
		q = q.Where("user_id = ?", f.UserID)
	}
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	var out []MemoryEntry
	if err := q.Order("used_at DESC, id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	return out, nil
}

// GetMemory implements MemoryStore.
func (s *Store) GetMemory(ctx context.Context, id int64) (*MemoryEntry, error) {
	var e MemoryEntry
	err := s.DB.WithContext(ctx).Take(&e, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read memory %d: %w", id, err)
	}
	return &e, nil
}

// DeleteMemory implements MemoryStore.
func (s *Store) DeleteMemory(ctx context.Context, id int64) error {
	res := s.DB.WithContext(ctx).Delete(&MemoryEntry{}, "id = ?", id)
	if res.Error != nil {
		return fmt.Errorf("delete memory %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// TouchMemories implements MemoryStore.
func (s *Store) TouchMemories(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.DB.WithContext(ctx).Model(&MemoryEntry{}).Where("id IN ?", ids).Update("used_at", at.UTC()).Error
	if err != nil {
		return fmt.Errorf("touch memories: %w", err)
	}
	return nil
}

// SearchMemories implements MemoryStore. The terms come from the service's
// tokenizer (letters and digits only); they are quoted anyway.
func (s *Store) SearchMemories(ctx context.Context, scope MemoryScope, terms []string, limit int) ([]MemoryHit, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	var out []MemoryHit
	var err error
	if s.Driver == DriverPostgres {
		quoted := make([]string, len(terms))
		for i, t := range terms {
			quoted[i] = "'" + strings.ReplaceAll(t, "'", "''") + "'"
		}
		err = s.DB.WithContext(ctx).Raw(`SELECT e.*, ts_rank(e.tsv, q) AS score
FROM memory_entries e, to_tsquery('simple', ?) q
WHERE e.tsv @@ q AND e.workspace = ? AND e.agent_id = ? AND e.subject = ? AND e.user_id = ?
ORDER BY score DESC, e.id DESC LIMIT ?`, strings.Join(quoted, " | "), scope.Workspace, scope.AgentID, scope.Subject, scope.UserID, limit).Scan(&out).Error
	} else {
		quoted := make([]string, len(terms))
		for i, t := range terms {
			quoted[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
		}
		err = s.DB.WithContext(ctx).Raw(`SELECT e.*, -bm25(memory_fts) AS score
FROM memory_fts JOIN memory_entries e ON e.id = memory_fts.rowid
WHERE memory_fts MATCH ? AND e.workspace = ? AND e.agent_id = ? AND e.subject = ? AND e.user_id = ?
ORDER BY score DESC, e.id DESC LIMIT ?`, strings.Join(quoted, " OR "), scope.Workspace, scope.AgentID, scope.Subject, scope.UserID, limit).Scan(&out).Error
	}
	if err != nil {
		return nil, fmt.Errorf("search memories: %w", err)
	}
	return out, nil
}

// memoryFullText is data migration 12: the full-text index of
// memory_entries. SQLite: an FTS5 table over the text, kept by triggers.
// PostgreSQL: a generated tsvector column with a GIN index.
func memoryFullText(_ context.Context, tx *gorm.DB, driver string) error {
	var stmts []string
	if driver == DriverPostgres {
		stmts = []string{
			`ALTER TABLE memory_entries ADD COLUMN IF NOT EXISTS tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED`,
			`CREATE INDEX IF NOT EXISTS idx_memory_entries_tsv ON memory_entries USING GIN (tsv)`,
		}
	} else {
		stmts = []string{
			`CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(text, content='memory_entries', content_rowid='id')`,
			`CREATE TRIGGER IF NOT EXISTS memory_entries_fts_ai AFTER INSERT ON memory_entries BEGIN
  INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text); END`,
			`CREATE TRIGGER IF NOT EXISTS memory_entries_fts_ad AFTER DELETE ON memory_entries BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text); END`,
			`CREATE TRIGGER IF NOT EXISTS memory_entries_fts_au AFTER UPDATE OF text ON memory_entries BEGIN
  INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
  INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text); END`,
			// Rows written before the index existed (none on a new database).
			`INSERT INTO memory_fts(memory_fts) VALUES ('rebuild')`,
		}
	}
	for _, q := range stmts {
		if err := tx.Exec(q).Error; err != nil {
			return fmt.Errorf("memory full-text index: %w", err)
		}
	}
	return nil
}
