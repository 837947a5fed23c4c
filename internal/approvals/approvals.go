// Package approvals decides the tool approvals durable runs wait for: the
// client side of the decision Update of the agent-run core
// (workflows/approval.go). docs/approvals.md.
package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// ErrTemporalUnavailable wraps failures to reach Temporal (HTTP 503).
var ErrTemporalUnavailable = fault.ErrTemporalUnavailable

// MaxCommentBytes bounds a decision's comment.
const MaxCommentBytes = 4 << 10

// Notifier wakes event subscribers (*events.Bus).
type Notifier interface{ Notify() }

// Service sends people's decisions to the runs that wait for them.
type Service struct {
	Client client.Client
	Store  models.ApprovalStore
	Events Notifier
}

// Decide sends a decision (approve or reject) on approval id by subject as
// a Temporal Update and returns the approval as recorded. The run's
// validator has the last word; refusals change nothing. Errors:
// *models.ValidationError (400: bad decision, long comment),
// *models.NotFoundError (404), *DecidedError (409: decided or expired),
// *models.ConflictError (409: the run no longer waits), ErrTemporalUnavailable (503).
func (s *Service) Decide(ctx context.Context, id int64, decision, subject, comment string) (*models.Approval, error) {
	if decision != workflows.DecisionApprove && decision != workflows.DecisionReject {
		return nil, &models.ValidationError{Field: "decision", Msg: fmt.Sprintf("%q is neither approve nor reject", decision)}
	}
	if len(comment) > MaxCommentBytes {
		return nil, &models.ValidationError{Field: "comment", Msg: fmt.Sprintf("is longer than %d bytes", MaxCommentBytes)}
	}
	ap, err := s.Store.GetApproval(ctx, id)
	if err != nil {
		return nil, err
	}
	if ap.Status != models.ApprovalPending {
		return nil, decided(ap)
	}
	// Once sent, wait for the run's answer even if the caller goes away.
	ctx, cancel := context.WithTimeout(detached.Context(ctx), 30*time.Second)
	defer cancel()
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: ap.WorkflowID, UpdateName: workflows.UpdateApprovalDecision, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{workflows.ApprovalDecision{ApprovalID: id, Decision: decision, Subject: subject, Comment: comment}},
	})
	var answer workflows.ApprovalAnswer
	if err == nil {
		err = h.Get(ctx, &answer)
	}
	if err != nil {
		var app *temporal.ApplicationError
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &app) && app.Type() == workflows.ErrTypeApprovalBadDecision:
			return nil, &models.ValidationError{Field: "decision", Msg: app.Message()}
		case errors.As(err, &app) && app.Type() == workflows.ErrTypeApprovalNotPending,
			errors.As(err, &nf), isClosed(err):
			// Decided or expired meanwhile, or the run ended: say how it stands.
			if now, gerr := s.Store.GetApproval(ctx, id); gerr == nil && now.Status != models.ApprovalPending {
				return nil, decided(now)
			}
			return nil, &models.ConflictError{Code: "approval_not_waiting",
				Msg: fmt.Sprintf("the run of approval %d no longer waits for it (%s)", id, strings.TrimSpace(err.Error()))}
		}
		return nil, fmt.Errorf("decide approval %d: %w: %w", id, ErrTemporalUnavailable, err)
	}
	if s.Events != nil {
		s.Events.Notify()
	}
	return s.Store.GetApproval(ctx, id)
}

// DecidedError refuses a decision on an approval that is no longer
// pending (HTTP 409 with the current decision).
type DecidedError struct{ Approval *models.Approval }

func (e *DecidedError) Error() string {
	msg := fmt.Sprintf("approval %d is already %s", e.Approval.ID, e.Approval.Status)
	if e.Approval.DecidedBy != "" {
		msg += " by " + e.Approval.DecidedBy
	}
	return msg
}

// Fault implements fault.Fault: 409 approval_decided with the current
// decision (approval_id, status, decided_by and comment when set).
func (e *DecidedError) Fault() fault.Detail {
	a := e.Approval
	fields := map[string]any{"approval_id": a.ID, "status": a.Status}
	if a.DecidedBy != "" {
		fields["decided_by"] = a.DecidedBy
	}
	if a.Comment != "" {
		fields["comment"] = a.Comment
	}
	return fault.Detail{Kind: fault.KindConflict, Code: "approval_decided", Message: e.Error(), Fields: fields}
}

func decided(ap *models.Approval) error { return &DecidedError{Approval: ap} }

func isClosed(err error) bool {
	var fp *serviceerror.FailedPrecondition
	return errors.As(err, &fp) || strings.Contains(strings.ToLower(err.Error()), "workflow execution already completed")
}
