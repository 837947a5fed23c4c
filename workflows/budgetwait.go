package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/internal/llm"
)

// Budget waits in the agent-run core. When cost governance refuses an LLM
// turn for a hard budget or a token quota (the activity's CostRejected
// error with code budget_exceeded or quota) and the run may wait
// (agentRun.budgetWait > 0), the run parks instead of failing: the run
// record says waiting for budget (event run.waiting), and the same turn is
// tried again after a durable timer (BudgetCheckFirst, doubling up to
// BudgetCheckMax) or at once when SignalCostsChanged arrives. A refused
// turn reached no provider and paid nothing, and the finished turns are in
// the history and the run log, so the run goes on from the refused turn
// with nothing paid twice. Parked time does not count toward the run's
// working-time bound; all budget waits of a run together are bounded by
// budgetWait, after which the run fails with the refusal.

// budgetRefusal returns the rejection code when err is a refusal a run may
// wait out.
func budgetRefusal(err error) (string, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeCostRejected || !app.HasDetails() {
		return "", false
	}
	var code string
	if app.Details(&code) != nil || !budgetWaitCodes[code] {
		return "", false
	}
	return code, true
}

// waitForBudget parks the run after the refusal of turn in, tries the turn
// again until admission lets it through (resp is then its answer) and
// returns nil, or returns an error: the refusal once the wait is used up,
// another failure of the turn, or cancellation.
func (e *durableExecutor) waitForBudget(in LLMTurnInput, code string, refusal error, resp *llm.Response) error {
	r := e.run
	ctx := e.ctx
	left := r.budgetWait - r.budgetWaited
	if left <= 0 || r.waitStep == "" {
		return refusal
	}
	if workflow.GetVersion(ctx, budgetWaitChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return refusal
	}
	parkedAt := workflow.Now(ctx)
	until := parkedAt.Add(left)
	reason := refusal.Error()
	var app *temporal.ApplicationError
	if errors.As(refusal, &app) {
		reason = app.Message()
	}
	lctx := workflow.WithLocalActivityOptions(ctx, statusActivityOptions)
	park := RunWaitInput{Run: r.ref, Turn: in.Turn, WaitingFor: WaitingForBudget, Code: code, Reason: reason, Until: until}
	if err := workflow.ExecuteLocalActivity(lctx, r.waitStep, park).Get(lctx, nil); err != nil {
		return err
	}
	r.parked = true
	r.wait(WaitingForBudget)
	// Time parked is the time up to the check that let the turn through;
	// the turn itself is working time.
	parkedUntil := parkedAt
	defer func() {
		parked := parkedUntil.Sub(parkedAt)
		r.parked = false
		r.budgetWaited += parked
		r.deadline = r.deadline.Add(parked)
		r.wait("")
	}()

	signals := workflow.GetSignalChannel(ctx, SignalCostsChanged)
	for signals.ReceiveAsync(nil) { // a change from before this wait is no news
	}
	interval := BudgetCheckFirst
	actx := workflow.WithActivityOptions(ctx, r.llmOpts)
	for {
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(timerCtx, min(interval, until.Sub(workflow.Now(ctx))))
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.Select(ctx)
		cancelTimer()
		parkedUntil = workflow.Now(ctx)
		if ctx.Err() != nil {
			return temporal.NewCanceledError("cancelled while waiting for budget")
		}
		interval = min(2*interval, BudgetCheckMax)
		err := workflow.ExecuteActivity(actx, r.llmStep, in).Get(actx, resp)
		if err == nil {
			resume := RunWaitInput{Run: r.ref, Turn: in.Turn, WaitingFor: WaitingForBudget, Resume: true, Waited: parkedUntil.Sub(parkedAt)}
			return workflow.ExecuteLocalActivity(lctx, r.waitStep, resume).Get(lctx, nil)
		}
		if _, still := budgetRefusal(err); !still {
			return err
		}
		if !workflow.Now(ctx).Before(until) {
			msg := err.Error()
			if errors.As(err, &app) {
				msg = app.Message()
			}
			return &cleanError{msg: fmt.Sprintf("waited %s for budget (costs.run_budget_wait) and cost governance still refuses turn %d: %s",
				r.budgetWait.Round(time.Second), in.Turn, msg), err: err}
		}
	}
}
