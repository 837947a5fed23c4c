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
	"github.com/agentryhq/agentry/internal/llm"
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

// concurrentDelegationChange is the workflow.GetVersion change id of
// starting a turn's several ask_<peer> calls together: a history recorded
// before it ran them one after another.
const concurrentDelegationChange = "concurrent-delegation"

// askedPeer is one delegation of the turn started ahead of its turn in the
// loop: refused (its tool error) or a child whose result is awaited.
type askedPeer struct {
	refused *agent.ToolResult
	child   *PeerRunInput
	childID string
	done    workflow.Future
	result  PeerRunResult
	err     error
}

// delegate runs one ask_<peer> call. When the model asked several peers in
// one turn, the first of those calls prepares them all (in call order, so
// the fan-out limit counts them in order) and starts their child workflows
// together; each call then waits for its own child and stores its answer,
// in call order. Calls that need an approval or were recorded by a retried
// attempt are not started ahead: they go when the loop reaches them.
func (e *durableExecutor) delegate(inv agent.ToolInvocation) (agent.ToolResult, error) {
	if e.asked == nil {
		if ahead := e.delegationsAhead(inv.Turn); len(ahead) > 1 &&
			workflow.GetVersion(e.ctx, concurrentDelegationChange, workflow.DefaultVersion, 1) == 1 {
			e.asked = map[int]*askedPeer{}
			for _, j := range ahead {
				a, err := e.startPeer(inv.Turn, j, e.calls[j])
				if err != nil {
					return agent.ToolResult{}, err
				}
				e.asked[j] = a
			}
		}
	}
	a, ok := e.asked[e.index]
	if !ok {
		var err error
		if a, err = e.startPeer(inv.Turn, e.index, inv.Call); err != nil {
			return agent.ToolResult{}, err
		}
	}
	delete(e.asked, e.index)
	if a.refused != nil {
		e.index++
		e.nextSeq++
		return *a.refused, nil
	}
	return e.finishPeer(inv, a)
}

// delegationsAhead are the indices of the turn's delegation calls from the
// current one on that may start now: no approval needed, not recorded by a
// retried attempt.
func (e *durableExecutor) delegationsAhead(turn int) []int {
	var out []int
	for j := e.index; j < len(e.calls); j++ {
		name := e.calls[j].Name
		if !e.isDelegation(name) || e.run.approvals.Needs(name) {
			continue
		}
		if _, ok := e.run.reuse.result(turn, j); ok {
			continue
		}
		out = append(out, j)
	}
	return out
}

// startPeer prepares the delegation call at index (PeerPrepare) and, unless
// it is refused, starts its child workflow.
func (e *durableExecutor) startPeer(turn, index int, call llm.ToolCall) (*askedPeer, error) {
	r := e.run
	d := *r.delegation
	childID := PeerRunWorkflowID(r.ref, turn, index)
	resultSeq := e.callSeq + 1 + index
	lctx := workflow.WithLocalActivityOptions(e.ctx, peerPrepareOptions)
	prep := PeerPrepareInput{Parent: r.ref, Delegation: d, Turn: turn, CallSeq: e.callSeq, Index: index, ResultSeq: resultSeq,
		CallID: call.ID, Name: call.Name, ChildWorkflowID: childID, Deadline: r.deadline}
	var prepared PeerPrepared
	if err := workflow.ExecuteLocalActivity(lctx, ActivityPeerPrepare, prep).Get(lctx, &prepared); err != nil {
		return nil, stepError(err)
	}
	if prepared.Refused != nil {
		return &askedPeer{refused: prepared.Refused}, nil
	}
	r.delegation.Started++
	cctx := workflow.WithChildOptions(e.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:               childID,
		WorkflowExecutionTimeout: PeerRunExecutionTimeout,
		ParentClosePolicy:        enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:      true,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	})
	a := &askedPeer{child: prepared.Child, childID: childID}
	done, settle := workflow.NewFuture(e.ctx)
	a.done = done
	r.children++
	child := workflow.ExecuteChildWorkflow(cctx, PeerRunWorkflowName, *prepared.Child)
	workflow.Go(e.ctx, func(ctx workflow.Context) {
		a.err = child.Get(ctx, &a.result)
		if a.result.Deadline.After(r.deadline) {
			r.deadline = a.result.Deadline // its parked time moved it; before runUntil looks
		}
		r.children--
		settle.Set(nil, nil)
	})
	return a, nil
}

// finishPeer waits for a started child and stores its answer as the call's
// tool result (PeerDone).
func (e *durableExecutor) finishPeer(inv agent.ToolInvocation, a *askedPeer) (agent.ToolResult, error) {
	r := e.run
	_ = a.done.Get(e.ctx, nil)
	if e.ctx.Err() != nil {
		return agent.ToolResult{}, stepError(temporal.NewCanceledError("cancelled while peer " + a.child.Run.AgentID + " ran"))
	}
	res := a.result
	if a.err != nil && res.Status == "" {
		res = PeerRunResult{PeerRunID: a.child.PeerRunID, Status: models.RunFailed, Error: stepError(a.err).Error()}
	}
	done := PeerDoneInput{Parent: r.ref, Delegation: *r.delegation, Turn: inv.Turn, ResultSeq: e.nextSeq, CallID: inv.Call.ID, Name: inv.Call.Name,
		ChildWorkflowID: a.childID, Result: res}
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
