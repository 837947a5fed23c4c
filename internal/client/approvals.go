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
	ID          int64           `json:"id"`
	TaskID      int64           `json:"task_id"`
	RunID       int64           `json:"run_id"`
	AgentID     string          `json:"agent_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	Status      string          `json:"status"`
	DecidedBy   string          `json:"decided_by"`
	Comment     string          `json:"comment"`
	RequestedAt time.Time       `json:"requested_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
}

// ApprovalList is GET /approvals.
type ApprovalList struct {
	Raw
	Approvals []Approval `json:"approvals"`
}

// Approvals lists approvals; status, taskID and agentID filter when set.
func (c *Client) Approvals(ctx context.Context, status string, taskID int64, agentID string) (*ApprovalList, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if taskID > 0 {
		q.Set("task_id", strconv.FormatInt(taskID, 10))
	}
	if agentID != "" {
		q.Set("agent_id", agentID)
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
