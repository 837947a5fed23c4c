package workflows

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/models"
)

// Delegation in the agent-run core (docs/teams.md). In a run that holds a
// Delegation, an ask_<peer> call is not a toolbox call: PeerPrepare checks
// it (a peer of this agent, existing and enabled, no cycle, depth and
// fan-out limits) and prepares the child (snapshot, peer run record,
// run.child_started); the child runs as a PeerRun child workflow; PeerDone
// stores its answer as the call's tool result (run.child_finished). A
// refused call is a tool error the model sees, and nothing is started.
//
// Cancel cascades: the child runs in the loop's context, so cancelling the
// parent (or its deadline cancelling the loop) requests the child's
// cancellation and waits for it to end (WaitForCancellation), and the
// parent close policy REQUEST_CANCEL covers a parent that fails, times out
// at Temporal's backstop or is terminated. Working time: while a child
// runs, the parent's timer defers to the child, which runs to the parent's
// deadline moved by its own parked time; the parent goes on with the
// child's deadline, so the root's bound covers the tree.

// isDelegation tells whether a tool call of the run is a delegation.
func (e *durableExecutor) isDelegation(tool string) bool {
	if e.run.delegation == nil {
		return false
	}
	_, ok := agentdef.PeerOfTool(tool)
	return ok
}

// delegate runs one ask_<peer> call.
func (e *durableExecutor) delegate(inv agent.ToolInvocation) (agent.ToolResult, error) {
	r := e.run
	d := *r.delegation
	childID := PeerRunWorkflowID(r.ref, inv.Turn, e.index)
	lctx := workflow.WithLocalActivityOptions(e.ctx, peerPrepareOptions)
	prep := PeerPrepareInput{Parent: r.ref, Delegation: d, Turn: inv.Turn, CallSeq: e.callSeq, Index: e.index, ResultSeq: e.nextSeq,
		CallID: inv.Call.ID, Name: inv.Call.Name, ChildWorkflowID: childID, Deadline: r.deadline}
	var prepared PeerPrepared
	if err := workflow.ExecuteLocalActivity(lctx, ActivityPeerPrepare, prep).Get(lctx, &prepared); err != nil {
		return agent.ToolResult{}, stepError(err)
	}
	if prepared.Refused != nil {
		e.index++
		e.nextSeq++
		return *prepared.Refused, nil
	}
	r.delegation.Started++
	cctx := workflow.WithChildOptions(e.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:               childID,
		WorkflowExecutionTimeout: PeerRunExecutionTimeout,
		ParentClosePolicy:        enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:      true,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	})
	r.inChild = true
	var res PeerRunResult
	err := workflow.ExecuteChildWorkflow(cctx, PeerRunWorkflowName, *prepared.Child).Get(cctx, &res)
	r.inChild = false
	if e.ctx.Err() != nil {
		return agent.ToolResult{}, stepError(temporal.NewCanceledError("cancelled while peer " + prepared.Child.Run.AgentID + " ran"))
	}
	if err != nil && res.Status == "" {
		res = PeerRunResult{PeerRunID: prepared.Child.PeerRunID, Status: models.RunFailed, Error: stepError(err).Error()}
	}
	if res.Deadline.After(r.deadline) {
		r.deadline = res.Deadline // its parked time moved it
	}
	done := PeerDoneInput{Parent: r.ref, Delegation: d, Turn: inv.Turn, ResultSeq: e.nextSeq, CallID: inv.Call.ID, Name: inv.Call.Name,
		ChildWorkflowID: childID, Result: res}
	dctx := workflow.WithLocalActivityOptions(e.ctx, statusActivityOptions)
	var out agent.ToolResult
	if err := workflow.ExecuteLocalActivity(dctx, ActivityPeerDone, done).Get(dctx, &out); err != nil {
		return agent.ToolResult{}, stepError(err)
	}
	e.index++
	e.nextSeq++
	return out, nil
}

// peerPrepareOptions: the preparation resolves the peer (knowledge
// retrieval may call an embedding model), so it gets longer than a status
// step.
var peerPrepareOptions = workflow.LocalActivityOptions{
	ScheduleToCloseTimeout: 4 * time.Minute,
	StartToCloseTimeout:    time.Minute,
	RetryPolicy:            statusActivityOptions.RetryPolicy,
}

// PeerAnswer is the tool result a parent's model sees for a child's end.
func PeerAnswer(peer string, res PeerRunResult) (content string, isError bool) {
	switch {
	case res.Status == models.RunFinished:
		return res.Reply, false
	case res.TimedOut:
		return fmt.Sprintf("peer %s ran out of the run's working time: %s", peer, res.Error), true
	case res.Status == models.RunCancelled:
		return fmt.Sprintf("peer %s was cancelled", peer), true
	}
	return fmt.Sprintf("peer %s failed: %s", peer, strings.TrimSpace(res.Error)), true
}
