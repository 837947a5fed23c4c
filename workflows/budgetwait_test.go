package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// budgetHarness is the TaskRun harness whose second LLM turn cost
// governance refuses while refused() holds, with the wait records kept.
type budgetHarness struct {
	*harness
	waits   []workflows.RunWaitInput
	waitsAt []time.Time
	// refusedCalls counts the refused attempts of turn 2.
	refusedCalls int
	code         string
	wmu          sync.Mutex
}

func newBudgetHarness(t *testing.T, refused func(now time.Time) bool) *budgetHarness {
	h := &budgetHarness{harness: newHarness(t), code: "budget_exceeded"}
	h.env.OnActivity(h.acts.TaskRunWait, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.RunWaitInput) error {
		h.wmu.Lock()
		defer h.wmu.Unlock()
		h.waits = append(h.waits, in)
		h.waitsAt = append(h.waitsAt, h.env.Now())
		return nil
	}).Maybe()
	// Turn 1 writes a file, turn 2 (refused for a while) answers.
	h.onLLM(0, func(n int, in workflows.LLMTurnInput) (*llm.Response, error) {
		if in.Turn == 1 {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"r.md","content":"x"}`)}},
				Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, nil
		}
		if refused(h.env.Now()) {
			h.wmu.Lock()
			h.refusedCalls++
			h.wmu.Unlock()
			return nil, temporal.NewNonRetryableApplicationError("the day budget of $1.00 has $0.000000 left, not enough for this call",
				workflows.ErrTypeCostRejected, nil, h.code)
		}
		return &llm.Response{Content: "Done.", Usage: llm.Usage{InputTokens: 20, OutputTokens: 2}}, nil
	})
	return h
}

func budgetInput(wait time.Duration) workflows.TaskRunInput {
	in := input()
	in.BudgetWait = wait
	return in
}

func (h *budgetHarness) turns() (first, second int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.llmCalls {
		if c.Turn == 1 {
			first++
		} else {
			second++
		}
	}
	return first, second
}

// A refused turn parks the run; raising the budget (the costs-changed
// signal, 2 hours later, far beyond the 15-minute bound) resumes it at
// once; turn 1 and the tool call are not repeated and the run finishes.
func TestBudgetWaitResumesOnSignal(t *testing.T) {
	raised := false
	h := newBudgetHarness(t, func(time.Time) bool { return !raised })
	h.env.RegisterDelayedCallback(func() {
		raised = true
		h.env.SignalWorkflow(workflows.SignalCostsChanged, nil)
	}, 2*time.Hour)
	start := h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, budgetInput(3*time.Hour))
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(t); o.Status != models.RunFinished || o.Reply != "Done." || o.Turns != 2 {
		t.Fatalf("outcome %+v", o)
	}
	if first, _ := h.turns(); first != 1 || len(h.tools) != 1 {
		t.Fatalf("turn 1 ran %d times, tools %d: finished steps were repeated", first, len(h.tools))
	}
	if len(h.waits) != 2 || h.waits[0].Resume || h.waits[0].WaitingFor != models.WaitingForBudget || h.waits[0].Code != "budget_exceeded" ||
		h.waits[0].Turn != 2 || !h.waits[1].Resume || h.waits[1].Waited != 2*time.Hour {
		t.Fatalf("waits %+v", h.waits)
	}
	if got := h.waitsAt[1].Sub(start); got != 2*time.Hour {
		t.Fatalf("resumed after %s, want at the signal (2h)", got)
	}
	// Checks back off: 30s, 1m, 2m, 4m, 8m, then every 10m until the signal.
	if h.refusedCalls < 10 || h.refusedCalls > 20 {
		t.Fatalf("turn 2 was refused %d times in 2h", h.refusedCalls)
	}
}

// Without a signal the durable timer notices that admission lets the turn
// through again (a period rolled over, reservations were released).
func TestBudgetWaitResumesOnTimer(t *testing.T) {
	var start time.Time
	h := newBudgetHarness(t, func(now time.Time) bool { return now.Sub(start) < 40*time.Minute })
	start = h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, budgetInput(time.Hour))
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(t); o.Status != models.RunFinished {
		t.Fatalf("outcome %+v", o)
	}
	// Checks at 0.5, 1.5, 3.5, 7.5, 15.5, 25.5, 35.5, 45.5 minutes.
	if got := h.waitsAt[1].Sub(start); got != 45*time.Minute+30*time.Second {
		t.Fatalf("resumed after %s", got)
	}
}

// costs.run_budget_wait bounds the waits: the run fails with the refusal
// once it is used up (not as a timeout), having parked that long.
func TestBudgetWaitIsBounded(t *testing.T) {
	h := newBudgetHarness(t, func(time.Time) bool { return true })
	start := h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, budgetInput(20*time.Minute))
	o := h.outcome(t)
	if o.Status != models.RunFailed || o.TimedOut || !strings.Contains(o.Error, "waited 20m0s for budget") ||
		!strings.Contains(o.Error, "day budget of $1.00") {
		t.Fatalf("outcome %+v", o)
	}
	if got := h.env.Now().Sub(start); got < 20*time.Minute || got > 21*time.Minute {
		t.Fatalf("failed after %s, want 20m", got)
	}
}

// 0 keeps failing fast, and a refusal that waiting does not clear (a model
// outside an allowlist) fails the run at once however long it may wait.
func TestBudgetWaitZeroAndOtherRefusalsFailFast(t *testing.T) {
	for _, c := range []struct {
		name, code string
		wait       time.Duration
	}{{"wait 0", "budget_exceeded", 0}, {"not_allowed", "not_allowed", time.Hour}} {
		t.Run(c.name, func(t *testing.T) {
			h := newBudgetHarness(t, func(time.Time) bool { return true })
			h.code = c.code
			start := h.env.Now()
			h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, budgetInput(c.wait))
			if o := h.outcome(t); o.Status != models.RunFailed || !strings.HasPrefix(o.Error, "turn 2: the day budget") {
				t.Fatalf("outcome %+v", o)
			}
			if len(h.waits) != 0 || h.refusedCalls != 1 || h.env.Now().Sub(start) > time.Second {
				t.Fatalf("parked: waits %+v, refused %d", h.waits, h.refusedCalls)
			}
		})
	}
}
