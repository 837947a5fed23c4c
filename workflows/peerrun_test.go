package workflows_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// peerHarness is a TaskRun whose agent has a peer, with the task-run and
// peer activities mocked: the parent's first turn asks the peer, its
// second answers.
type peerHarness struct {
	env   *testsuite.TestWorkflowEnvironment
	tr    *activities.TaskRunActivities
	peers *activities.PeerActivities

	mu          sync.Mutex
	parentTurns int
	childTurns  int
	prepared    []workflows.PeerPrepareInput
	done        []workflows.PeerDoneInput
	childEnds   []workflows.PeerRunOutcome
	childStarts int
	outcomes    []models.RunOutcome
	// asks is how many peers the parent's first turn asks (1 unless set);
	// answersAtPrepare how many answers were stored at each preparation
	// (the test environment may run a started child while the parent
	// prepares the next, so child starts are no measure of the order).
	asks             int
	answersAtPrepare []int
}

func newPeerHarness(t *testing.T, refuse bool, childTurn time.Duration) *peerHarness {
	var suite testsuite.WorkflowTestSuite
	h := &peerHarness{env: suite.NewTestWorkflowEnvironment(), tr: &activities.TaskRunActivities{}, peers: &activities.PeerActivities{}}
	h.env.RegisterWorkflowWithOptions(workflows.TaskRun, workflow.RegisterOptions{Name: workflows.TaskRunWorkflowName})
	h.env.RegisterWorkflowWithOptions(workflows.PeerRun, workflow.RegisterOptions{Name: workflows.PeerRunWorkflowName})
	h.env.RegisterActivity(h.tr)
	h.env.RegisterActivity(h.peers)
	h.env.OnActivity(h.tr.TaskRunStart, mock.Anything, mock.Anything).Return(nil).Maybe()
	h.env.OnActivity(h.tr.TaskRunFinish, mock.Anything, mock.Anything).Return(func(_ context.Context, o models.RunOutcome) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.outcomes = append(h.outcomes, o)
		return nil
	}).Maybe()
	h.env.OnActivity(h.tr.TaskRunLLMTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.parentTurns++
		if in.Turn == 1 {
			calls := []llm.ToolCall{{ID: "c1", Name: "ask_research"}}
			for i := 2; i <= h.asks; i++ {
				calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "ask_research"})
			}
			return &llm.Response{ToolCalls: calls, Usage: llm.Usage{InputTokens: 1}}, nil
		}
		return &llm.Response{Content: "all done"}, nil
	}).Maybe()
	h.env.OnActivity(h.peers.PeerPrepare, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.PeerPrepareInput) (*workflows.PeerPrepared, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.prepared = append(h.prepared, in)
		h.answersAtPrepare = append(h.answersAtPrepare, len(h.done))
		if refuse {
			return &workflows.PeerPrepared{Refused: &agent.ToolResult{Content: "delegation depth limit reached (3)", IsError: true}}, nil
		}
		ref := workflows.RunRef{RunID: 11, Attempt: 1, AgentID: "research", WorkflowID: in.ChildWorkflowID, Trigger: workflows.TriggerPeer,
			Snapshot: "feed", RootRunID: in.Delegation.RootRunID}
		return &workflows.PeerPrepared{Child: &workflows.PeerRunInput{PeerRunID: 11, Run: ref, ParentWorkflowID: in.Parent.WorkflowID,
			Agent: agent.Input{UserText: "find", MaxTurns: 2}, Deadline: in.Deadline}}, nil
	}).Maybe()
	h.env.OnActivity(h.peers.PeerRunStart, mock.Anything, mock.Anything).Return(func(context.Context, workflows.RunRef) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.childStarts++
		return nil
	}).Maybe()
	llmCall := h.env.OnActivity(h.peers.PeerLLMTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.childTurns++
		if in.Run.RootRunID != "taskrun-7" {
			t.Errorf("child turn carries root run id %q", in.Run.RootRunID)
		}
		return &llm.Response{Content: "found it"}, nil
	}).Maybe()
	if childTurn > 0 {
		llmCall.After(childTurn)
	}
	h.env.OnActivity(h.peers.PeerRunFinish, mock.Anything, mock.Anything).Return(func(_ context.Context, o workflows.PeerRunOutcome) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.childEnds = append(h.childEnds, o)
		return nil
	}).Maybe()
	h.env.OnActivity(h.peers.PeerDone, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.PeerDoneInput) (agent.ToolResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.done = append(h.done, in)
		c, isErr := workflows.PeerAnswer("research", in.Result)
		return agent.ToolResult{Content: c, IsError: isErr}, nil
	}).Maybe()
	return h
}

func peerInput() workflows.TaskRunInput {
	in := input()
	in.Delegation = &workflows.Delegation{Peers: []string{"research"}, RunID: "taskrun-7", RootRunID: "taskrun-7", RootTaskID: 42, RootTaskRunID: 7,
		Lineage: []string{"writer"}}
	return in
}

// An ask_<peer> call starts the peer's run as a child workflow with a
// readable id, and the child's answer is the parent's tool result.
func TestDelegationStartsChildAndReturnsItsAnswer(t *testing.T) {
	h := newPeerHarness(t, false, 0)
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, peerInput())
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(h.prepared) != 1 || h.prepared[0].ChildWorkflowID != "task-42-a3-peer-1-0" || h.prepared[0].ResultSeq != 2 {
		t.Fatalf("prepared %+v", h.prepared)
	}
	if h.childStarts != 1 || h.childTurns != 1 || len(h.childEnds) != 1 || h.childEnds[0].Result.Status != models.RunFinished {
		t.Fatalf("child: starts %d turns %d ends %+v", h.childStarts, h.childTurns, h.childEnds)
	}
	if len(h.done) != 1 || h.done[0].Result.Reply != "found it" || h.done[0].ResultSeq != 2 || h.done[0].CallID != "c1" {
		t.Fatalf("done %+v", h.done)
	}
	if h.parentTurns != 2 || len(h.outcomes) != 1 || h.outcomes[0].Status != models.RunFinished || h.outcomes[0].Reply != "all done" {
		t.Fatalf("parent turns %d outcomes %+v", h.parentTurns, h.outcomes)
	}
}

// A refused delegation (depth limit, cycle, unknown or disabled peer) is a
// tool error for the model and starts nothing.
func TestRefusedDelegationStartsNothing(t *testing.T) {
	h := newPeerHarness(t, true, 0)
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, peerInput())
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if h.childStarts != 0 || h.childTurns != 0 || len(h.done) != 0 {
		t.Fatalf("a refused delegation started a child: starts %d turns %d done %d", h.childStarts, h.childTurns, len(h.done))
	}
	if h.parentTurns != 2 || h.outcomes[0].Status != models.RunFinished {
		t.Fatalf("parent turns %d outcome %+v", h.parentTurns, h.outcomes)
	}
}

// Cancelling the parent cancels the child (and waits for it): the child
// records cancelled, makes no further LLM turn, and the parent records
// cancelled.
func TestParentCancelStopsChild(t *testing.T) {
	h := newPeerHarness(t, false, 10*time.Minute)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, peerInput())
	if len(h.childEnds) != 1 || h.childEnds[0].Result.Status != models.RunCancelled {
		t.Fatalf("child ends %+v", h.childEnds)
	}
	if h.childTurns > 1 || h.parentTurns != 1 {
		t.Fatalf("turns after the cancel: child %d parent %d", h.childTurns, h.parentTurns)
	}
	if len(h.outcomes) != 1 || h.outcomes[0].Status != models.RunCancelled {
		t.Fatalf("parent outcomes %+v", h.outcomes)
	}
	if len(h.done) != 0 {
		t.Fatalf("a cancelled child's answer was stored: %+v", h.done)
	}
}

// The root's deadline covers the tree: a child still working when the
// parent's working time runs out times out, and so does the parent.
func TestRootDeadlineCoversChild(t *testing.T) {
	h := newPeerHarness(t, false, 20*time.Minute)
	in := peerInput()
	in.Timeout = 5 * time.Minute
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
	if len(h.childEnds) != 1 || !h.childEnds[0].Result.TimedOut {
		t.Fatalf("child ends %+v", h.childEnds)
	}
	if len(h.outcomes) != 1 || h.outcomes[0].Status != models.RunFailed || !h.outcomes[0].TimedOut {
		t.Fatalf("parent outcomes %+v", h.outcomes)
	}
}

// Several ask_<peer> calls of one turn start their children together: all
// are prepared and started (in call order, the fan-out count rising) before
// the parent waits for the first answer, and the answers are stored in call order at their own positions.
func TestDelegationsOfOneTurnRunConcurrently(t *testing.T) {
	h := newPeerHarness(t, false, 0)
	h.asks = 3
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, peerInput())
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.prepared) != 3 || len(h.done) != 3 || h.childStarts != 3 || len(h.childEnds) != 3 {
		t.Fatalf("prepared %d, done %d, children started %d ended %d; want 3 each", len(h.prepared), len(h.done), h.childStarts, len(h.childEnds))
	}
	ids := map[string]bool{}
	for i, p := range h.prepared {
		if h.answersAtPrepare[i] != 0 {
			t.Fatalf("preparation %d came after %d answers were stored: the delegations ran one after another", i, h.answersAtPrepare[i])
		}
		if p.Index != i || p.Delegation.Started != i || p.ResultSeq != p.CallSeq+1+i {
			t.Fatalf("preparation %d: index %d, started %d, result seq %d (call seq %d)", i, p.Index, p.Delegation.Started, p.ResultSeq, p.CallSeq)
		}
		ids[p.ChildWorkflowID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("child workflow ids: %v", ids)
	}
	for i, d := range h.done {
		if d.CallID != fmt.Sprintf("c%d", i+1) || d.ResultSeq != h.prepared[i].ResultSeq || d.Result.Status != models.RunFinished {
			t.Fatalf("answer %d: call %s at %d, status %s", i, d.CallID, d.ResultSeq, d.Result.Status)
		}
	}
	if len(h.outcomes) != 1 || h.outcomes[0].Status != models.RunFinished {
		t.Fatalf("parent outcome: %+v", h.outcomes)
	}
}
