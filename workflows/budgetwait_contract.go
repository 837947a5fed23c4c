package workflows

import (
	"time"

	"github.com/agentryhq/agentry/models"
)

// The contract of budget waits (budgetwait.go): a task run whose LLM turn
// cost governance refuses for a hard budget or a token quota parks until
// admission lets the turn through, bounded by costs.run_budget_wait.
const (
	// SignalCostsChanged tells a run parked for budget that the cost
	// configuration changed: it checks admission again at once (otherwise
	// on its timer). The gateway sends it to every run waiting for budget.
	SignalCostsChanged = "costs-changed"
	// ActivityTaskRunWait (local) records that a run parks or resumes;
	// input RunWaitInput.
	ActivityTaskRunWait = "TaskRunWait"
	// BudgetCheckFirst is how long a run parked for budget waits before it
	// first tries its turn again; each refusal doubles the wait up to
	// BudgetCheckMax (period rollovers and released reservations are
	// noticed that way; a configuration change signals at once).
	BudgetCheckFirst = 30 * time.Second
	BudgetCheckMax   = 10 * time.Minute
	// budgetWaitChange is the workflow.GetVersion change id of budget waits.
	budgetWaitChange = "budget-wait"
)

// RunWaitInput records a park (WaitingFor set, Resume false) or its end
// (Resume true) of a run.
type RunWaitInput struct {
	Run        RunRef `json:"run"`
	Turn       int    `json:"turn"`
	WaitingFor string `json:"waiting_for"`
	Resume     bool   `json:"resume,omitempty"`
	// Code and Reason are the refusal that parked the run.
	Code   string    `json:"code,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Until  time.Time `json:"until,omitempty"`
	// Waited is how long the run was parked (Resume).
	Waited time.Duration `json:"waited,omitempty"`
}

// budgetWaitCodes are the refusals a run waits out; the others (not
// allowed, data class, unknown pricing, ...) do not pass by waiting.
var budgetWaitCodes = map[string]bool{"budget_exceeded": true, "quota": true}

// WaitingForBudget is models.WaitingForBudget.
const WaitingForBudget = models.WaitingForBudget
