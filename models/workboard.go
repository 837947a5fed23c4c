package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The workboard: tasks, their runs, the artifacts runs produce and the
// comments people leave. Every change is written together with its event
// (see events.go) in one transaction, so the event stream never shows a
// change that did not happen or misses one that did. docs/workboard.md
// describes the rules these methods enforce.

// Task statuses, in the order the list endpoint returns them.
const (
	TaskTodo        = "todo"
	TaskRunning     = "running"
	TaskNeedsReview = "needs_review"
	TaskDone        = "done"
	TaskFailed      = "failed"
)

// TaskStatuses returns the statuses in the spec's authoritative order.
func TaskStatuses() []string {
	return []string{TaskTodo, TaskRunning, TaskNeedsReview, TaskDone, TaskFailed}
}

// Task priorities. An omitted or empty priority is normal.
const (
	PriorityLow    = "low"
	PriorityNormal = "normal"
	PriorityHigh   = "high"
	PriorityUrgent = "urgent"
)

// TaskPriorities lists the allowed priorities, lowest first.
func TaskPriorities() []string {
	return []string{PriorityLow, PriorityNormal, PriorityHigh, PriorityUrgent}
}

// Run statuses. Queued and running are active; the others are final.
const (
	RunQueued    = "queued"
	RunRunning   = "running"
	RunFinished  = "finished"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	// RunWaiting is a run parked for a person (or budget): active, with
	// TaskRun.WaitingFor saying what it waits for.
	RunWaiting = "waiting"
)

// RunActive reports whether a run status is queued, running or waiting.
func RunActive(status string) bool {
	return status == RunQueued || status == RunRunning || status == RunWaiting
}

// Comment kinds and review decisions.
const (
	CommentNote   = "note"
	CommentReview = "review"

	DecisionAccept = "accept"
	DecisionReject = "reject"
)

// Limits of task and comment fields.
const (
	MaxTitleRunes       = 500
	MaxDescriptionBytes = 64 << 10
	MaxAgentIDRunes     = 100
	MaxOwnerRunes       = 191
	MaxTags             = 50
	MaxTagRunes         = 64
	MaxCommentBytes     = 64 << 10
	MaxAuthorRunes      = 191
	// MaxReplyBytes bounds the reply kept on a run record.
	MaxReplyBytes = 256 << 10
)

// Task is one card of the board.
type Task struct {
	ID          int64  `gorm:"primaryKey;autoIncrement"`
	Title       string `gorm:"not null"`
	Description string
	AgentID     string `gorm:"size:100;index"`
	Status      string `gorm:"size:16;not null;index"`
	Owner       string `gorm:"size:191"`
	Priority    string `gorm:"size:16;not null"`
	// Tags is a JSON array of strings.
	Tags      string
	DueAt     *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TagList decodes Tags (never nil).
func (t Task) TagList() []string {
	var tags []string
	_ = json.Unmarshal([]byte(t.Tags), &tags)
	if tags == nil {
		tags = []string{}
	}
	return tags
}

// MarshalJSON writes the API form of a task.
func (t Task) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID          int64      `json:"id"`
		Title       string     `json:"title"`
		Description string     `json:"description"`
		AgentID     string     `json:"agent_id"`
		Status      string     `json:"status"`
		Owner       string     `json:"owner"`
		Priority    string     `json:"priority"`
		Tags        []string   `json:"tags"`
		DueAt       *time.Time `json:"due_at"`
		CreatedAt   time.Time  `json:"created_at"`
		UpdatedAt   time.Time  `json:"updated_at"`
	}{t.ID, t.Title, t.Description, t.AgentID, t.Status, t.Owner, t.Priority, t.TagList(), t.DueAt, t.CreatedAt, t.UpdatedAt})
}

// TaskRun is one execution of a task by its agent (a TaskRun workflow).
type TaskRun struct {
	ID      int64  `gorm:"primaryKey;autoIncrement"`
	TaskID  int64  `gorm:"not null;uniqueIndex:idx_task_runs_task_attempt,priority:1"`
	Attempt int    `gorm:"not null;uniqueIndex:idx_task_runs_task_attempt,priority:2"`
	Status  string `gorm:"size:16;not null;index"`
	AgentID string `gorm:"size:100;index"`
	// Trigger is what started the run (api, retry).
	Trigger string `gorm:"size:32"`
	// RetryOf is the failed run this one retries (trigger retry): it went
	// on from that run's last recorded steps (docs/retry.md).
	RetryOf *int64
	// ReusedTurns is how many LLM turns a retry took over from RetryOf
	// instead of asking the provider again.
	ReusedTurns int
	// Snapshot is the content hash of the agent as resolved for the run
	// (internal/runlog): what a retry goes on with.
	Snapshot      string `gorm:"size:64"`
	WorkflowID    string `gorm:"size:191"`
	TemporalRunID string `gorm:"size:64"`
	// ActiveTaskID is TaskID while the run is queued or running and NULL
	// afterwards. Its unique index is what lets the database hold at most
	// one active run per task, even when two requests race (NULLs never
	// collide in SQLite or PostgreSQL).
	ActiveTaskID *int64 `gorm:"uniqueIndex"`
	// WaitingFor says what a waiting run waits for (approval), else empty.
	WaitingFor   string `gorm:"size:16"`
	Error        string
	StopReason   string `gorm:"size:32"`
	Turns        int
	InputTokens  int64
	OutputTokens int64
	// CostMicros is the ledger's settled cost of the run's LLM calls, summed when the run ends.
	CostMicros int64
	Reply      string
	CreatedAt  time.Time
	// StartedAt is when a worker began the run (run.started).
	StartedAt  *time.Time
	FinishedAt *time.Time
	UpdatedAt  time.Time
	// StalledReason is filled by reads of one active run from Temporal (a
	// step failing again and again, e.g. on a full database); not stored.
	StalledReason string `gorm:"-"`
}

// MarshalJSON writes the API form of a run.
func (r TaskRun) MarshalJSON() ([]byte, error) {
	var duration *int64
	if r.StartedAt != nil && r.FinishedAt != nil {
		ms := r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
		duration = &ms
	}
	return json.Marshal(struct {
		ID            int64      `json:"id"`
		TaskID        int64      `json:"task_id"`
		Attempt       int        `json:"attempt"`
		Status        string     `json:"status"`
		WaitingFor    string     `json:"waiting_for,omitempty"`
		StalledReason string     `json:"stalled_reason,omitempty"`
		AgentID       string     `json:"agent_id"`
		Trigger       string     `json:"trigger"`
		WorkflowID    string     `json:"workflow_id"`
		TemporalRunID string     `json:"temporal_run_id"`
		CreatedAt     time.Time  `json:"created_at"`
		StartedAt     *time.Time `json:"started_at"`
		FinishedAt    *time.Time `json:"finished_at"`
		DurationMS    *int64     `json:"duration_ms"`
		Error         string     `json:"error"`
		StopReason    string     `json:"stop_reason"`
		Turns         int        `json:"turns"`
		InputTokens   int64      `json:"input_tokens"`
		OutputTokens  int64      `json:"output_tokens"`
		CostMicros    int64      `json:"cost_micros"`
		CostUSD       float64    `json:"cost_usd"`
		Reply         string     `json:"reply"`
		RetryOf       *int64     `json:"retry_of,omitempty"`
		ReusedTurns   int        `json:"reused_turns,omitempty"`
	}{r.ID, r.TaskID, r.Attempt, r.Status, r.WaitingFor, r.StalledReason, r.AgentID, r.Trigger, r.WorkflowID, r.TemporalRunID, r.CreatedAt, r.StartedAt,
		r.FinishedAt, duration, r.Error, r.StopReason, r.Turns, r.InputTokens, r.OutputTokens, r.CostMicros,
		float64(r.CostMicros) / 1e6, r.Reply, r.RetryOf, r.ReusedTurns})
}

// Artifact is a file a run wrote, attached to the run's task.
type Artifact struct {
	ID     int64 `gorm:"primaryKey;autoIncrement" json:"id"`
	TaskID int64 `gorm:"not null;index" json:"task_id"`
	RunID  int64 `gorm:"not null;uniqueIndex:idx_artifacts_run_path,priority:1" json:"run_id"`
	// Path is absolute, inside the workspace's artifact area.
	Path string `gorm:"size:1024;not null;uniqueIndex:idx_artifacts_run_path,priority:2" json:"path"`
	// Name is the path relative to the run's work directory.
	Name      string    `gorm:"size:1024" json:"name"`
	SizeBytes int64     `json:"size_bytes"`
	Tool      string    `gorm:"size:100" json:"tool"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"-"`
}

// Comment is a note or review on a task.
type Comment struct {
	ID     int64  `gorm:"primaryKey;autoIncrement" json:"id"`
	TaskID int64  `gorm:"not null;index" json:"task_id"`
	Author string `gorm:"size:191" json:"author"`
	Body   string `gorm:"not null" json:"body"`
	Kind   string `gorm:"size:16;not null" json:"kind"`
	// Decision is accept or reject on a review that decided the task.
	Decision  string    `gorm:"size:16" json:"decision,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// ValidationError is bad input, naming the field.
type ValidationError struct {
	Field string
	Msg   string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Msg }

func invalidField(field, format string, args ...any) error {
	return &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// NotFoundError names the missing row; errors.Is(err, ErrNotFound) holds.
type NotFoundError struct {
	Kind string // task, run, artifact, comment
	ID   int64
}

func (e *NotFoundError) Error() string        { return fmt.Sprintf("%s %d not found", e.Kind, e.ID) }
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ConflictError is a request the current state refuses (HTTP 409).
// errors.Is matches conflicts of the same Code, e.g. ErrRunActive.
type ConflictError struct {
	Code string
	Msg  string
	// RunID is the run concerned, when there is one.
	RunID int64
	// Status is the run's current status, when the conflict is about it.
	Status string
}

func (e *ConflictError) Error() string { return e.Msg }
func (e *ConflictError) Is(target error) bool {
	t, ok := target.(*ConflictError)
	return ok && t.Code == e.Code
}

// Conflict sentinels for errors.Is.
var (
	ErrRunActive    = &ConflictError{Code: "run_active", Msg: "a run is already active for this task"}
	ErrRunNotActive = &ConflictError{Code: "run_not_active", Msg: "the run is not active"}
	ErrNotInReview  = &ConflictError{Code: "not_in_review", Msg: "the task is not awaiting review"}
	// ErrRunNotRetryable: only a failed (or timed-out) run can be retried.
	ErrRunNotRetryable = &ConflictError{Code: "run_not_retryable", Msg: "only a failed run can be retried"}
)

// TaskFields are the writable fields of a task. A nil field was not sent.
type TaskFields struct {
	Title       *string
	Description *string
	AgentID     *string
	Status      *string
	Owner       *string
	Priority    *string
	// Tags replaces the tags; a nil slice inside clears them.
	Tags *[]string
	// DueAt is an RFC 3339 timestamp; "" clears the due date.
	DueAt *string
}

// apply validates f and writes it into t, returning the names of the
// fields whose value changed. Nothing is written when a field is invalid.
func (f TaskFields) apply(t *Task) ([]string, error) {
	next := *t
	if f.Title != nil {
		title := strings.TrimSpace(*f.Title)
		if title == "" {
			return nil, invalidField("title", "must not be empty")
		}
		if n := utf8.RuneCountInString(title); n > MaxTitleRunes {
			return nil, invalidField("title", "is %d characters long; at most %d are allowed", n, MaxTitleRunes)
		}
		next.Title = title
	}
	if f.Description != nil {
		if len(*f.Description) > MaxDescriptionBytes {
			return nil, invalidField("description", "is longer than %d bytes", MaxDescriptionBytes)
		}
		next.Description = *f.Description
	}
	if f.AgentID != nil {
		id := strings.TrimSpace(*f.AgentID)
		if utf8.RuneCountInString(id) > MaxAgentIDRunes {
			return nil, invalidField("agent_id", "is longer than %d characters", MaxAgentIDRunes)
		}
		next.AgentID = id
	}
	if f.Status != nil {
		st := strings.TrimSpace(*f.Status)
		if !slices.Contains(TaskStatuses(), st) {
			return nil, invalidField("status", "%q is not one of %s", *f.Status, strings.Join(TaskStatuses(), ", "))
		}
		next.Status = st
	}
	if f.Owner != nil {
		owner := strings.TrimSpace(*f.Owner)
		if utf8.RuneCountInString(owner) > MaxOwnerRunes {
			return nil, invalidField("owner", "is longer than %d characters", MaxOwnerRunes)
		}
		next.Owner = owner
	}
	if f.Priority != nil {
		p := strings.ToLower(strings.TrimSpace(*f.Priority))
		if p == "" {
			p = PriorityNormal
		}
		if !slices.Contains(TaskPriorities(), p) {
			return nil, invalidField("priority", "%q is not one of %s", *f.Priority, strings.Join(TaskPriorities(), ", "))
		}
		next.Priority = p
	}
	if f.Tags != nil {
		tags, err := cleanTags(*f.Tags)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(tags)
		next.Tags = string(b)
	}
	if f.DueAt != nil {
		raw := strings.TrimSpace(*f.DueAt)
		if raw == "" {
			next.DueAt = nil
		} else {
			due, err := time.Parse(time.RFC3339, raw)
			if err != nil {
				return nil, invalidField("due_at", "%q is not an RFC 3339 timestamp (like 2026-01-31T17:00:00Z)", *f.DueAt)
			}
			due = due.UTC()
			next.DueAt = &due
		}
	}
	var changed []string
	add := func(name string, differs bool) {
		if differs {
			changed = append(changed, name)
		}
	}
	add("title", next.Title != t.Title)
	add("description", next.Description != t.Description)
	add("agent_id", next.AgentID != t.AgentID)
	add("status", next.Status != t.Status)
	add("owner", next.Owner != t.Owner)
	add("priority", next.Priority != t.Priority)
	add("tags", next.Tags != t.Tags && !(isEmptyTags(next.Tags) && isEmptyTags(t.Tags)))
	add("due_at", !sameTime(next.DueAt, t.DueAt))
	*t = next
	return changed, nil
}

func cleanTags(in []string) ([]string, error) {
	if len(in) > MaxTags {
		return nil, invalidField("tags", "has %d tags; at most %d are allowed", len(in), MaxTags)
	}
	out := make([]string, 0, len(in))
	for i, tag := range in {
		tag = strings.TrimSpace(tag)
		if tag == "" {
			return nil, invalidField("tags", "tag %d is empty", i)
		}
		if utf8.RuneCountInString(tag) > MaxTagRunes {
			return nil, invalidField("tags", "tag %d is longer than %d characters", i, MaxTagRunes)
		}
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	return out, nil
}

func isEmptyTags(s string) bool { return s == "" || s == "[]" || s == "null" }

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// Page selects a slice of a list ordered by id. Cursor is the id of the
// last row of the previous page (0 for the first page).
type Page struct {
	Limit  int
	Cursor int64
}

// DefaultPageLimit and MaxPageLimit bound list pages.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 500
)

func (p Page) limit() int {
	switch {
	case p.Limit <= 0:
		return DefaultPageLimit
	case p.Limit > MaxPageLimit:
		return MaxPageLimit
	}
	return p.Limit
}

// TaskFilter selects tasks for ListTasks.
type TaskFilter struct {
	Status  string
	AgentID string
	Page    Page
}

// CreateTask validates f and inserts a task (status todo and priority
// normal unless given), with its task.created event.
func (s *Store) CreateTask(ctx context.Context, f TaskFields) (*Task, error) {
	if f.Title == nil {
		return nil, invalidField("title", "is required")
	}
	t := Task{Status: TaskTodo, Priority: PriorityNormal, Tags: "[]"}
	if _, err := f.apply(&t); err != nil {
		return nil, err
	}
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&t).Error; err != nil {
			return fmt.Errorf("insert task: %w", err)
		}
		ev := taskEvent(EventTaskCreated, fmt.Sprintf("task.created:%d", t.ID), &t, nil)
		_, err := insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

func taskEvent(typ, key string, t *Task, changed []string) Event {
	payload := map[string]any{"task": t}
	if changed != nil {
		payload["changed"] = changed
	}
	ev := NewEvent(typ, key, payload)
	ev.TaskID, ev.AgentID = t.ID, t.AgentID
	return ev
}

// GetTask returns a task.
func (s *Store) GetTask(ctx context.Context, id int64) (*Task, error) {
	return getTask(s.DB.WithContext(ctx), id)
}

func getTask(db *gorm.DB, id int64) (*Task, error) {
	var t Task
	err := db.First(&t, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &NotFoundError{Kind: "task", ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("read task %d: %w", id, err)
	}
	return &t, nil
}

// lockTask reads a task inside tx and keeps others from changing it (or
// its runs) until tx ends. SQLite transactions here hold the database's
// write lock from BEGIN, so only PostgreSQL needs the row lock.
func (s *Store) lockTask(tx *gorm.DB, id int64) (*Task, error) {
	if s.Driver == DriverPostgres {
		tx = tx.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	return getTask(tx, id)
}

// UpdateTask applies the sent fields. A change writes a task.updated event
// naming the changed fields; a patch that changes nothing writes nothing.
func (s *Store) UpdateTask(ctx context.Context, id int64, f TaskFields) (*Task, error) {
	var t *Task
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if t, err = s.lockTask(tx, id); err != nil {
			return err
		}
		changed, err := f.apply(t)
		if err != nil || len(changed) == 0 {
			return err
		}
		t.UpdatedAt = time.Now().UTC()
		if err := tx.Model(&Task{}).Where("id = ?", id).Updates(map[string]any{
			"title": t.Title, "description": t.Description, "agent_id": t.AgentID, "status": t.Status, "owner": t.Owner,
			"priority": t.Priority, "tags": t.Tags, "due_at": t.DueAt, "updated_at": t.UpdatedAt,
		}).Error; err != nil {
			return fmt.Errorf("update task %d: %w", id, err)
		}
		ev := taskEvent(EventTaskUpdated, "", t, changed)
		_, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// DeleteTask removes a task with its comments, runs and artifact records.
// A task with an active run is refused (ErrRunActive): cancel the run
// first. The deleted task is returned so the caller can remove its files.
func (s *Store) DeleteTask(ctx context.Context, id int64) (*Task, error) {
	var t *Task
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if t, err = s.lockTask(tx, id); err != nil {
			return err
		}
		if run, err := activeRun(tx, id); err == nil {
			return &ConflictError{Code: ErrRunActive.Code, RunID: run.ID,
				Msg: fmt.Sprintf("task %d has an active run (run %d, %s); cancel it first with POST /api/v1/workboard/tasks/%d/runs/%d/cancel", id, run.ID, run.Status, id, run.ID)}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		for _, m := range []any{&Comment{}, &Artifact{}, &TaskRun{}} {
			if err := tx.Where("task_id = ?", id).Delete(m).Error; err != nil {
				return fmt.Errorf("delete task %d: %w", id, err)
			}
		}
		if err := tx.Delete(&Task{}, id).Error; err != nil {
			return fmt.Errorf("delete task %d: %w", id, err)
		}
		ev := NewEvent(EventTaskDeleted, fmt.Sprintf("task.deleted:%d", id), map[string]any{"task": t})
		ev.TaskID, ev.AgentID = t.ID, t.AgentID
		_, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ListTasks returns a page of tasks in id order (creation order) and the
// cursor of the next page (0 when this is the last).
func (s *Store) ListTasks(ctx context.Context, f TaskFilter) ([]Task, int64, error) {
	if f.Status != "" && !slices.Contains(TaskStatuses(), f.Status) {
		return nil, 0, invalidField("status", "%q is not one of %s", f.Status, strings.Join(TaskStatuses(), ", "))
	}
	limit := f.Page.limit()
	q := s.DB.WithContext(ctx).Where("id > ?", f.Page.Cursor)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.AgentID != "" {
		q = q.Where("agent_id = ?", f.AgentID)
	}
	var tasks []Task
	if err := q.Order("id").Limit(limit + 1).Find(&tasks).Error; err != nil {
		return nil, 0, fmt.Errorf("list tasks: %w", err)
	}
	return pageOf(tasks, limit, func(t Task) int64 { return t.ID })
}

// pageOf trims a limit+1 result to limit rows and returns the cursor of
// the next page (0 when there is none).
func pageOf[T any](rows []T, limit int, id func(T) int64) ([]T, int64, error) {
	if rows == nil {
		rows = []T{}
	}
	if len(rows) <= limit {
		return rows, 0, nil
	}
	rows = rows[:limit]
	return rows, id(rows[limit-1]), nil
}

// NewRun is a run to create.
type NewRun struct {
	TaskID     int64
	AgentID    string
	Trigger    string
	WorkflowID string
	Snapshot   string
	// RetryOf and ReusedTurns are set for a retry.
	RetryOf     *int64
	ReusedTurns int
}

// CreateRun inserts a queued run with the task's next attempt number.
// ErrRunActive (a *ConflictError naming the active run) when the task
// already has an active run: the database, not a read-then-write check,
// decides, so of two racing requests exactly one gets the run.
func (s *Store) CreateRun(ctx context.Context, nr NewRun) (*TaskRun, error) {
	var run TaskRun
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		t, err := s.lockTask(tx, nr.TaskID)
		if err != nil {
			return err
		}
		if strings.TrimSpace(t.AgentID) == "" {
			return invalidField("agent_id", "task %d has no agent_id; set one before starting a run", t.ID)
		}
		var attempt int
		if err := tx.Model(&TaskRun{}).Where("task_id = ?", t.ID).Select("COALESCE(MAX(attempt), 0)").Scan(&attempt).Error; err != nil {
			return fmt.Errorf("read attempts of task %d: %w", t.ID, err)
		}
		now := time.Now().UTC()
		active := t.ID
		run = TaskRun{TaskID: t.ID, Attempt: attempt + 1, Status: RunQueued, AgentID: nr.AgentID, Trigger: nr.Trigger,
			WorkflowID: nr.WorkflowID, ActiveTaskID: &active, CreatedAt: now, UpdatedAt: now,
			Snapshot: nr.Snapshot, RetryOf: nr.RetryOf, ReusedTurns: nr.ReusedTurns}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&run)
		if res.Error != nil {
			return fmt.Errorf("insert run of task %d: %w", t.ID, res.Error)
		}
		if res.RowsAffected == 0 {
			return runActiveError(tx, t.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &run, nil
}

func runActiveError(tx *gorm.DB, taskID int64) error {
	e := &ConflictError{Code: ErrRunActive.Code, Msg: fmt.Sprintf("task %d already has an active run", taskID)}
	if run, err := activeRun(tx, taskID); err == nil {
		e.RunID = run.ID
		e.Msg = fmt.Sprintf("task %d already has an active run (run %d, %s)", taskID, run.ID, run.Status)
	}
	return e
}

// SetRunTemporalID records the Temporal run id of a freshly started workflow.
func (s *Store) SetRunTemporalID(ctx context.Context, runID int64, temporalRunID string) error {
	err := s.DB.WithContext(ctx).Model(&TaskRun{}).Where("id = ?", runID).
		Update("temporal_run_id", temporalRunID).Error
	if err != nil {
		return fmt.Errorf("record workflow of run %d: %w", runID, err)
	}
	return nil
}

// DeleteQueuedRun removes a run whose workflow could not be started, so
// the refused request leaves nothing behind. Runs that already started are
// kept.
func (s *Store) DeleteQueuedRun(ctx context.Context, runID int64) error {
	err := s.DB.WithContext(ctx).Where("id = ? AND status = ?", runID, RunQueued).Delete(&TaskRun{}).Error
	if err != nil {
		return fmt.Errorf("remove run %d: %w", runID, err)
	}
	return nil
}

// UnstartedRuns returns up to limit runs queued before `before` whose
// workflow was never noted as started (no Temporal run id), oldest first.
func (s *Store) UnstartedRuns(ctx context.Context, before time.Time, limit int) ([]TaskRun, error) {
	var out []TaskRun
	err := s.DB.WithContext(ctx).Where("status = ? AND temporal_run_id = '' AND created_at < ?", RunQueued, before.UTC()).
		Order("created_at").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read unstarted runs: %w", err)
	}
	return out, nil
}

// GetRun returns a run of a task (404 when either is unknown or the run
// belongs to another task).
func (s *Store) GetRun(ctx context.Context, taskID, runID int64) (*TaskRun, error) {
	var run TaskRun
	err := s.DB.WithContext(ctx).Where("id = ? AND task_id = ?", runID, taskID).First(&run).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		if _, terr := s.GetTask(ctx, taskID); terr != nil {
			return nil, terr
		}
		return nil, &NotFoundError{Kind: "run", ID: runID}
	}
	if err != nil {
		return nil, fmt.Errorf("read run %d: %w", runID, err)
	}
	return &run, nil
}

// RunByID returns a run.
func (s *Store) RunByID(ctx context.Context, runID int64) (*TaskRun, error) {
	return runByID(s.DB.WithContext(ctx), runID)
}

func runByID(db *gorm.DB, runID int64) (*TaskRun, error) {
	var run TaskRun
	err := db.First(&run, runID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &NotFoundError{Kind: "run", ID: runID}
	}
	if err != nil {
		return nil, fmt.Errorf("read run %d: %w", runID, err)
	}
	return &run, nil
}

// ActiveRun returns the queued or running run of a task, or ErrNotFound.
func (s *Store) ActiveRun(ctx context.Context, taskID int64) (*TaskRun, error) {
	return activeRun(s.DB.WithContext(ctx), taskID)
}

func activeRun(db *gorm.DB, taskID int64) (*TaskRun, error) {
	var run TaskRun
	err := db.Where("active_task_id = ?", taskID).First(&run).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read active run of task %d: %w", taskID, err)
	}
	return &run, nil
}

// ListRuns returns a page of a task's runs, newest first, the total number
// of its runs and the next page's cursor (0 when this is the last).
func (s *Store) ListRuns(ctx context.Context, taskID int64, p Page) ([]TaskRun, int64, int64, error) {
	if _, err := s.GetTask(ctx, taskID); err != nil {
		return nil, 0, 0, err
	}
	limit := p.limit()
	q := s.DB.WithContext(ctx).Where("task_id = ?", taskID)
	if p.Cursor > 0 {
		q = q.Where("id < ?", p.Cursor)
	}
	var runs []TaskRun
	if err := q.Order("id DESC").Limit(limit + 1).Find(&runs).Error; err != nil {
		return nil, 0, 0, fmt.Errorf("list runs of task %d: %w", taskID, err)
	}
	var total int64
	if err := s.DB.WithContext(ctx).Model(&TaskRun{}).Where("task_id = ?", taskID).Count(&total).Error; err != nil {
		return nil, 0, 0, fmt.Errorf("count runs of task %d: %w", taskID, err)
	}
	runs, next, err := pageOf(runs, limit, func(r TaskRun) int64 { return r.ID })
	return runs, total, next, err
}

// MarkRunStarted moves a queued run to running (and its task to running)
// with the run.started event. Repeating it (a retried activity) changes
// nothing. A run that already ended gives ErrRunNotActive.
func (s *Store) MarkRunStarted(ctx context.Context, runID int64) (*TaskRun, error) {
	var run *TaskRun
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if run, err = runByID(tx, runID); err != nil {
			return err
		}
		if !RunActive(run.Status) {
			return &ConflictError{Code: ErrRunNotActive.Code, RunID: runID, Msg: fmt.Sprintf("run %d already ended (%s)", runID, run.Status)}
		}
		if run.Status == RunQueued {
			now := time.Now().UTC()
			run.Status, run.StartedAt, run.UpdatedAt = RunRunning, &now, now
			if err := tx.Model(&TaskRun{}).Where("id = ?", runID).
				Updates(map[string]any{"status": RunRunning, "started_at": now, "updated_at": now}).Error; err != nil {
				return fmt.Errorf("start run %d: %w", runID, err)
			}
			if err := tx.Model(&Task{}).Where("id = ?", run.TaskID).
				Updates(map[string]any{"status": TaskRunning, "updated_at": now}).Error; err != nil {
				return fmt.Errorf("start run %d: task %d: %w", runID, run.TaskID, err)
			}
		}
		payload := map[string]any{"workflow_id": run.WorkflowID, "trigger": run.Trigger, "task_status": TaskRunning}
		if run.RetryOf != nil {
			payload["retry_of"], payload["reused_turns"] = *run.RetryOf, run.ReusedTurns
		}
		ev := runEvent(EventRunStarted, fmt.Sprintf("run.started:%d", runID), run, payload)
		_, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

func runEvent(typ, key string, run *TaskRun, payload map[string]any) Event {
	ev := NewEvent(typ, key, payload)
	ev.TaskID, ev.RunID, ev.AgentID, ev.Attempt = run.TaskID, run.ID, run.AgentID, run.Attempt
	return ev
}

// RunOutcome is how a run ended.
type RunOutcome struct {
	RunID int64
	// Status is RunFinished, RunFailed or RunCancelled.
	Status       string
	Error        string
	TimedOut     bool
	Reply        string
	StopReason   string
	Turns        int
	InputTokens  int64
	OutputTokens int64
}

// taskStatusAfter is the task status a run outcome moves the task to.
func taskStatusAfter(runStatus string) string {
	switch runStatus {
	case RunFinished:
		return TaskNeedsReview
	case RunCancelled:
		return TaskTodo
	}
	return TaskFailed
}

// FinishRun records the end of an active run, moves its task (finished ->
// needs_review, failed -> failed, cancelled -> todo) and writes the run's
// one terminal event (run.finished, run.failed or run.cancelled). A run
// that already ended is left as it is: the first outcome recorded wins and
// applied is false.
func (s *Store) FinishRun(ctx context.Context, o RunOutcome) (run *TaskRun, applied bool, err error) {
	evType := map[string]string{RunFinished: EventRunFinished, RunFailed: EventRunFailed, RunCancelled: EventRunCancelled}[o.Status]
	if evType == "" {
		return nil, false, fmt.Errorf("finish run %d: %q is not a final status", o.RunID, o.Status)
	}
	if len(o.Reply) > MaxReplyBytes {
		o.Reply = truncateUTF8(o.Reply, MaxReplyBytes)
	}
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if run, err = runByID(tx, o.RunID); err != nil {
			return err
		}
		if !RunActive(run.Status) {
			return nil
		}
		now := time.Now().UTC()
		// The run's cost is what the ledger settled for its LLM calls: set
		// from the sum (not added), so recording an outcome is idempotent.
		var cost int64
		if err := tx.Model(&LedgerEntry{}).Where("run_id = ?", TaskRunLedgerID(run.ID)).
			Select("COALESCE(SUM(cost_micros), 0)").Scan(&cost).Error; err != nil {
			return fmt.Errorf("finish run %d: cost: %w", run.ID, err)
		}
		run.CostMicros = cost
		run.Status, run.Error, run.Reply, run.StopReason = o.Status, o.Error, o.Reply, o.StopReason
		run.Turns, run.InputTokens, run.OutputTokens = o.Turns, o.InputTokens, o.OutputTokens
		run.FinishedAt, run.ActiveTaskID, run.UpdatedAt, run.WaitingFor = &now, nil, now, ""
		if err := closeApprovals(tx, run.ID, now); err != nil {
			return err
		}
		if err := tx.Model(&TaskRun{}).Where("id = ?", run.ID).Updates(map[string]any{
			"waiting_for": "", "status": run.Status, "error": run.Error, "reply": run.Reply, "stop_reason": run.StopReason,
			"turns": run.Turns, "input_tokens": run.InputTokens, "output_tokens": run.OutputTokens,
			"finished_at": now, "active_task_id": nil, "updated_at": now, "cost_micros": cost,
		}).Error; err != nil {
			return fmt.Errorf("finish run %d: %w", run.ID, err)
		}
		taskStatus := taskStatusAfter(o.Status)
		if err := tx.Model(&Task{}).Where("id = ?", run.TaskID).
			Updates(map[string]any{"status": taskStatus, "updated_at": now}).Error; err != nil {
			return fmt.Errorf("finish run %d: task %d: %w", run.ID, run.TaskID, err)
		}
		var artifacts int64
		if err := tx.Model(&Artifact{}).Where("run_id = ?", run.ID).Count(&artifacts).Error; err != nil {
			return fmt.Errorf("finish run %d: count artifacts: %w", run.ID, err)
		}
		payload := map[string]any{
			"status": run.Status, "task_status": taskStatus, "workflow_id": run.WorkflowID,
			"turns": run.Turns, "input_tokens": run.InputTokens, "output_tokens": run.OutputTokens,
			"artifacts": artifacts, "cost_micros": cost,
		}
		if run.StartedAt != nil {
			payload["duration_ms"] = now.Sub(*run.StartedAt).Milliseconds()
		}
		if run.StopReason != "" {
			payload["stop_reason"] = run.StopReason
		}
		if run.Error != "" {
			payload["error"] = run.Error
		}
		if o.TimedOut {
			payload["timed_out"] = true
		}
		if run.Reply != "" {
			payload["reply"] = truncateUTF8(run.Reply, 2000)
		}
		// One terminal event per run, whichever outcome is recorded first.
		ev := runEvent(evType, fmt.Sprintf("run.end:%d", run.ID), run, payload)
		if _, err := insertEvent(tx, s.Driver, &ev); err != nil {
			return err
		}
		applied = true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return run, applied, nil
}

// TaskRunLedgerID is the llm.CallMeta.RunID of the LLM calls of a task run.
func TaskRunLedgerID(runID int64) string { return "taskrun-" + strconv.FormatInt(runID, 10) }

// TaskRunIDFromLedger parses a TaskRunLedgerID.
func TaskRunIDFromLedger(s string) (int64, bool) {
	rest, ok := strings.CutPrefix(s, "taskrun-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id > 0
}

// NewArtifact is a file a run produced.
type NewArtifact struct {
	RunID     int64
	Path      string
	Name      string
	SizeBytes int64
	Tool      string
	// DedupeKey names the occurrence (the tool call that wrote the file), so
	// a retried tool activity emits its run.artifact event once.
	DedupeKey string
}

// RecordArtifact attaches a file to the run's task (one record per run and
// path; writing the file again updates its size) with a run.artifact
// event. It reports whether the event was new.
func (s *Store) RecordArtifact(ctx context.Context, na NewArtifact) (*Artifact, bool, error) {
	var art Artifact
	var inserted bool
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		run, err := runByID(tx, na.RunID)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		row := Artifact{TaskID: run.TaskID, RunID: run.ID, Path: na.Path, Name: na.Name, SizeBytes: na.SizeBytes, Tool: na.Tool,
			CreatedAt: now, UpdatedAt: now}
		if err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "run_id"}, {Name: "path"}},
			DoUpdates: clause.Assignments(map[string]any{"size_bytes": na.SizeBytes, "tool": na.Tool, "updated_at": now}),
		}).Create(&row).Error; err != nil {
			return fmt.Errorf("record artifact of run %d: %w", run.ID, err)
		}
		if err := tx.Where("run_id = ? AND path = ?", run.ID, na.Path).First(&art).Error; err != nil {
			return fmt.Errorf("read artifact of run %d: %w", run.ID, err)
		}
		ev := runEvent(EventRunArtifact, na.DedupeKey, run, map[string]any{
			"artifact_id": art.ID, "path": art.Path, "name": art.Name, "size_bytes": art.SizeBytes, "tool": art.Tool,
		})
		inserted, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return &art, inserted, nil
}

// GetArtifact returns an artifact record.
func (s *Store) GetArtifact(ctx context.Context, id int64) (*Artifact, error) {
	var a Artifact
	err := s.DB.WithContext(ctx).First(&a, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &NotFoundError{Kind: "artifact", ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("read artifact %d: %w", id, err)
	}
	return &a, nil
}

// ListArtifacts returns a page of a task's artifacts in id order, the
// total number of its artifacts and the next page's cursor.
func (s *Store) ListArtifacts(ctx context.Context, taskID int64, p Page) ([]Artifact, int64, int64, error) {
	return listOfTask[Artifact](ctx, s, taskID, p, "artifacts", func(a Artifact) int64 { return a.ID })
}

// ListComments returns a page of a task's comments, oldest first, the
// total number of its comments and the next page's cursor.
func (s *Store) ListComments(ctx context.Context, taskID int64, p Page) ([]Comment, int64, int64, error) {
	return listOfTask[Comment](ctx, s, taskID, p, "comments", func(c Comment) int64 { return c.ID })
}

func listOfTask[T any](ctx context.Context, s *Store, taskID int64, p Page, what string, id func(T) int64) ([]T, int64, int64, error) {
	if _, err := s.GetTask(ctx, taskID); err != nil {
		return nil, 0, 0, err
	}
	limit := p.limit()
	var rows []T
	if err := s.DB.WithContext(ctx).Where("task_id = ? AND id > ?", taskID, p.Cursor).Order("id").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, 0, 0, fmt.Errorf("list %s of task %d: %w", what, taskID, err)
	}
	var total int64
	if err := s.DB.WithContext(ctx).Model(new(T)).Where("task_id = ?", taskID).Count(&total).Error; err != nil {
		return nil, 0, 0, fmt.Errorf("count %s of task %d: %w", what, taskID, err)
	}
	rows, next, err := pageOf(rows, limit, id)
	return rows, total, next, err
}

// NewComment is a comment to add.
type NewComment struct {
	Author string
	Body   string
	// Kind is note (default) or review.
	Kind string
	// Decision, on a review of a task in needs_review, is accept (the task
	// moves to done) or reject (back to todo).
	Decision string
}

func (nc *NewComment) validate() error {
	nc.Author = strings.TrimSpace(nc.Author)
	if utf8.RuneCountInString(nc.Author) > MaxAuthorRunes {
		return invalidField("author", "is longer than %d characters", MaxAuthorRunes)
	}
	if strings.TrimSpace(nc.Body) == "" {
		return invalidField("body", "must not be empty")
	}
	if len(nc.Body) > MaxCommentBytes {
		return invalidField("body", "is longer than %d bytes", MaxCommentBytes)
	}
	nc.Kind = strings.ToLower(strings.TrimSpace(nc.Kind))
	if nc.Kind == "" {
		nc.Kind = CommentNote
	}
	if nc.Kind != CommentNote && nc.Kind != CommentReview {
		return invalidField("kind", "%q is not one of note, review", nc.Kind)
	}
	nc.Decision = strings.ToLower(strings.TrimSpace(nc.Decision))
	switch nc.Decision {
	case "":
	case DecisionAccept, DecisionReject:
		if nc.Kind != CommentReview {
			return invalidField("decision", "is only allowed on comments of kind review")
		}
	default:
		return invalidField("decision", "%q is not one of accept, reject", nc.Decision)
	}
	return nil
}

// CreateComment adds a comment to a task. A review with a decision decides
// a task in needs_review (accept -> done, reject -> todo) in the same
// transaction; on a task in another status it is refused with
// ErrNotInReview. The task is returned as it is afterwards.
func (s *Store) CreateComment(ctx context.Context, taskID int64, nc NewComment) (*Comment, *Task, error) {
	if err := nc.validate(); err != nil {
		return nil, nil, err
	}
	var c Comment
	var t *Task
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if t, err = s.lockTask(tx, taskID); err != nil {
			return err
		}
		var moved bool
		if nc.Decision != "" {
			if t.Status != TaskNeedsReview {
				return &ConflictError{Code: ErrNotInReview.Code,
					Msg: fmt.Sprintf("task %d is not awaiting review (status %s); a review decision needs status needs_review", taskID, t.Status)}
			}
			t.Status = TaskDone
			if nc.Decision == DecisionReject {
				t.Status = TaskTodo
			}
			t.UpdatedAt = time.Now().UTC()
			if err := tx.Model(&Task{}).Where("id = ?", taskID).Updates(map[string]any{"status": t.Status, "updated_at": t.UpdatedAt}).Error; err != nil {
				return fmt.Errorf("decide task %d: %w", taskID, err)
			}
			moved = true
		}
		c = Comment{TaskID: taskID, Author: nc.Author, Body: nc.Body, Kind: nc.Kind, Decision: nc.Decision, CreatedAt: time.Now().UTC()}
		if err := tx.Create(&c).Error; err != nil {
			return fmt.Errorf("insert comment on task %d: %w", taskID, err)
		}
		ev := NewEvent(EventCommentCreated, fmt.Sprintf("comment.created:%d", c.ID), map[string]any{
			"comment_id": c.ID, "author": c.Author, "kind": c.Kind, "decision": c.Decision,
		})
		ev.TaskID, ev.AgentID = t.ID, t.AgentID
		if _, err := insertEvent(tx, s.Driver, &ev); err != nil {
			return err
		}
		if moved {
			up := taskEvent(EventTaskUpdated, "", t, []string{"status"})
			if _, err := insertEvent(tx, s.Driver, &up); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return &c, t, nil
}

// DeleteComment removes a comment. A decision it carried is not undone.
func (s *Store) DeleteComment(ctx context.Context, id int64) error {
	return s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var c Comment
		err := tx.First(&c, id).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return &NotFoundError{Kind: "comment", ID: id}
		}
		if err != nil {
			return fmt.Errorf("read comment %d: %w", id, err)
		}
		if err := tx.Delete(&Comment{}, id).Error; err != nil {
			return fmt.Errorf("delete comment %d: %w", id, err)
		}
		var agentID string
		if t, err := getTask(tx, c.TaskID); err == nil {
			agentID = t.AgentID
		}
		ev := NewEvent(EventCommentDeleted, fmt.Sprintf("comment.deleted:%d", id), map[string]any{"comment_id": id})
		ev.TaskID, ev.AgentID = c.TaskID, agentID
		_, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
