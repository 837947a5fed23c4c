package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// Cost-cap waits in the agent-run core (issue 47). When cost governance
// refuses an LLM turn because the run tree's cost cap (the task's or the
// agent's max_cost_usd) has no room for it (code cost_cap), the run parks
// instead of failing: the run record says waiting for cost_cap (event
// run.waiting; the task moves to needs_review with a comment saying what
// was spent against which cap), and the same turn is tried again when
// SignalCostsChanged arrives (a PATCH of the task's max_cost_usd sends it)
// or on a durable timer (BudgetCheckFirst doubling up to BudgetCheckMax:
// reservations of the tree's other calls in flight may settle lower). A
// refused turn reached no provider and paid nothing; the finished turns
// are in the history and the run log, so the run goes on from the refused
// turn with nothing paid twice. Unlike a budget wait it has no bound of its
// own: the operator raises the cap or cancels the run. Parked time does not
// count toward the run's working-time bound.

// WaitingForCostCap is models.WaitingForCostCap.
const WaitingForCostCap = models.WaitingForCostCap

// costCapCode is costs.CodeCostCap (workflows do not import costs).
const costCapCode = "cost_cap"

// costCapWaitChange is the workflow.GetVersion change id of cost-cap waits.
const costCapWaitChange = "cost-cap-wait"

// costCapRefusal tells whether err refuses a turn for the run's cost cap.
func costCapRefusal(err error) bool {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeCostRejected || !app.HasDetails() {
		return false
	}
	var code string
	return app.Details(&code) == nil && code == costCapCode
}

// waitForCostCap parks the run after the cost-cap refusal of turn in and
// tries the turn again until admission lets it through (resp is then its
// answer; nil is returned), or returns an error: cancellation, another
// failure of the turn, or a budget refusal the run may wait out
// (waitForBudget takes it from there).
func (e *durableExecutor) waitForCostCap(in LLMTurnInput, refusal error, resp *llm.Response) error {
	r := e.run
	ctx := e.ctx
	if r.waitStep == "" {
		return refusal
	}
	if workflow.GetVersion(ctx, costCapWaitChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return refusal
	}
	parkedAt := workflow.Now(ctx)
	reason := refusal.Error()
	var app *temporal.ApplicationError
	if errors.As(refusal, &app) {
		reason = app.Message()
	}
	lctx := workflow.WithLocalActivityOptions(ctx, statusActivityOptions)
	park := RunWaitInput{Run: r.ref, Turn: in.Turn, WaitingFor: WaitingForCostCap, Code: costCapCode, Reason: reason}
	if err := workflow.ExecuteLocalActivity(lctx, r.waitStep, park).Get(lctx, nil); err != nil {
		return err
	}
	r.parked = true
	r.wait(WaitingForCostCap)
	parkedUntil := parkedAt
	defer func() {
		r.parked = false
		r.deadline = r.deadline.Add(parkedUntil.Sub(parkedAt))
		r.wait("")
	}()

	signals := workflow.GetSignalChannel(ctx, SignalCostsChanged)
	for signals.ReceiveAsync(nil) { // a change from before this wait is no news
	}
	interval := BudgetCheckFirst
	actx := workflow.WithActivityOptions(ctx, r.llmOpts)
	for {
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(timerCtx, interval)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.Select(ctx)
		cancelTimer()
		parkedUntil = workflow.Now(ctx)
		if ctx.Err() != nil {
			return temporal.NewCanceledError("cancelled while waiting for the cost cap to be raised")
		}
		interval = min(2*interval, BudgetCheckMax)
		err := workflow.ExecuteActivity(actx, r.llmStep, in).Get(actx, resp)
		if costCapRefusal(err) {
			continue
		}
		resume := RunWaitInput{Run: r.ref, Turn: in.Turn, WaitingFor: WaitingForCostCap, Resume: true, Waited: parkedUntil.Sub(parkedAt)}
		if rerr := workflow.ExecuteLocalActivity(lctx, r.waitStep, resume).Get(lctx, nil); rerr != nil {
			return rerr
		}
		return err
	}
}
