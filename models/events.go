package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Event types written by the workboard. Other areas add their own types
// (prefix them with their area, e.g. "cost.").
const (
	EventRunStarted   = "run.started"
	EventRunFinished  = "run.finished"
	EventRunFailed    = "run.failed"
	EventRunCancelled = "run.cancelled"
	EventRunArtifact  = "run.artifact"
	// EventRunTool: a tool call of a run finished (tool, MCP server or
	// skill, is_error, duration; never arguments or results).
	EventRunTool = "run.tool"
	// EventRunTurn: an LLM turn of a run finished (once per turn, also
	// when the step was retried).
	EventRunTurn        = "run.turn"
	EventTaskCreated    = "task.created"
	EventTaskUpdated    = "task.updated"
	EventTaskDeleted    = "task.deleted"
	EventCommentCreated = "comment.created"
	EventCommentDeleted = "comment.deleted"
)

// eventsLockKey serializes event inserts on PostgreSQL (see insertEvent).
const eventsLockKey int64 = 0x4167656e74727932 // "Agentry2"

// Event is one entry of the event stream. Its ID orders the stream and is
// the SSE id clients resume from (Last-Event-ID).
//
// DedupeKey names the occurrence: inserting a second event with the same
// key does nothing, so a retried activity cannot emit an event twice.
type Event struct {
	ID      int64  `gorm:"primaryKey;autoIncrement"`
	Type    string `gorm:"size:64;not null;index"`
	TaskID  int64  `gorm:"index"`
	RunID   int64
	AgentID string `gorm:"size:100;index"`
	Attempt int
	// Payload is a JSON object with the type's own fields.
	Payload   string
	DedupeKey string `gorm:"size:191;not null;uniqueIndex"`
	CreatedAt time.Time
}

// eventJSON is the wire form of an event (SSE data, hooks).
type eventJSON struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	TaskID    int64           `json:"task_id,omitempty"`
	RunID     int64           `json:"run_id,omitempty"`
	AgentID   string          `json:"agent_id,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	Payload   json.RawMessage `json:"payload"`
}

// MarshalJSON writes the event with its payload as a JSON object.
func (e Event) MarshalJSON() ([]byte, error) {
	payload := json.RawMessage(e.Payload)
	if len(payload) == 0 || !json.Valid(payload) {
		payload = json.RawMessage("{}")
	}
	return json.Marshal(eventJSON{ID: e.ID, Type: e.Type, TaskID: e.TaskID, RunID: e.RunID, AgentID: e.AgentID,
		Attempt: e.Attempt, CreatedAt: e.CreatedAt, Payload: payload})
}

// UnmarshalJSON reads the wire form back (clients and tests).
func (e *Event) UnmarshalJSON(b []byte) error {
	var w eventJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Event{ID: w.ID, Type: w.Type, TaskID: w.TaskID, RunID: w.RunID, AgentID: w.AgentID, Attempt: w.Attempt,
		CreatedAt: w.CreatedAt, Payload: string(w.Payload)}
	return nil
}

// PayloadMap decodes the payload (nil when it is empty or not an object).
func (e Event) PayloadMap() map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(e.Payload), &m)
	return m
}

// NewEvent builds an event of a type with a payload (any JSON-encodable
// value, usually a map). An empty dedupeKey gets a random one: use that
// only for occurrences that cannot be repeated by a retry.
func NewEvent(typ, dedupeKey string, payload any) Event {
	if dedupeKey == "" {
		dedupeKey = typ + ":" + uuid.NewString()
	}
	raw := "{}"
	if payload != nil {
		if b, err := json.Marshal(payload); err == nil {
			raw = string(b)
		}
	}
	return Event{Type: typ, DedupeKey: dedupeKey, Payload: raw}
}

// InsertEvent appends an event unless one with its dedupe key exists. It
// reports whether the event was inserted; ev.ID is set when it was.
func (s *Store) InsertEvent(ctx context.Context, ev *Event) (bool, error) {
	var inserted bool
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		inserted, err = insertEvent(tx, s.Driver, ev)
		return err
	})
	return inserted, err
}

// insertEvent appends ev inside the transaction tx.
//
// Readers tail the table by id (id > last seen), so ids must become visible
// in increasing order. SQLite has a single writer, so commit order is id
// order. PostgreSQL assigns sequence values at insert time and concurrent
// transactions may commit out of that order, which would let a tailer skip
// an event; a transaction-scoped advisory lock taken just before the insert
// makes id assignment and commit happen in the same order. Callers insert
// the event last in their transaction to hold the lock briefly.
func insertEvent(tx *gorm.DB, driver string, ev *Event) (bool, error) {
	if ev.Type == "" {
		return false, fmt.Errorf("insert event: type is empty")
	}
	if ev.DedupeKey == "" {
		ev.DedupeKey = ev.Type + ":" + uuid.NewString()
	}
	if ev.Payload == "" {
		ev.Payload = "{}"
	}
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = time.Now().UTC()
	}
	if driver == DriverPostgres {
		if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", eventsLockKey).Error; err != nil {
			return false, fmt.Errorf("insert event %s: lock: %w", ev.Type, err)
		}
	}
	res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "dedupe_key"}}, DoNothing: true}).Create(ev)
	if res.Error != nil {
		return false, fmt.Errorf("insert event %s: %w", ev.Type, res.Error)
	}
	if res.RowsAffected == 0 {
		ev.ID = 0
		return false, nil
	}
	return true, nil
}

// EventFilter selects events. Empty fields select everything.
type EventFilter struct {
	// TypePrefixes keep events whose type starts with one of them
	// ("run." or "run.finished").
	TypePrefixes []string
	TaskID       int64
	AgentID      string
}

// Match reports whether ev passes the filter (the in-memory twin of the
// SQL in EventsAfter).
func (f EventFilter) Match(ev Event) bool {
	if f.TaskID != 0 && ev.TaskID != f.TaskID {
		return false
	}
	if f.AgentID != "" && ev.AgentID != f.AgentID {
		return false
	}
	if len(f.TypePrefixes) == 0 {
		return true
	}
	for _, p := range f.TypePrefixes {
		if strings.HasPrefix(ev.Type, p) {
			return true
		}
	}
	return false
}

// EventsAfter returns up to limit events with an id above after that pass
// the filter, in id order.
func (s *Store) EventsAfter(ctx context.Context, after int64, f EventFilter, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = 500
	}
	q := s.DB.WithContext(ctx).Where("id > ?", after)
	if f.TaskID != 0 {
		q = q.Where("task_id = ?", f.TaskID)
	}
	if f.AgentID != "" {
		q = q.Where("agent_id = ?", f.AgentID)
	}
	if len(f.TypePrefixes) > 0 {
		var conds []string
		var args []any
		for _, p := range f.TypePrefixes {
			conds = append(conds, `type LIKE ? ESCAPE '\'`)
			args = append(args, likePrefix(p))
		}
		q = q.Where("("+strings.Join(conds, " OR ")+")", args...)
	}
	var evs []Event
	if err := q.Order("id").Limit(limit).Find(&evs).Error; err != nil {
		return nil, fmt.Errorf("read events after %d: %w", after, err)
	}
	return evs, nil
}

// LastEventID is the id of the newest event, 0 when there is none.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.DB.WithContext(ctx).Model(&Event{}).Select("COALESCE(MAX(id), 0)").Scan(&id).Error; err != nil {
		return 0, fmt.Errorf("read last event id: %w", err)
	}
	return id, nil
}

// likePrefix escapes LIKE wildcards in p and appends %.
func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}
