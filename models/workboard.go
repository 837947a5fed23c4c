package models

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentryhq/agentry/internal/fault"
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
	Tags  string
	DueAt *time.Time
	// MaxCostMicros is the task's max_cost_usd in micro-dollars (0: no
	// cap): what a run of the task may cost with the runs it delegates to.
	MaxCostMicros int64 `gorm:"not null;default:0"`
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// MaxCostUSD is the API form of the cap: nil when the task has none.
func (t Task) MaxCostUSD() *float64 {
	if t.MaxCostMicros <= 0 {
		return nil
	}
	v := MicrosToUSD(t.MaxCostMicros)
	return &v
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
		MaxCostUSD  *float64   `json:"max_cost_usd"`
		CreatedAt   time.Time  `json:"created_at"`
		UpdatedAt   time.Time  `json:"updated_at"`
	}{t.ID, t.Title, t.Description, t.AgentID, t.Status, t.Owner, t.Priority, t.TagList(), t.DueAt, t.MaxCostUSD(), t.CreatedAt, t.UpdatedAt})
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
	// TreeCostMicros and Children are the run's tree (docs/teams.md),
	// filled by Store.WithTrees for the API; not stored.
	TreeCostMicros *int64    `gorm:"-"`
	Children       []PeerRun `gorm:"-"`
}

// MarshalJSON writes the API form of a run.
func (r TaskRun) MarshalJSON() ([]byte, error) {
	var duration *int64
	if r.StartedAt != nil && r.FinishedAt != nil {
		ms := r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
		duration = &ms
	}
	tree := r.CostMicros
	if r.TreeCostMicros != nil {
		tree = *r.TreeCostMicros
	}
	type base struct {
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
	}
	return json.Marshal(struct {
		base
		TreeCostMicros int64     `json:"tree_cost_micros"`
		TreeCostUSD    float64   `json:"tree_cost_usd"`
		Children       []PeerRun `json:"children,omitempty"`
	}{base{r.ID, r.TaskID, r.Attempt, r.Status, r.WaitingFor, r.StalledReason, r.AgentID, r.Trigger, r.WorkflowID, r.TemporalRunID, r.CreatedAt, r.StartedAt,
		r.FinishedAt, duration, r.Error, r.StopReason, r.Turns, r.InputTokens, r.OutputTokens, r.CostMicros,
		float64(r.CostMicros) / 1e6, r.Reply, r.RetryOf, r.ReusedTurns}, tree, float64(tree) / 1e6, r.Children})
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

// ValidationError is bad input, naming the field: the vocabulary's
// invalid-input error (400), under the name its callers know.
type ValidationError = fault.Invalid

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

// Fault implements fault.Fault (404 not_found).
func (e *NotFoundError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindNotFound, Code: fault.CodeNotFound, Message: e.Error()}
}

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

// Fault implements fault.Fault: 409 with the code, and the run concerned
// and its status when there is one.
func (e *ConflictError) Fault() fault.Detail {
	d := fault.Detail{Kind: fault.KindConflict, Code: e.Code, Message: e.Msg}
	if e.RunID != 0 || e.Status != "" {
		d.Fields = map[string]any{}
		if e.RunID != 0 {
			d.Fields["run_id"] = e.RunID
		}
		if e.Status != "" {
			d.Fields["status"] = e.Status
		}
	}
	return d
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
	// MaxCostUSD is the run tree's cost cap in US dollars; 0 clears it.
	MaxCostUSD *float64
}

// MaxTaskCostUSD bounds max_cost_usd (a typo guard, not a budget).
const MaxTaskCostUSD = 1e6

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
	if f.MaxCostUSD != nil {
		v := *f.MaxCostUSD
		// Written so that NaN is refused too.
		if !(v >= 0 && v <= MaxTaskCostUSD) {
			return nil, invalidField("max_cost_usd", "%v must be a number of US dollars from 0 to %.0f (0 or null: no cap)", v, MaxTaskCostUSD)
		}
		next.MaxCostMicros = USDToMicros(v)
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
	add("max_cost_usd", next.MaxCostMicros != t.MaxCostMicros)
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
