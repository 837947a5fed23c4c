package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

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
		// No attempt limit here: throttled turns wait (Retry-After as the
		// next-retry delay) and never burn out; other provider failures give
		// up after activities.MaxProviderAttempts (the activity decides), and
		// the run's deadline bounds everything.
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			NonRetryableErrorTypes: []string{ErrTypeLLMRejected, ErrTypeRunGone, ErrTypeRunLog, ErrTypePayloadTooLarge},
		},
	}
	toolActivityOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			// No attempt limit here: the activity gives up after
			// ToolStepAttempts itself, except while the database is full
			// (ErrTypeStorageFull), which waits for space.
			NonRetryableErrorTypes: []string{ErrTypeRunGone, ErrTypeArtifactOutsideArea, ErrTypeRunLog, ErrTypePayloadTooLarge},
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

	if in.Continuation == nil {
		startCtx := workflow.WithLocalActivityOptions(ctx, statusActivityOptions)
		if err := workflow.ExecuteLocalActivity(startCtx, ActivityTaskRunStart, ref).Get(startCtx, nil); err != nil && ctx.Err() == nil {
			// The run was deleted or already ended: there is nothing to run
			// and nothing to record.
			return nil, err
		}
	} else {
		progress.Turns = in.Continuation.Output.Turns
		progress.Usage = in.Continuation.Output.Usage
	}
	if in.Deadline.IsZero() {
		in.Deadline = workflow.Now(ctx).Add(timeoutOf(in))
	}

	var res agentRunResult
	if ctx.Err() == nil {
		progress.Status = models.RunRunning
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Running task %d with agent %s", in.TaskID, in.AgentID))
		run := &agentRun{ref: ref, outline: in.Agent, llmStep: ActivityTaskRunLLMTurn, toolStep: ActivityTaskRunTool,
			llmOpts: llmActivityOptions, toolOpts: toolOptions(in.ToolTimeout), continueAfter: in.ContinueAfterEvents,
			onTurn:    func(turn int, u llm.Usage) { progress.Turns, progress.Usage = turn, progress.Usage.Add(u) },
			approvals: in.Approvals, budgetWait: in.BudgetWait, budgetWaited: in.BudgetWaited, waitStep: ActivityTaskRunWait, reuse: in.Reuse,
			localFileTools: in.LocalFileTools, localLLMTurns: in.LocalLLMTurns, delegation: in.Delegation,
			onWait: func(waitingFor string) {
				progress.Status, progress.WaitingFor = models.RunRunning, waitingFor
				if waitingFor != "" {
					progress.Status = models.RunWaiting
				}
			}}
		res = run.runUntil(ctx, in.Continuation, in.Deadline)
		if res.next != nil && ctx.Err() == nil {
			// Same workflow id, same run record, same deadline: the run
			// goes on in a fresh history.
			next := in
			next.Continuation, next.Deadline, next.BudgetWaited = res.next, res.deadline, res.budgetWaited
			return nil, workflow.NewContinueAsNewError(ctx, TaskRunWorkflowName, next)
		}
	}
	out, loopErr, timedOut := res.out, res.err, res.timedOut

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

// toolOptions are the tool activity's options for runtime.tool_timeout
// (0: a run requested before the input carried it keeps the options it
// was started with, so its history replays unchanged). The activity may
// take ToolStepMargin beyond the tool's own bound: it loads the call,
// stores the result and records the files.
func toolOptions(toolTimeout time.Duration) workflow.ActivityOptions {
	o := toolActivityOptions
	if toolTimeout > 0 {
		o.StartToCloseTimeout = toolTimeout + ToolStepMargin
	}
	return o
}

func timeoutOf(in TaskRunInput) time.Duration {
	if in.Timeout > 0 {
		return in.Timeout
	}
	return TaskRunTimeout
}

// stepError keeps the cause people can act on ("llm provider ... HTTP
// 400: ...") and drops Temporal's wrapping (event ids, worker identity),
// while errors.As still reaches the original error.
func stepError(err error) error {
	var clean *cleanError
	if errors.As(err, &clean) {
		return err // already says what happened
	}
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
