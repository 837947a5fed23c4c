package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/models"
)

// Tool approvals in the agent-run core. Before a tool call its agent lists
// under approvals.tools, the run records a pending approval and parks: no
// activity runs, a durable timer bounds the wait, and the decision arrives
// as the Update UpdateApprovalDecision. Parked time does not count toward
// the run's working-time bound (the deadline moves by it). The state lives
// in workflow variables, so a gateway restart replays the run back into
// the same wait.

// pendingApproval is the approval the run waits for now (at most one: the
// loop calls tools one after another).
type pendingApproval struct {
	id int64
	// decision is set by the Update handler (accepted by the validator).
	decision *ApprovalDecision
	// closed: the wait ended (decided or expired); no decision is accepted
	// any more.
	closed bool
	// recorded: the outcome is in the database; status is what it is.
	recorded bool
	status   string
}

// handleApprovals registers the decision Update. Its validator refuses,
// without touching the run, a decision that is neither approve nor
// reject, one for an approval the run is not waiting for and a second
// one; the handler hands the decision to the waiting run and answers once
// the run has recorded it.
func (r *agentRun) handleApprovals(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateApprovalDecision,
		func(ctx workflow.Context, d ApprovalDecision) (ApprovalAnswer, error) {
			p := r.pending
			p.decision = &d
			if err := workflow.Await(ctx, func() bool { return p.recorded }); err != nil {
				return ApprovalAnswer{}, err
			}
			return ApprovalAnswer{ApprovalID: p.id, Status: p.status}, nil
		},
		workflow.UpdateHandlerOptions{
			Description: "A person's decision on a tool call the run waits for: {approval_id, decision: approve|reject, subject, comment}",
			Validator: func(_ workflow.Context, d ApprovalDecision) error {
				if d.Decision != DecisionApprove && d.Decision != DecisionReject {
					return temporal.NewApplicationError(fmt.Sprintf("decision %q is neither approve nor reject", d.Decision), ErrTypeApprovalBadDecision)
				}
				p := r.pending
				switch {
				case p == nil || p.id != d.ApprovalID:
					return temporal.NewApplicationError(fmt.Sprintf("the run is not waiting for approval %d", d.ApprovalID), ErrTypeApprovalNotPending)
				case p.decision != nil || p.closed:
					return temporal.NewApplicationError(fmt.Sprintf("approval %d was already decided", d.ApprovalID), ErrTypeApprovalNotPending)
				}
				return nil
			},
		})
}

// askApproval parks the run before the tool call inv until a person
// decides or the approval expires. approved: run the call as usual;
// otherwise res is the result the model sees ("rejected by ...").
func (e *durableExecutor) askApproval(inv agent.ToolInvocation) (res agent.ToolResult, approved bool, err error) {
	r := e.run
	ctx := workflow.WithLocalActivityOptions(e.ctx, statusActivityOptions)
	wait := r.approvals.wait()
	parkedAt := workflow.Now(e.ctx)
	req := ApprovalRequestInput{Run: r.ref, Turn: inv.Turn, CallSeq: e.callSeq, Index: e.index, CallID: inv.Call.ID,
		Tool: inv.Call.Name, RequestedAt: parkedAt, ExpiresAt: parkedAt.Add(wait)}
	var ticket ApprovalTicket
	if err := workflow.ExecuteLocalActivity(ctx, ActivityApprovalRequest, req).Get(ctx, &ticket); err != nil {
		return res, false, stepError(err)
	}
	p := &pendingApproval{id: ticket.ID}
	done := ApprovalDoneInput{Run: r.ref, ApprovalID: ticket.ID, ResultSeq: e.nextSeq, CallID: inv.Call.ID, Tool: inv.Call.Name, Wait: wait}
	if ticket.Status != models.ApprovalPending {
		// Decided before (this step is being repeated): keep that outcome.
		done.Status, done.Subject, done.Comment = ticket.Status, ticket.DecidedBy, ticket.Comment
	} else {
		r.pending, r.parked = p, true
		r.wait(models.WaitingForApproval)
		decided, err := workflow.AwaitWithTimeout(e.ctx, wait, func() bool { return p.decision != nil })
		p.closed = true
		r.parked = false
		// Parked time is not working time: the run's deadline moves by it.
		r.deadline = r.deadline.Add(workflow.Now(e.ctx).Sub(parkedAt))
		if err != nil {
			return res, false, stepError(err) // cancelled while waiting
		}
		switch {
		case decided && p.decision.Decision == DecisionApprove:
			done.Status = models.ApprovalApproved
		case decided:
			done.Status = models.ApprovalRejected
		default:
			done.Status = models.ApprovalExpired
		}
		if p.decision != nil {
			done.Subject, done.Comment = p.decision.Subject, p.decision.Comment
		}
	}
	done.DecidedAt = workflow.Now(e.ctx)
	err = workflow.ExecuteLocalActivity(ctx, ActivityApprovalDone, done).Get(ctx, &res)
	p.status, p.recorded = done.Status, true
	if r.pending == p {
		r.pending = nil
	}
	r.wait("")
	if err != nil {
		return res, false, stepError(err)
	}
	return res, done.Status == models.ApprovalApproved, nil
}

// wait tells the run's kind it parked (what for) or resumed ("").
func (r *agentRun) wait(waitingFor string) {
	if r.onWait != nil {
		r.onWait(waitingFor)
	}
}
