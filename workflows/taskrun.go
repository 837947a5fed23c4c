package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// Activity options. The LLM and tool steps are regular activities: their
// results are recorded in the history, so after a crash the run resumes at
// the last finished step. Status changes are local activities (cheap; they
// are idempotent, so a re-execution after a crash is harmless).
var (
	llmActivityOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			MaximumAttempts:        5,
			NonRetryableErrorTypes: []string{ErrTypeLLMRejected, ErrTypeRunGone},
		},
	}
	toolActivityOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        3,
			NonRetryableErrorTypes: []string{ErrTypeRunGone, ErrTypeArtifactOutsideArea},
		},
	}
	statusActivityOptions = workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 4 * time.Minute,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        500 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        20 * time.Second,
			NonRetryableErrorTypes: []string{ErrTypeRunGone},
		},
	}
)

// TaskRun runs a task's agent durably: it marks the run started, drives the
// agent loop with each LLM turn and each tool call as an activity, bounds
// the loop with a timer, and records the outcome: finished (task ->
// needs_review), failed or timed out (task -> failed), cancelled (task ->
// todo).
func TaskRun(ctx workflow.Context, in TaskRunInput) (*TaskRunResult, error) {
	progress := &TaskRunResult{RunID: in.RunID, Status: models.RunQueued}
	if err := workflow.SetQueryHandler(ctx, QueryTaskRunProgress, func() (TaskRunResult, error) { return *progress, nil }); err != nil {
		return nil, err
	}
	ref := in.ref()

	startCtx := workflow.WithLocalActivityOptions(ctx, statusActivityOptions)
	if err := workflow.ExecuteLocalActivity(startCtx, ActivityTaskRunStart, ref).Get(startCtx, nil); err != nil && ctx.Err() == nil {
		// The run was deleted or already ended: there is nothing to run
		// and nothing to record.
		return nil, err
	}

	var out *agent.Output
	var loopErr error
	timedOut := false
	if ctx.Err() == nil {
		progress.Status = models.RunRunning
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Running task %d with agent %s", in.TaskID, in.AgentID))
		out, loopErr, timedOut = runBounded(ctx, in, progress)
	}

	outcome := models.RunOutcome{RunID: in.RunID}
	if out != nil {
		outcome.Reply, outcome.StopReason, outcome.Turns = out.Reply, out.StopReason, out.Turns
		outcome.InputTokens, outcome.OutputTokens = out.Usage.InputTokens, out.Usage.OutputTokens
	}
	switch {
	case ctx.Err() != nil:
		outcome.Status, outcome.Error = models.RunCancelled, "cancelled by request"
	case timedOut:
		outcome.Status, outcome.TimedOut = models.RunFailed, true
		outcome.Error = fmt.Sprintf("the run exceeded its time limit of %s", timeoutOf(in))
	case loopErr != nil:
		outcome.Status, outcome.Error = models.RunFailed, loopErr.Error()
	default:
		outcome.Status = models.RunFinished
	}
	progress.Status, progress.Error = outcome.Status, outcome.Error
	progress.Reply, progress.StopReason = outcome.Reply, outcome.StopReason

	// Record the outcome even when the workflow is being cancelled.
	finishCtx, _ := workflow.NewDisconnectedContext(ctx)
	finishCtx = workflow.WithLocalActivityOptions(finishCtx, statusActivityOptions)
	if err := workflow.ExecuteLocalActivity(finishCtx, ActivityTaskRunFinish, outcome).Get(finishCtx, nil); err != nil {
		return progress, fmt.Errorf("record outcome of run %d: %w", in.RunID, err)
	}
	switch outcome.Status {
	case models.RunCancelled:
		return progress, temporal.NewCanceledError(outcome.Error)
	case models.RunFailed:
		return progress, temporal.NewNonRetryableApplicationError(outcome.Error, ErrTypeTaskRunFailed, nil)
	}
	return progress, nil
}

func timeoutOf(in TaskRunInput) time.Duration {
	if in.Timeout > 0 {
		return in.Timeout
	}
	return TaskRunTimeout
}

// runBounded runs the agent loop until it ends, the timer fires (the loop
// is then cancelled) or the workflow is cancelled, and waits for the loop
// to stop.
func runBounded(ctx workflow.Context, in TaskRunInput, progress *TaskRunResult) (*agent.Output, error, bool) {
	loopCtx, cancelLoop := workflow.WithCancel(ctx)
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	timer := workflow.NewTimer(timerCtx, timeoutOf(in))

	var out *agent.Output
	var loopErr error
	loopDone, setDone := workflow.NewFuture(ctx)
	workflow.Go(loopCtx, func(gctx workflow.Context) {
		out, loopErr = agent.Run(&activityExecutor{ctx: gctx, in: in, progress: progress}, in.Agent)
		setDone.Set(nil, nil)
	})

	timedOut := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(loopDone, func(workflow.Future) {})
	sel.AddFuture(timer, func(f workflow.Future) {
		if f.Get(ctx, nil) == nil { // fired, not cancelled
			timedOut = true
			cancelLoop()
		}
	})
	sel.Select(ctx)
	cancelTimer()
	_ = loopDone.Get(ctx, nil) // after a timeout, wait for the cancelled step to hand back
	cancelLoop()
	return out, loopErr, timedOut
}

// activityExecutor is the agent.Executor of a workflow: each step is an
// activity.
type activityExecutor struct {
	ctx      workflow.Context
	in       TaskRunInput
	progress *TaskRunResult
}

func (e *activityExecutor) CallLLM(t agent.TurnRequest) (*llm.Response, error) {
	ctx := workflow.WithActivityOptions(e.ctx, llmActivityOptions)
	var resp llm.Response
	err := workflow.ExecuteActivity(ctx, ActivityTaskRunLLMTurn, LLMTurnInput{Run: e.in.ref(), Turn: t}).Get(ctx, &resp)
	if err != nil {
		return nil, stepError(err)
	}
	e.progress.Turns = t.Turn
	e.progress.Usage = e.progress.Usage.Add(resp.Usage)
	return &resp, nil
}

func (e *activityExecutor) CallTool(inv agent.ToolInvocation) (agent.ToolResult, error) {
	ctx := workflow.WithActivityOptions(e.ctx, toolActivityOptions)
	var res agent.ToolResult
	err := workflow.ExecuteActivity(ctx, ActivityTaskRunTool, ToolInput{Run: e.in.ref(), Invocation: inv, Builtins: e.in.Builtins}).Get(ctx, &res)
	if err != nil {
		return agent.ToolResult{}, stepError(err)
	}
	return res, nil
}

// stepError keeps the cause people can act on ("llm provider ... HTTP
// 400: ...") and drops Temporal's wrapping (event ids, worker identity),
// while errors.As still reaches the original error.
func stepError(err error) error {
	var canceled *temporal.CanceledError
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	switch {
	case errors.As(err, &canceled):
		return &cleanError{msg: "cancelled", err: err}
	case errors.As(err, &app):
		return &cleanError{msg: app.Message(), err: err}
	case errors.As(err, &timeout):
		return &cleanError{msg: fmt.Sprintf("step timed out (%s)", timeout.TimeoutType()), err: err}
	}
	return err
}

type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }
