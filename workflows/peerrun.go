package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// PeerRun is a delegated run (docs/teams.md): the agent-run core driving
// the peer's agent with its own run log key, approvals and budget waits,
// bounded by the deadline its parent passed down. It is started as a
// child workflow by delegate.go and ends with its outcome recorded in its
// peer run record; its answer goes back to the parent as the result.
// LLM turns are regular activities (not local ones), so a cancellation
// reaches a turn in flight through its heartbeat within seconds.
func PeerRun(ctx workflow.Context, in PeerRunInput) (*PeerRunResult, error) {
	res := &PeerRunResult{PeerRunID: in.PeerRunID, Status: models.RunQueued, Deadline: in.Deadline}
	if err := workflow.SetQueryHandler(ctx, QueryTaskRunProgress, func() (PeerRunResult, error) { return *res, nil }); err != nil {
		return nil, err
	}
	if in.Continuation == nil {
		sctx := workflow.WithLocalActivityOptions(ctx, statusActivityOptions)
		if err := workflow.ExecuteLocalActivity(sctx, ActivityPeerRunStart, in.Run).Get(sctx, nil); err != nil && ctx.Err() == nil {
			return nil, err
		}
	} else {
		res.Turns, res.Usage = in.Continuation.Output.Turns, in.Continuation.Output.Usage
	}
	var ar agentRunResult
	if ctx.Err() == nil {
		res.Status = models.RunRunning
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Peer %s working for %s", in.Run.AgentID, in.ParentWorkflowID))
		run := &agentRun{ref: in.Run, outline: in.Agent, llmStep: ActivityPeerLLMTurn, toolStep: ActivityPeerTool,
			llmOpts: llmActivityOptions, toolOpts: toolOptions(in.ToolTimeout), continueAfter: in.ContinueAfterEvents,
			onTurn:    func(turn int, u llm.Usage) { res.Turns, res.Usage = turn, res.Usage.Add(u) },
			approvals: in.Approvals, budgetWait: in.BudgetWait, budgetWaited: in.BudgetWaited, waitStep: ActivityPeerRunWait,
			delegation: in.Delegation,
			onWait: func(waitingFor string) {
				res.Status = models.RunRunning
				if waitingFor != "" {
					res.Status = models.RunWaiting
				}
			}}
		ar = run.runUntil(ctx, in.Continuation, in.Deadline)
		if ar.next != nil && ctx.Err() == nil {
			next := in
			next.Continuation, next.Deadline, next.BudgetWaited = ar.next, ar.deadline, ar.budgetWaited
			return nil, workflow.NewContinueAsNewError(ctx, PeerRunWorkflowName, next)
		}
		res.Deadline = ar.deadline
	}
	if out := ar.out; out != nil {
		res.Reply, res.StopReason, res.Turns, res.Usage = out.Reply, out.StopReason, out.Turns, out.Usage
	}
	switch {
	case ctx.Err() != nil:
		res.Status, res.Error = models.RunCancelled, "cancelled by request"
	case ar.timedOut:
		res.Status, res.TimedOut = models.RunFailed, true
		res.Error = "the run tree exceeded its time limit"
	case ar.err != nil:
		res.Status, res.Error = models.RunFailed, ar.err.Error()
	default:
		res.Status = models.RunFinished
	}
	fctx, _ := workflow.NewDisconnectedContext(ctx)
	fctx = workflow.WithLocalActivityOptions(fctx, statusActivityOptions)
	if err := workflow.ExecuteLocalActivity(fctx, ActivityPeerRunFinish, PeerRunOutcome{Run: in.Run, Result: *res}).Get(fctx, nil); err != nil {
		return res, fmt.Errorf("record outcome of peer run %d: %w", in.PeerRunID, err)
	}
	if res.Status == models.RunCancelled {
		return res, temporal.NewCanceledError(res.Error)
	}
	// A failed peer is an answer for the parent (a tool error), not a
	// failed child workflow: the parent decides what to do with it.
	return res, nil
}
