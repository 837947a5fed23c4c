package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// firingEnv runs ScheduledAgent turn by turn with the step activities
// mocked: llm answers each turn.
type firingEnv struct {
	env  *testsuite.TestWorkflowEnvironment
	acts *activities.ScheduledActivities

	mu        sync.Mutex
	turns     []workflows.LLMTurnInput
	tools     []workflows.ToolInput
	finished  []workflows.ScheduledFinishInput
	delivered []workflows.DeliveryInput
}

var preparedRun = workflows.ScheduledPrepared{Status: models.ScheduleRunRunning,
	Run:   workflows.RunRef{WorkflowID: "agentry:schedule:reporter-2026-11-23T09:00:00Z", Attempt: 1, AgentID: "reporter", Snapshot: "abc"},
	Agent: agent.Input{Provider: "ollama", Model: "m", SystemPrompt: "(system prompt)", UserText: "report", MaxTurns: 5}, SessionID: "scheduled-reporter-1"}

func newFiringEnv(t *testing.T, prep workflows.ScheduledPrepared, turn func(workflows.LLMTurnInput) (*llm.Response, error), toolTakes ...time.Duration) *firingEnv {
	return newFiringEnvWith(t, nil, prep, turn, toolTakes...)
}

// newFiringEnvWith is newFiringEnv with register called before any mock
// (registrations cannot follow mocks).
func newFiringEnvWith(t *testing.T, register func(*testsuite.TestWorkflowEnvironment), prep workflows.ScheduledPrepared, turn func(workflows.LLMTurnInput) (*llm.Response, error), toolTakes ...time.Duration) *firingEnv {
	var suite testsuite.WorkflowTestSuite
	f := &firingEnv{env: suite.NewTestWorkflowEnvironment(), acts: &activities.ScheduledActivities{}}
	f.env.RegisterWorkflowWithOptions(workflows.ScheduledAgent, workflow.RegisterOptions{Name: workflows.ScheduledAgentWorkflowName})
	f.env.RegisterWorkflowWithOptions(workflows.Delivery, workflow.RegisterOptions{Name: workflows.DeliveryWorkflowName})
	f.env.RegisterActivity(f.acts)
	if register != nil {
		register(f.env)
	}
	f.env.OnActivity(f.acts.ScheduledAgentPrepare, mock.Anything, mock.Anything).Return(&prep, nil)
	f.env.OnActivity(f.acts.ScheduledLLMTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
		f.mu.Lock()
		f.turns = append(f.turns, in)
		f.mu.Unlock()
		return turn(in)
	}).Maybe()
	took := time.Duration(0)
	if len(toolTakes) > 0 {
		took = toolTakes[0]
	}
	f.env.OnActivity(f.acts.ScheduledTool, mock.Anything, mock.Anything).After(took).Return(func(_ context.Context, in workflows.ToolInput) (agent.ToolResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.tools = append(f.tools, in)
		return agent.ToolResult{Content: "wrote 3 bytes"}, nil
	}).Maybe()
	f.env.OnActivity(f.acts.ScheduledAgentFinish, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.ScheduledFinishInput) (*workflows.ScheduledRunResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.finished = append(f.finished, in)
		res := &workflows.ScheduledRunResult{Status: in.Status, Error: in.Error, Code: in.Code}
		if in.Status == models.ScheduleRunSucceeded {
			id := activities.FiringDeliveryID(in.Run.WorkflowID)
			res.Delivery = &workflows.DeliveryInput{DeliveryID: id, Channel: "webhook", Body: `{"text":"report"}`}
		}
		return res, nil
	}).Maybe()
	f.env.OnActivity(f.acts.ScheduledAgentRecord, mock.Anything, mock.Anything).Return(nil).Maybe()
	f.env.OnWorkflow(workflows.DeliveryWorkflowName, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, msg workflows.DeliveryInput) (*workflows.DeliveryResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.delivered = append(f.delivered, msg)
		return &workflows.DeliveryResult{DeliveryID: msg.DeliveryID, Status: models.DeliveryDelivered}, nil
	}).Maybe()
	return f
}

func (f *firingEnv) run(t *testing.T) workflows.ScheduledAgentResult {
	t.Helper()
	f.env.ExecuteWorkflow(workflows.ScheduledAgentWorkflowName, firing)
	var res workflows.ScheduledAgentResult
	_ = f.env.GetWorkflowResult(&res)
	return res
}

// Each turn and each tool call is its own step, addressed by positions in
// the run log; the finish step gets the outcome and the reply is handed to
// Delivery under the id derived from the firing.
func TestFiringRunsTurnByTurn(t *testing.T) {
	// Firings prepared before LocalLLMTurns (LLM activities) and since
	// (LLM turns as local activities) run the same steps.
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local LLM turns %v", local), func(t *testing.T) {
			prep := preparedRun
			prep.LocalLLMTurns = local
			f := newFiringEnv(t, prep, func(in workflows.LLMTurnInput) (*llm.Response, error) {
				if in.Turn == 1 {
					return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{}`)}}}, nil
				}
				return &llm.Response{Content: "The report.", Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}}, nil
			})
			localTurns := 0
			f.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
				if info.ActivityType.Name == workflows.ActivityScheduledLLMTurn {
					localTurns++
				}
			})
			res := f.run(t)
			if err := f.env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if len(f.turns) != 2 || f.turns[0].Messages != 2 || f.turns[1].Messages != 4 || f.turns[0].Run.WorkflowID != preparedRun.Run.WorkflowID {
				t.Fatalf("turns %+v", f.turns)
			}
			if len(f.tools) != 1 || f.tools[0].CallSeq != 2 || f.tools[0].ResultSeq != 3 {
				t.Fatalf("tools %+v", f.tools)
			}
			want := activities.FiringDeliveryID(preparedRun.Run.WorkflowID)
			if len(f.finished) != 1 || f.finished[0].Status != models.ScheduleRunSucceeded || f.finished[0].Turns != 2 || f.finished[0].SessionID != preparedRun.SessionID {
				t.Fatalf("finished %+v", f.finished)
			}
			if res.Status != models.ScheduleRunSucceeded || res.DeliveryID != want || len(f.delivered) != 1 || f.delivered[0].DeliveryID != want {
				t.Fatalf("result %+v delivered %+v", res, f.delivered)
			}
			if want := map[bool]int{false: 0, true: 2}[local]; localTurns != want {
				t.Fatalf("%d of 2 turns ran as local activities, want %d", localTurns, want)
			}
		})
	}
}

func TestFiringSkippedAtPrepareRunsNothing(t *testing.T) {
	f := newFiringEnv(t, workflows.ScheduledPrepared{Status: models.ScheduleRunSkipped, Error: "agent reporter is disabled"},
		func(workflows.LLMTurnInput) (*llm.Response, error) {
			t.Fatal("a skipped firing called the model")
			return nil, nil
		})
	res := f.run(t)
	if f.env.GetWorkflowError() != nil || res.Status != models.ScheduleRunSkipped || len(f.finished) != 0 || len(f.delivered) != 0 {
		t.Fatalf("result %+v err %v finished %d delivered %d", res, f.env.GetWorkflowError(), len(f.finished), len(f.delivered))
	}
}

// Admission refusing the first turn skips the firing with the rejection's
// code, as a synchronous run's refusal did; nothing is delivered.
func TestFiringRefusedByCostsIsSkippedWithTheCode(t *testing.T) {
	f := newFiringEnv(t, preparedRun, func(workflows.LLMTurnInput) (*llm.Response, error) {
		return nil, temporal.NewNonRetryableApplicationError("daily budget exhausted", workflows.ErrTypeCostRejected, nil, "budget_exceeded")
	})
	res := f.run(t)
	if f.env.GetWorkflowError() != nil || res.Status != models.ScheduleRunSkipped || len(f.delivered) != 0 {
		t.Fatalf("result %+v err %v delivered %d", res, f.env.GetWorkflowError(), len(f.delivered))
	}
	if len(f.finished) != 1 || f.finished[0].Code != "budget_exceeded" || f.finished[0].Status != models.ScheduleRunSkipped {
		t.Fatalf("finished %+v", f.finished)
	}
}

// A model that never stops asking for tools ends at the firing's time
// bound: recorded failed, nothing delivered.
func TestFiringTimesOut(t *testing.T) {
	prep := preparedRun
	prep.Agent.MaxTurns = 1000
	f := newFiringEnv(t, prep, func(in workflows.LLMTurnInput) (*llm.Response, error) {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c", Name: "write_file"}}}, nil
	}, workflows.ScheduledRunTimeout/3)
	f.run(t)
	if f.env.GetWorkflowError() == nil || len(f.delivered) != 0 || len(f.finished) != 1 || f.finished[0].Status != models.ScheduleRunFailed {
		t.Fatalf("err %v finished %+v", f.env.GetWorkflowError(), f.finished)
	}
}
