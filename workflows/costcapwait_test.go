package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// A turn refused for the run tree's cost cap parks the run (waiting for
// cost_cap) whether or not budget waits are on, with no bound of its own:
// raising the cap (the costs-changed signal a PATCH sends, 5 hours later)
// resumes it; turn 1 and its tool call are not repeated and the run
// finishes.
func TestCostCapWaitResumesWhenTheCapIsRaised(t *testing.T) {
	raised := false
	h := newBudgetHarness(t, func(time.Time) bool { return !raised })
	h.code = "cost_cap"
	h.env.RegisterDelayedCallback(func() {
		raised = true
		h.env.SignalWorkflow(workflows.SignalCostsChanged, nil)
	}, 5*time.Hour)
	start := h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, budgetInput(0))
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(t); o.Status != models.RunFinished || o.Reply != "Done." || o.Turns != 2 {
		t.Fatalf("outcome %+v", o)
	}
	if first, _ := h.turns(); first != 1 || len(h.tools) != 1 {
		t.Fatalf("turn 1 ran %d times, tools %d: finished steps were repeated", first, len(h.tools))
	}
	if len(h.waits) != 2 || h.waits[0].Resume || h.waits[0].WaitingFor != models.WaitingForCostCap || h.waits[0].Code != "cost_cap" ||
		h.waits[0].Turn != 2 || !strings.Contains(h.waits[0].Reason, "$1.00") || !h.waits[1].Resume ||
		h.waits[1].WaitingFor != models.WaitingForCostCap || h.waits[1].Waited != 5*time.Hour {
		t.Fatalf("waits %+v", h.waits)
	}
	if got := h.waitsAt[1].Sub(start); got != 5*time.Hour {
		t.Fatalf("resumed after %s, want at the signal (5h)", got)
	}
}

// The operator cancels a run waiting for its cost cap: it ends cancelled
// at once (the task goes back to todo), no further turn is tried.
func TestCostCapWaitEndsWhenCancelled(t *testing.T) {
	h := newBudgetHarness(t, func(time.Time) bool { return true })
	h.code = "cost_cap"
	h.env.RegisterDelayedCallback(func() { h.env.CancelWorkflow() }, time.Hour)
	start := h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, budgetInput(0))
	if o := h.outcome(t); o.Status != models.RunCancelled {
		t.Fatalf("outcome %+v", o)
	}
	if got := h.env.Now().Sub(start); got > time.Hour+time.Minute {
		t.Fatalf("ended after %s, want at the cancel (1h)", got)
	}
	if len(h.waits) != 1 || h.waits[0].WaitingFor != models.WaitingForCostCap {
		t.Fatalf("waits %+v", h.waits)
	}
}
