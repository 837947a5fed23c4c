package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// A firing whose agent has peers delegates as a task run does
// (docs/teams.md): its ask_<peer> call starts the peer's run as a child
// workflow named from the firing's run, the child's turns carry the
// firing's ledger run id as root, and the child's answer is the firing's
// tool result before its reply is delivered.
func TestFiringDelegatesToPeerChild(t *testing.T) {
	prep := preparedRun
	root := activities.FiringRunID(prep.Run.WorkflowID)
	prep.Delegation = &workflows.Delegation{Peers: []string{"research"}, RunID: root, RootRunID: root, Lineage: []string{"reporter"}}
	peers := &activities.PeerActivities{}
	f := newFiringEnvWith(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(workflows.PeerRun, workflow.RegisterOptions{Name: workflows.PeerRunWorkflowName})
		env.RegisterActivity(peers)
	}, prep, func(in workflows.LLMTurnInput) (*llm.Response, error) {
		if in.Turn == 1 {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "ask_research"}}}, nil
		}
		return &llm.Response{Content: "report with research"}, nil
	})
	var prepared []workflows.PeerPrepareInput
	var done []workflows.PeerDoneInput
	var childTurns []workflows.LLMTurnInput
	f.env.OnActivity(peers.PeerPrepare, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.PeerPrepareInput) (*workflows.PeerPrepared, error) {
		prepared = append(prepared, in)
		ref := workflows.RunRef{RunID: 5, Attempt: 1, AgentID: "research", WorkflowID: in.ChildWorkflowID, Trigger: workflows.TriggerPeer,
			Snapshot: "feed", RootRunID: in.Delegation.RootRunID}
		return &workflows.PeerPrepared{Child: &workflows.PeerRunInput{PeerRunID: 5, Run: ref, ParentWorkflowID: in.Parent.WorkflowID,
			Agent: agent.Input{UserText: "find", MaxTurns: 2}, Deadline: in.Deadline}}, nil
	})
	f.env.OnActivity(peers.PeerRunStart, mock.Anything, mock.Anything).Return(nil)
	f.env.OnActivity(peers.PeerLLMTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
		childTurns = append(childTurns, in)
		return &llm.Response{Content: "found it"}, nil
	})
	f.env.OnActivity(peers.PeerRunFinish, mock.Anything, mock.Anything).Return(nil)
	f.env.OnActivity(peers.PeerDone, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.PeerDoneInput) (agent.ToolResult, error) {
		done = append(done, in)
		c, isErr := workflows.PeerAnswer("research", in.Result)
		return agent.ToolResult{Content: c, IsError: isErr}, nil
	})
	res := f.run(t)
	if err := f.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if res.Status != models.ScheduleRunSucceeded || len(f.delivered) != 1 {
		t.Fatalf("result %+v, delivered %d", res, len(f.delivered))
	}
	if len(prepared) != 1 || prepared[0].ChildWorkflowID != prep.Run.Key()+"-peer-1-0" || prepared[0].Delegation.RootRunID != root {
		t.Fatalf("prepared %+v", prepared)
	}
	if len(childTurns) != 1 || childTurns[0].Run.RootRunID != root {
		t.Fatalf("child turns %+v", childTurns)
	}
	if len(done) != 1 || done[0].Result.Reply != "found it" || done[0].Result.Status != models.RunFinished {
		t.Fatalf("done %+v", done)
	}
	if len(f.tools) != 0 || len(f.turns) != 2 || len(f.finished) != 1 || f.finished[0].Status != models.ScheduleRunSucceeded {
		t.Fatalf("firing: tools %d, turns %d, finished %+v", len(f.tools), len(f.turns), f.finished)
	}
}

// A firing prepared without a Delegation (an agent without peers, or a
// history from before) sends an ask_ call to its tool step as before.
func TestFiringWithoutDelegationHasNoPeerPath(t *testing.T) {
	f := newFiringEnv(t, preparedRun, func(in workflows.LLMTurnInput) (*llm.Response, error) {
		if in.Turn == 1 {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "ask_research"}}}, nil
		}
		return &llm.Response{Content: "done"}, nil
	})
	f.run(t)
	if err := f.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 1 || f.tools[0].Name != "ask_research" {
		t.Fatalf("tools %+v", f.tools)
	}
}
