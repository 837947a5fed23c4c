package workflows_test

import (
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// retryInput is a retry of a run whose turns 1 and 2 (one write_file each)
// finished and whose turn 3 answered with two tool calls of which the
// first finished: positions 0 user, 1 answer 1, 2 its result, 3 answer 2,
// 4 its result, 5 answer 3, 6 the first result of it.
func retryInput() workflows.TaskRunInput {
	in := input()
	in.Attempt, in.Trigger = 4, workflows.TriggerRetry
	in.Agent.MaxTurns = 5
	call := func(id string) []llm.ToolCall { return []llm.ToolCall{{ID: id, Name: "write_file"}} }
	in.Reuse = &workflows.ReusedSteps{RetryOf: 6, FromAttempt: 3, Turns: []workflows.ReusedTurn{
		{Seq: 1, Answer: llm.Response{ToolCalls: call("c1")}, Results: []agent.ToolResult{{Content: "wrote a"}}},
		{Seq: 3, Answer: llm.Response{Content: "half way", ToolCalls: call("c2")}, Results: []agent.ToolResult{{Content: "wrote b"}}},
		{Seq: 5, Answer: llm.Response{ToolCalls: append(call("c3"), call("c4")...)}, Results: []agent.ToolResult{{Content: "wrote c"}}},
	}}
	return in
}

// A retried run takes over the recorded steps without running them: the
// only tool activity is the unfinished call of turn 3 (at its positions in
// the copied run log), the only LLM activity turn 4, which sends the whole
// recorded conversation; the usage is what the new attempt paid.
func TestTaskRunRetryReusesRecordedSteps(t *testing.T) {
	h := newHarness(t)
	h.onLLM(0, func(int, workflows.LLMTurnInput) (*llm.Response, error) {
		return &llm.Response{Content: "All written.", Usage: llm.Usage{InputTokens: 40, OutputTokens: 3}}, nil
	})
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, retryInput())
	if !h.env.IsWorkflowCompleted() || h.env.GetWorkflowError() != nil {
		t.Fatalf("workflow: completed=%v err=%v", h.env.IsWorkflowCompleted(), h.env.GetWorkflowError())
	}
	if len(h.llmCalls) != 1 || h.llmCalls[0].Turn != 4 || h.llmCalls[0].Messages != 8 || h.llmCalls[0].Run.Trigger != workflows.TriggerRetry {
		t.Fatalf("LLM activities %+v, want turn 4 only, sending 8 messages", h.llmCalls)
	}
	if len(h.tools) != 1 || h.tools[0].Turn != 3 || h.tools[0].CallID != "c4" || h.tools[0].Index != 1 ||
		h.tools[0].CallSeq != 5 || h.tools[0].ResultSeq != 7 {
		t.Fatalf("tool activities %+v, want the second call of turn 3 only", h.tools)
	}
	o := h.outcome(t)
	if o.Status != models.RunFinished || o.Turns != 4 || o.Reply != "All written." || o.InputTokens != 40 || o.OutputTokens != 3 {
		t.Fatalf("outcome %+v", o)
	}
	if h.started != 1 {
		t.Fatalf("started %d", h.started)
	}
}

// A retry whose recorded steps end in the final answer (the run timed out
// just after it) finishes with that reply and asks nothing.
func TestTaskRunRetryOfARecordedFinalAnswerAsksNothing(t *testing.T) {
	h := newHarness(t)
	h.onLLM(0, func(int, workflows.LLMTurnInput) (*llm.Response, error) {
		t.Error("the provider was asked")
		return &llm.Response{Content: "no"}, nil
	})
	in := retryInput()
	in.Reuse.Turns[2] = workflows.ReusedTurn{Seq: 5, Answer: llm.Response{Content: "Done before the timeout."}}
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
	o := h.outcome(t)
	if o.Status != models.RunFinished || o.Reply != "Done before the timeout." || o.Turns != 3 || len(h.tools) != 0 {
		t.Fatalf("outcome %+v, tools %+v", o, h.tools)
	}
}

// Recorded steps that do not match the conversation the loop rebuilds
// fail the run with a reason instead of sending a wrong conversation.
func TestTaskRunRetryOutOfStepFails(t *testing.T) {
	h := newHarness(t)
	h.onLLM(0, func(int, workflows.LLMTurnInput) (*llm.Response, error) { return &llm.Response{Content: "x"}, nil })
	in := retryInput()
	in.Reuse.Turns[1].Seq = 4
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
	o := h.outcome(t)
	if o.Status != models.RunFailed || !strings.Contains(o.Error, "recorded turn 2 of run 6 is at position 4") || len(h.llmCalls) != 0 {
		t.Fatalf("outcome %+v, LLM calls %d", o, len(h.llmCalls))
	}
}
