package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
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

// harness is a test workflow environment with the workflows.TaskRun activities
// mocked; it records what the workflow asked of them.
type harness struct {
	env  *testsuite.TestWorkflowEnvironment
	acts *activities.TaskRunActivities

	mu       sync.Mutex
	llmCalls []workflows.LLMTurnInput
	tools    []workflows.ToolInput
	started  int
	outcomes []models.RunOutcome
	// localLLM counts the LLM steps started as local activities.
	localLLM int
}

func newHarness(t *testing.T) *harness {
	var suite testsuite.WorkflowTestSuite
	h := &harness{env: suite.NewTestWorkflowEnvironment(), acts: &activities.TaskRunActivities{}}
	h.env.RegisterWorkflowWithOptions(workflows.TaskRun, workflow.RegisterOptions{Name: workflows.TaskRunWorkflowName})
	h.env.RegisterActivity(h.acts)
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		if info.ActivityType.Name == workflows.ActivityTaskRunLLMTurn {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.localLLM++
		}
	})
	h.env.OnActivity(h.acts.TaskRunStart, mock.Anything, mock.Anything).Return(func(context.Context, workflows.RunRef) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.started++
		return nil
	}).Maybe()
	h.env.OnActivity(h.acts.TaskRunFinish, mock.Anything, mock.Anything).Return(func(_ context.Context, o models.RunOutcome) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.outcomes = append(h.outcomes, o)
		return nil
	}).Maybe()
	h.env.OnActivity(h.acts.TaskRunTool, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.ToolInput) (agent.ToolResult, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.tools = append(h.tools, in)
		return agent.ToolResult{Content: "wrote", Files: []agent.ProducedFile{{Path: "/a/r.md", SizeBytes: 3, Tool: "write_file"}}}, nil
	}).Maybe()
	return h
}

// onLLM answers LLM turns with fn (after an optional delay on the
// workflow clock).
func (h *harness) onLLM(after time.Duration, fn func(n int, in workflows.LLMTurnInput) (*llm.Response, error)) {
	call := h.env.OnActivity(h.acts.TaskRunLLMTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.LLMTurnInput) (*llm.Response, error) {
		h.mu.Lock()
		h.llmCalls = append(h.llmCalls, in)
		n := len(h.llmCalls)
		h.mu.Unlock()
		return fn(n, in)
	})
	if after > 0 {
		call.After(after)
	}
}

func input() workflows.TaskRunInput {
	return workflows.TaskRunInput{TaskID: 42, RunID: 7, Attempt: 3, AgentID: "writer", Title: "Write", Trigger: workflows.TriggerAPI, Subject: "admin",
		Snapshot: "0123abcd",
		Agent:    agent.Input{Provider: "ollama", Model: "m", UserText: "Task #42: Write", MaxTurns: 4, Tools: agent.ToolsFor([]string{"write_file"})}.Outline()}
}

// eachStepKind runs test for a run whose LLM turns are activities (runs
// requested before LocalLLMTurns) and for one whose turns are local
// activities, and checks that the turns ran as asked.
func eachStepKind(t *testing.T, test func(t *testing.T, h *harness, in workflows.TaskRunInput)) {
	for _, local := range []bool{false, true} {
		name := "activities"
		if local {
			name = "local activities"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			in := input()
			in.LocalLLMTurns = local
			test(t, h, in)
			h.mu.Lock()
			defer h.mu.Unlock()
			if local != (h.localLLM > 0) {
				t.Fatalf("%d LLM steps ran as local activities in a run with LocalLLMTurns %v", h.localLLM, local)
			}
		})
	}
}

func (h *harness) outcome(t *testing.T) models.RunOutcome {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.outcomes) != 1 {
		t.Fatalf("outcomes recorded: %d, want 1", len(h.outcomes))
	}
	return h.outcomes[0]
}

func TestTaskRunFinishesWithToolCall(t *testing.T) {
	eachStepKind(t, func(t *testing.T, h *harness, in workflows.TaskRunInput) {
		h.onLLM(0, func(n int, in workflows.LLMTurnInput) (*llm.Response, error) {
			if n == 1 {
				return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"r.md","content":"abc"}`)}},
					Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, nil
			}
			return &llm.Response{Content: "Done.", Usage: llm.Usage{InputTokens: 20, OutputTokens: 2}}, nil
		})
		h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
		if !h.env.IsWorkflowCompleted() || h.env.GetWorkflowError() != nil {
			t.Fatalf("workflow: completed=%v err=%v", h.env.IsWorkflowCompleted(), h.env.GetWorkflowError())
		}
		var res workflows.TaskRunResult
		if err := h.env.GetWorkflowResult(&res); err != nil || res.Status != models.RunFinished || res.Reply != "Done." {
			t.Fatalf("result %+v %v", res, err)
		}
		o := h.outcome(t)
		if o.Status != models.RunFinished || o.Turns != 2 || o.InputTokens != 30 || o.OutputTokens != 7 || o.Reply != "Done." || o.StopReason != agent.StopFinished {
			t.Fatalf("outcome %+v", o)
		}
		if h.started != 1 || len(h.tools) != 1 || h.tools[0].CallID != "c1" || h.tools[0].Run.RunID != 7 {
			t.Fatalf("started=%d tools=%+v", h.started, h.tools)
		}
		// The LLM call id is stable per workflow, attempt and turn.
		if got := activities.CallID(h.llmCalls[1].Run, h.llmCalls[1].Turn); got != "task-42-a3-t2" {
			t.Fatalf("call id %q", got)
		}
	})
}

func TestTaskRunRetriesFailingLLMTurn(t *testing.T) {
	eachStepKind(t, func(t *testing.T, h *harness, in workflows.TaskRunInput) {
		h.onLLM(0, func(n int, in workflows.LLMTurnInput) (*llm.Response, error) {
			if n == 1 {
				return nil, temporal.NewApplicationError("llm provider \"ollama\": HTTP 503: overloaded", workflows.ErrTypeProvider)
			}
			return &llm.Response{Content: "ok"}, nil
		})
		h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
		if err := h.env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if len(h.llmCalls) != 2 || h.llmCalls[0].Turn != 1 || h.llmCalls[1].Turn != 1 {
			t.Fatalf("llm calls: %d", len(h.llmCalls))
		}
		if o := h.outcome(t); o.Status != models.RunFinished || o.Turns != 1 {
			t.Fatalf("outcome %+v", o)
		}
	})
}

func TestTaskRunFailsOnNonRetryableError(t *testing.T) {
	eachStepKind(t, func(t *testing.T, h *harness, in workflows.TaskRunInput) {
		h.onLLM(0, func(int, workflows.LLMTurnInput) (*llm.Response, error) {
			return nil, temporal.NewNonRetryableApplicationError("llm provider \"ollama\": HTTP 400: bad model", workflows.ErrTypeLLMRejected, nil)
		})
		h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
		var app *temporal.ApplicationError
		if err := h.env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeTaskRunFailed {
			t.Fatalf("workflow error %v", err)
		}
		if len(h.llmCalls) != 1 {
			t.Fatalf("a non-retryable error was retried: %d calls", len(h.llmCalls))
		}
		o := h.outcome(t)
		if o.Status != models.RunFailed || o.Error != `turn 1: llm provider "ollama": HTTP 400: bad model` {
			t.Fatalf("outcome %+v", o)
		}
	})
}

// TestTaskRunTimesOutAfter15Minutes: the run's timer ends a turn that
// never answers. With LLM turns as local activities the timer reaches the
// workflow only when the SDK renews the workflow task, which this test
// environment does not do while a local activity runs (it stops its
// clock); e2e's TestTaskRunLocalLLMTurnEndsOnDeadlineAndCancel shows that
// case on the real server.
func TestTaskRunTimesOutAfter15Minutes(t *testing.T) {
	h := newHarness(t)
	// The model never answers within the run's limit.
	h.onLLM(20*time.Minute, func(int, workflows.LLMTurnInput) (*llm.Response, error) {
		return &llm.Response{Content: "too late"}, nil
	})
	start := h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, input())
	if !h.env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var app *temporal.ApplicationError
	if err := h.env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != workflows.ErrTypeTaskRunFailed {
		t.Fatalf("workflow error %v", err)
	}
	o := h.outcome(t)
	if o.Status != models.RunFailed || !o.TimedOut || !strings.Contains(o.Error, "15m0s") {
		t.Fatalf("outcome %+v", o)
	}
	if elapsed := h.env.Now().Sub(start); elapsed < workflows.TaskRunTimeout || elapsed >= 20*time.Minute {
		t.Fatalf("ended after %s of workflow time, want the 15m limit", elapsed)
	}
}

func TestTaskRunCancellation(t *testing.T) {
	eachStepKind(t, func(t *testing.T, h *harness, in workflows.TaskRunInput) {
		h.onLLM(10*time.Minute, func(int, workflows.LLMTurnInput) (*llm.Response, error) {
			return &llm.Response{Content: "never"}, nil
		})
		h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
		h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
		if !h.env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		var canceled *temporal.CanceledError
		if err := h.env.GetWorkflowError(); !errors.As(err, &canceled) {
			t.Fatalf("workflow error %v, want cancelled", err)
		}
		if o := h.outcome(t); o.Status != models.RunCancelled {
			t.Fatalf("outcome %+v", o)
		}
	})
}

func TestTaskRunStopsWhenRunIsGone(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	acts := &activities.TaskRunActivities{}
	env.RegisterWorkflowWithOptions(workflows.TaskRun, workflow.RegisterOptions{Name: workflows.TaskRunWorkflowName})
	env.RegisterActivity(acts)
	env.OnActivity(acts.TaskRunStart, mock.Anything, mock.Anything).
		Return(temporal.NewNonRetryableApplicationError("run 7 not found", workflows.ErrTypeRunGone, nil)).Once()
	env.ExecuteWorkflow(workflows.TaskRunWorkflowName, input())
	if err := env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "run 7 not found") {
		t.Fatalf("workflow error %v", err)
	}
	env.AssertExpectations(t)
}

// TestTaskRunPassesPositionsNotMessages: the workflow hands its steps the
// positions of their messages in the run log (opening messages 0..1, the
// assistant's tool calls at 2, their results at 3 and 4) and the snapshot
// hash, never the conversation.
func TestTaskRunPassesPositionsNotMessages(t *testing.T) {
	h := newHarness(t)
	h.onLLM(0, func(n int, in workflows.LLMTurnInput) (*llm.Response, error) {
		if n == 1 {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file"}, {ID: "c2", Name: "write_file"}}}, nil
		}
		return &llm.Response{Content: "Done."}, nil
	})
	in := input()
	in.Agent.SystemPrompt = "(system prompt)"
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(h.llmCalls) != 2 || h.llmCalls[0].Messages != 2 || h.llmCalls[1].Messages != 5 || h.llmCalls[0].Run.Snapshot != "0123abcd" {
		t.Fatalf("llm steps %+v", h.llmCalls)
	}
	if len(h.tools) != 2 || h.tools[0].CallSeq != 2 || h.tools[0].Index != 0 || h.tools[0].ResultSeq != 3 ||
		h.tools[1].CallSeq != 2 || h.tools[1].Index != 1 || h.tools[1].ResultSeq != 4 || h.tools[1].CallID != "c2" {
		t.Fatalf("tool steps %+v", h.tools)
	}
	if h.llmCalls[0].Run.Key() != "task-42-a3" {
		t.Fatalf("run key %q", h.llmCalls[0].Run.Key())
	}
}

// TestTaskRunContinuesAsNewFromCheckpoint: a continued run does not mark
// the run started again, goes on at the checkpoint's turn and position,
// keeps the deadline it was given and records the outcome with the turns
// and usage of the whole run.
func TestTaskRunContinuesAsNewFromCheckpoint(t *testing.T) {
	h := newHarness(t)
	h.onLLM(0, func(n int, in workflows.LLMTurnInput) (*llm.Response, error) {
		return &llm.Response{Content: "Done.", Usage: llm.Usage{InputTokens: 5, OutputTokens: 1}}, nil
	})
	in := input()
	in.Deadline = h.env.Now().Add(time.Hour)
	in.Continuation = &agent.Checkpoint{Turn: 3, Messages: make([]llm.Message, 7),
		Output: agent.Output{Turns: 2, Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}}}
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if h.started != 0 || len(h.llmCalls) != 1 || h.llmCalls[0].Turn != 3 || h.llmCalls[0].Messages != 7 {
		t.Fatalf("started=%d llm steps %+v", h.started, h.llmCalls)
	}
	if o := h.outcome(t); o.Status != models.RunFinished || o.Turns != 3 || o.InputTokens != 15 || o.OutputTokens != 3 {
		t.Fatalf("outcome %+v", o)
	}
}
