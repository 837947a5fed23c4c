package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// ApprovalActivities record the tool approvals of durable runs (the
// approval steps of the agent-run core, workflows/approval.go) for every
// kind of run.
type ApprovalActivities struct {
	Store  models.ApprovalStore
	Log    *runlog.Log
	Events Notifier
}

// ApprovalRequest records a pending approval of a stored tool call (its
// arguments read from the run log), parks the run record and publishes
// run.approval_requested. Repeating it returns the same approval, with the
// decision when one was recorded since.
func (a *ApprovalActivities) ApprovalRequest(ctx context.Context, in workflows.ApprovalRequestInput) (workflows.ApprovalTicket, error) {
	asked, err := a.Log.At(ctx, in.Run.Key(), in.CallSeq)
	if err != nil {
		return workflows.ApprovalTicket{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunLog, err)
	}
	if in.Index >= len(asked.ToolCalls) || asked.ToolCalls[in.Index].ID != in.CallID {
		msg := fmt.Sprintf("%v: message %d of run %s has no tool call %s", runlog.ErrOutOfStep, in.CallSeq, in.Run.Key(), in.CallID)
		return workflows.ApprovalTicket{}, temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeRunLog, nil)
	}
	args := string(asked.ToolCalls[in.Index].Arguments)
	ap, err := a.Store.RequestApproval(ctx, models.Approval{
		Key: in.ApprovalKey(), TaskID: in.Run.TaskID, RunID: in.Run.RunID, Attempt: in.Run.Attempt, AgentID: in.Run.AgentID, ScheduleID: in.Run.ScheduleID,
		WorkflowID: in.Run.WorkflowID, Tool: in.Tool, CallID: in.CallID, Arguments: args, RequestedAt: in.RequestedAt, ExpiresAt: in.ExpiresAt,
	})
	if err != nil {
		return workflows.ApprovalTicket{}, err
	}
	a.notify()
	return workflows.ApprovalTicket{ID: ap.ID, Status: ap.Status, DecidedBy: ap.DecidedBy, Comment: ap.Comment}, nil
}

// ApprovalDone records how an approval ended, resumes the run record and,
// for a call that will not be made (rejected, expired), stores the tool
// result the model sees and returns it.
func (a *ApprovalActivities) ApprovalDone(ctx context.Context, in workflows.ApprovalDoneInput) (agent.ToolResult, error) {
	ap, err := a.Store.ResolveApproval(ctx, in.ApprovalID, in.Status, in.Subject, in.Comment, in.DecidedAt)
	if errors.Is(err, models.ErrNotFound) {
		return agent.ToolResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRunGone, nil)
	}
	if err != nil {
		return agent.ToolResult{}, err
	}
	a.notify()
	if ap.Status == models.ApprovalApproved {
		return agent.ToolResult{}, nil
	}
	res := agent.ToolResult{Content: RejectionText(ap, in.Wait)}
	msg := llm.Message{Role: llm.RoleTool, Content: agent.ToolMessageContent(res), ToolCallID: in.CallID, Name: in.Tool}
	if err := a.Log.Put(ctx, in.Run.Key(), in.ResultSeq, msg); err != nil {
		return agent.ToolResult{}, err
	}
	return res, nil
}

// RejectionText is what the model is told about a call that was not made:
// "rejected by <subject>: <comment>", or why nobody decided.
func RejectionText(ap *models.Approval, wait time.Duration) string {
	switch ap.Status {
	case models.ApprovalExpired:
		return fmt.Sprintf("rejected: nobody approved the call to %s within %s (the approval expired); it was not executed", ap.Tool, wait)
	case models.ApprovalCancelled:
		return fmt.Sprintf("rejected: the approval of %s was cancelled; it was not executed", ap.Tool)
	}
	by := ap.DecidedBy
	if by == "" {
		by = "a person"
	}
	if c := strings.TrimSpace(ap.Comment); c != "" {
		return fmt.Sprintf("rejected by %s: %s", by, c)
	}
	return fmt.Sprintf("rejected by %s", by)
}

func (a *ApprovalActivities) notify() {
	if a.Events != nil {
		a.Events.Notify()
	}
}
