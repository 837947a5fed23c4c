package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Approval is a tool call a durable run waits on a person for.
type Approval struct {
	Raw
	ID     int64 `json:"id"`
	TaskID int64 `json:"task_id"`
	RunID  int64 `json:"run_id"`
	// Firing names the scheduled firing the call belongs to (nil for a
	// task run's call).
	Firing      *ApprovalFiring `json:"firing"`
	AgentID     string          `json:"agent_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	Status      string          `json:"status"`
	DecidedBy   string          `json:"decided_by"`
	Comment     string          `json:"comment"`
	RequestedAt time.Time       `json:"requested_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
}

// ApprovalFiring is the scheduled firing an approval belongs to.
type ApprovalFiring struct {
	ScheduleID string `json:"schedule_id"`
	AgentID    string `json:"agent_id"`
	WorkflowID string `json:"workflow_id"`
}

// ApprovalFilter selects approvals (zero fields match everything).
type ApprovalFilter struct {
	Status  string
	TaskID  int64
	AgentID string
	// Schedule is a scheduled agent's id: the approvals of its firings.
	Schedule string
}

// ApprovalList is GET /approvals.
type ApprovalList struct {
	Raw
	Approvals []Approval `json:"approvals"`
}

// Approvals lists the approvals f selects.
func (c *Client) Approvals(ctx context.Context, f ApprovalFilter) (*ApprovalList, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.TaskID > 0 {
		q.Set("task_id", strconv.FormatInt(f.TaskID, 10))
	}
	if f.AgentID != "" {
		q.Set("agent_id", f.AgentID)
	}
	if f.Schedule != "" {
		q.Set("schedule", f.Schedule)
	}
	path := "/approvals"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l ApprovalList
	return &l, c.Do(ctx, http.MethodGet, path, nil, &l)
}

// DecideApproval approves or rejects an approval.
func (c *Client) DecideApproval(ctx context.Context, id int64, decision, comment string) (*Approval, error) {
	var a Approval
	return &a, c.Do(ctx, http.MethodPost, "/approvals/"+strconv.FormatInt(id, 10),
		map[string]string{"decision": decision, "comment": comment}, &a)
}
