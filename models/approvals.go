package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Tool approvals: a durable run that reaches a tool call its agent lists
// under approvals.tools parks until a person decides (docs/approvals.md).
// The workflow owns the decision (a Temporal Update); these rows are what
// people list and what the decision is recorded in, each change written
// with its event in one transaction.

// Approval statuses. Pending is the only open one.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
	// ApprovalExpired: nobody decided within the agent's approvals.timeout;
	// the run treats it as a rejection.
	ApprovalExpired = "expired"
	// ApprovalCancelled: the run ended (cancelled, timed out) while waiting.
	ApprovalCancelled = "cancelled"
)

// Run wait reasons (TaskRun.WaitingFor).
const (
	WaitingForApproval = "approval"
)

// Events of approvals.
const (
	EventRunApprovalRequested = "run.approval_requested"
	EventRunApprovalDecided   = "run.approval_decided"
)

// MaxApprovalArgumentsBytes bounds the arguments kept on an approval row
// (the full call stays in the run log).
const MaxApprovalArgumentsBytes = 16 << 10

// Approval is one tool call waiting for (or decided by) a person.
type Approval struct {
	ID int64 `gorm:"primaryKey;autoIncrement"`
	// Key names the call within its run (run key, message, index): asking
	// twice for the same call (a retried step) finds the same row.
	Key string `gorm:"size:191;not null;uniqueIndex"`
	// TaskID and RunID name the task run the call belongs to; both are 0
	// for a scheduled firing, which ScheduleID names instead (with the
	// firing's WorkflowID).
	TaskID     int64  `gorm:"index"`
	RunID      int64  `gorm:"index"`
	ScheduleID string `gorm:"size:191;index"`
	Attempt    int
	AgentID    string `gorm:"size:100;index"`
	WorkflowID string `gorm:"size:191"`
	Tool       string `gorm:"size:191"`
	CallID     string `gorm:"size:191"`
	// Arguments is the call's JSON arguments (capped).
	Arguments   string
	Status      string `gorm:"size:16;not null;index"`
	DecidedBy   string `gorm:"size:191"`
	Comment     string
	RequestedAt time.Time
	ExpiresAt   time.Time
	DecidedAt   *time.Time
}

// MarshalJSON writes the API form of an approval.
func (a Approval) MarshalJSON() ([]byte, error) {
	args := []byte(a.Arguments)
	if len(args) == 0 || !json.Valid(args) {
		args = []byte("{}")
	}
	var firing *ApprovalFiring
	if a.ScheduleID != "" {
		firing = &ApprovalFiring{ScheduleID: a.ScheduleID, AgentID: a.AgentID, WorkflowID: a.WorkflowID}
	}
	return json.Marshal(struct {
		ID          int64           `json:"id"`
		TaskID      int64           `json:"task_id,omitempty"`
		RunID       int64           `json:"run_id,omitempty"`
		Attempt     int             `json:"attempt,omitempty"`
		Firing      *ApprovalFiring `json:"firing"`
		AgentID     string          `json:"agent_id"`
		WorkflowID  string          `json:"workflow_id"`
		Tool        string          `json:"tool"`
		Arguments   json.RawMessage `json:"arguments"`
		Status      string          `json:"status"`
		DecidedBy   string          `json:"decided_by,omitempty"`
		Comment     string          `json:"comment,omitempty"`
		RequestedAt time.Time       `json:"requested_at"`
		ExpiresAt   time.Time       `json:"expires_at"`
		DecidedAt   *time.Time      `json:"decided_at"`
	}{a.ID, a.TaskID, a.RunID, a.Attempt, firing, a.AgentID, a.WorkflowID, a.Tool, json.RawMessage(args), a.Status, a.DecidedBy, a.Comment,
		a.RequestedAt, a.ExpiresAt, a.DecidedAt})
}

// ApprovalFiring names the scheduled firing an approval belongs to (the
// API's "firing" field; null for task runs): the schedule (GET /schedules
// lists it under the same id) and the firing's workflow id, which the
// decision Update is sent to.
type ApprovalFiring struct {
	ScheduleID string `json:"schedule_id"`
	AgentID    string `json:"agent_id"`
	WorkflowID string `json:"workflow_id"`
}

// RequestApproval records a pending approval (once per Key: a repeat
// returns the existing row), moves the task run it belongs to (TaskID != 0)
// or the firing's record (ScheduleID set) to waiting for approval and
// writes run.approval_requested.
func (s *Store) RequestApproval(ctx context.Context, a Approval) (*Approval, error) {
	if len(a.Arguments) > MaxApprovalArgumentsBytes {
		a.Arguments = "{}"
	}
	a.Status = ApprovalPending
	a.RequestedAt, a.ExpiresAt = a.RequestedAt.UTC(), a.ExpiresAt.UTC()
	var out Approval
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}}, DoNothing: true}).Create(&a).Error; err != nil {
			return fmt.Errorf("record approval for %s: %w", a.Tool, err)
		}
		if err := tx.Where("key = ?", a.Key).First(&out).Error; err != nil {
			return fmt.Errorf("read approval %s: %w", a.Key, err)
		}
		if out.Status != ApprovalPending {
			return nil // decided already (a step repeated after the decision)
		}
		if out.RunID != 0 && out.TaskID != 0 {
			res := tx.Model(&TaskRun{}).Where("id = ? AND status IN ?", out.RunID, []string{RunQueued, RunRunning, RunWaiting}).
				Updates(map[string]any{"status": RunWaiting, "waiting_for": WaitingForApproval, "updated_at": time.Now().UTC()})
			if res.Error != nil {
				return fmt.Errorf("park run %d: %w", out.RunID, res.Error)
			}
		}
		if err := parkFiring(tx, out, WaitingForApproval); err != nil {
			return err
		}
		payload := map[string]any{
			"approval_id": out.ID, "tool": out.Tool, "arguments": truncateUTF8(out.Arguments, 2000),
			"workflow_id": out.WorkflowID, "waiting_for": WaitingForApproval, "expires_at": out.ExpiresAt,
		}
		if out.ScheduleID != "" {
			payload["schedule_id"] = out.ScheduleID
		}
		ev := NewEvent(EventRunApprovalRequested, fmt.Sprintf("%s:%d", EventRunApprovalRequested, out.ID), payload)
		ev.TaskID, ev.RunID, ev.AgentID, ev.Attempt = out.TaskID, out.RunID, out.AgentID, out.Attempt
		_, err := insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ResolveApproval records how a pending approval ended (approved,
// rejected, expired), moves its task run back to running and writes
// run.approval_decided. Repeating it changes nothing; the first recorded
// outcome wins and is returned.
func (s *Store) ResolveApproval(ctx context.Context, id int64, status, by, comment string, at time.Time) (*Approval, error) {
	switch status {
	case ApprovalApproved, ApprovalRejected, ApprovalExpired:
	default:
		return nil, fmt.Errorf("resolve approval %d: %q is not a decision", id, status)
	}
	var out Approval
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.First(&out, id).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return &NotFoundError{Kind: "approval", ID: id}
			}
			return fmt.Errorf("read approval %d: %w", id, err)
		}
		if out.Status != ApprovalPending {
			return nil
		}
		at = at.UTC()
		out.Status, out.DecidedBy, out.Comment, out.DecidedAt = status, by, comment, &at
		if err := tx.Model(&Approval{}).Where("id = ? AND status = ?", id, ApprovalPending).
			Updates(map[string]any{"status": status, "decided_by": by, "comment": comment, "decided_at": at}).Error; err != nil {
			return fmt.Errorf("decide approval %d: %w", id, err)
		}
		if out.RunID != 0 && out.TaskID != 0 {
			if err := tx.Model(&TaskRun{}).Where("id = ? AND status = ?", out.RunID, RunWaiting).
				Updates(map[string]any{"status": RunRunning, "waiting_for": "", "updated_at": time.Now().UTC()}).Error; err != nil {
				return fmt.Errorf("resume run %d: %w", out.RunID, err)
			}
		}
		if err := parkFiring(tx, out, ""); err != nil {
			return err
		}
		payload := map[string]any{"approval_id": out.ID, "tool": out.Tool, "status": status, "workflow_id": out.WorkflowID}
		if out.ScheduleID != "" {
			payload["schedule_id"] = out.ScheduleID
		}
		if by != "" {
			payload["decided_by"] = by
		}
		if comment != "" {
			payload["comment"] = truncateUTF8(comment, 2000)
		}
		ev := NewEvent(EventRunApprovalDecided, fmt.Sprintf("%s:%d", EventRunApprovalDecided, out.ID), payload)
		ev.TaskID, ev.RunID, ev.AgentID, ev.Attempt = out.TaskID, out.RunID, out.AgentID, out.Attempt
		_, err := insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetApproval returns an approval (404 NotFoundError when unknown).
func (s *Store) GetApproval(ctx context.Context, id int64) (*Approval, error) {
	var a Approval
	err := s.DB.WithContext(ctx).First(&a, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &NotFoundError{Kind: "approval", ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("read approval %d: %w", id, err)
	}
	return &a, nil
}

// ApprovalFilter selects approvals (empty fields match everything).
type ApprovalFilter struct {
	Status  string
	TaskID  int64
	RunID   int64
	AgentID string
	// Schedule selects the approvals of the firings of the scheduled agent
	// with this id (schedules are addressed by agent id in the API).
	Schedule string
	Page     Page
}

// ApprovalStatuses lists the statuses an approval can have.
func ApprovalStatuses() []string {
	return []string{ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalExpired, ApprovalCancelled}
}

// ListApprovals returns a page of approvals, oldest first, and the next
// page's cursor (0 when this is the last).
func (s *Store) ListApprovals(ctx context.Context, f ApprovalFilter) ([]Approval, int64, error) {
	if f.Status != "" && !slices.Contains(ApprovalStatuses(), f.Status) {
		return nil, 0, invalidField("status", "%q is not one of pending, approved, rejected, expired, cancelled", f.Status)
	}
	limit := f.Page.limit()
	q := s.DB.WithContext(ctx).Where("id > ?", f.Page.Cursor)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.TaskID != 0 {
		q = q.Where("task_id = ?", f.TaskID)
	}
	if f.RunID != 0 {
		q = q.Where("run_id = ?", f.RunID)
	}
	if f.AgentID != "" {
		q = q.Where("agent_id = ?", f.AgentID)
	}
	if f.Schedule != "" {
		q = q.Where("agent_id = ? AND schedule_id <> ''", f.Schedule)
	}
	var rows []Approval
	if err := q.Order("id").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, 0, fmt.Errorf("list approvals: %w", err)
	}
	return pageOf(rows, limit, func(a Approval) int64 { return a.ID })
}

// closeApprovals marks the pending approvals of a run that ended as
// cancelled (inside FinishRun's transaction).
func closeApprovals(tx *gorm.DB, runID int64, at time.Time) error {
	err := tx.Model(&Approval{}).Where("run_id = ? AND task_id <> 0 AND status = ?", runID, ApprovalPending).
		Updates(map[string]any{"status": ApprovalCancelled, "decided_at": at}).Error
	if err != nil {
		return fmt.Errorf("close approvals of run %d: %w", runID, err)
	}
	return nil
}

// parkFiring moves the record of the firing an approval belongs to
// (nothing for a task run's) to waiting for waitingFor, or back to running
// (""); a firing that already ended keeps its outcome.
func parkFiring(tx *gorm.DB, ap Approval, waitingFor string) error {
	if ap.ScheduleID == "" {
		return nil
	}
	status := ScheduleRunWaiting
	if waitingFor == "" {
		status = ScheduleRunRunning
	}
	err := tx.Model(&ScheduleRun{}).Where("workflow_id = ? AND status IN ?", ap.WorkflowID, []string{ScheduleRunRunning, ScheduleRunWaiting}).
		Updates(map[string]any{"status": status, "waiting_for": waitingFor}).Error
	if err != nil {
		return fmt.Errorf("park firing %s: %w", ap.WorkflowID, err)
	}
	return nil
}

// closeFiringApprovals marks the pending approvals of a firing that ended
// as cancelled (inside FinishScheduleRun's transaction).
func closeFiringApprovals(tx *gorm.DB, workflowID string, at time.Time) error {
	err := tx.Model(&Approval{}).Where("workflow_id = ? AND schedule_id <> '' AND status = ?", workflowID, ApprovalPending).
		Updates(map[string]any{"status": ApprovalCancelled, "decided_at": at}).Error
	if err != nil {
		return fmt.Errorf("close approvals of firing %s: %w", workflowID, err)
	}
	return nil
}
