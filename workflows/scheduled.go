package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/models"
)

// ScheduledAgent is one firing of a scheduled agent (started by its
// Temporal Schedule, or by POST /schedules/{agent_id}/trigger): run the
// agent once, then hand the reply to a Delivery workflow for the
// schedule's output channel. The firing does not wait for the delivery
// (it is abandoned to run on its own, with its own retries), so a
// receiver that is down never holds the schedule's next firings back.
func ScheduledAgent(ctx workflow.Context, in ScheduledAgentInput) (*ScheduledAgentResult, error) {
	wid := workflow.GetInfo(ctx).WorkflowExecution.ID
	runCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: ScheduledRunTimeout,
		// Once: a repeated run could pay for the same firing twice.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:     "run agent " + in.AgentID,
	})
	recordCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 30 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	record := func(status, msg string) {
		_ = workflow.ExecuteActivity(recordCtx, ActivityScheduledAgentRecord, ScheduledRecordInput{
			WorkflowID: wid, AgentID: in.AgentID, Trigger: in.Trigger, Status: status, Error: msg}).Get(ctx, nil)
	}
	var run ScheduledRunResult
	if workflow.GetVersion(ctx, firingPerTurnChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// Firings started before the run engine: the whole run in one
		// activity.
		if err := workflow.ExecuteActivity(runCtx, ActivityScheduledAgentRun, in).Get(ctx, &run); err != nil {
			msg := "the agent run did not finish: " + err.Error()
			record(models.ScheduleRunFailed, msg)
			return &ScheduledAgentResult{Status: models.ScheduleRunFailed, Error: msg}, temporal.NewNonRetryableApplicationError(msg, ErrTypeScheduledRunFailed, nil)
		}
	} else {
		r, err := runFiring(ctx, in)
		if next := (*workflow.ContinueAsNewError)(nil); errors.As(err, &next) {
			return nil, err
		}
		if err != nil {
			msg := "the agent run did not finish: " + err.Error()
			record(models.ScheduleRunFailed, msg)
			return &ScheduledAgentResult{Status: models.ScheduleRunFailed, Error: msg}, temporal.NewNonRetryableApplicationError(msg, ErrTypeScheduledRunFailed, nil)
		}
		run = *r
	}
	res := &ScheduledAgentResult{Status: run.Status, Error: run.Error}
	switch {
	case run.Status == models.ScheduleRunFailed:
		return res, temporal.NewNonRetryableApplicationError(run.Error, ErrTypeScheduledRunFailed, nil)
	case run.Delivery == nil:
		return res, nil
	}
	msg := *run.Delivery
	res.DeliveryID = msg.DeliveryID
	if err := startDelivery(ctx, msg, "Deliver "+msg.DeliveryID+" (scheduled output of "+in.AgentID+")"); err != nil {
		m := "could not start the delivery: " + err.Error()
		record(models.ScheduleRunFailed, m)
		res.Status, res.Error = models.ScheduleRunFailed, m
		return res, temporal.NewNonRetryableApplicationError(m, ErrTypeScheduledRunFailed, nil)
	}
	return res, nil
}

// firingPerTurnChange is the GetVersion id of running a firing turn by turn
// on the agent-run core (version 1) instead of in one activity.
const firingPerTurnChange = "firing-per-turn"

// firingActivityOptions bounds the prepare and finish steps of a firing.
var firingActivityOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 10 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second,
		NonRetryableErrorTypes: []string{ErrTypeRunLog}},
}

// runFiring drives a firing's agent run on the agent-run core: prepare
// (record, checks, snapshot), each LLM turn and tool call as its own
// activity with call ids derived from the firing's workflow id (which holds
// the schedule's action time), then finish (outcome, session, the reply's
// delivery). A crash mid-run resumes at the step it was in. It returns a
// ContinueAsNewError when the history grew long.
func runFiring(ctx workflow.Context, in ScheduledAgentInput) (*ScheduledRunResult, error) {
	stepCtx := workflow.WithActivityOptions(ctx, firingActivityOptions)
	prep := in.Prepared
	if prep == nil {
		prep = new(ScheduledPrepared)
		if err := workflow.ExecuteActivity(stepCtx, ActivityScheduledAgentPrepare, in).Get(ctx, prep); err != nil {
			return nil, stepError(err)
		}
		if prep.Status == models.ScheduleRunSkipped {
			return &ScheduledRunResult{Status: prep.Status, Error: prep.Error}, nil
		}
	}
	if in.Deadline.IsZero() {
		in.Deadline = workflow.Now(ctx).Add(ScheduledRunTimeout)
	}
	// A firing asks for approvals like a task run: the approval names the
	// firing's schedule and workflow id (prep.Run), and the decision Update
	// is sent to this workflow id. Parked time moves the deadline.
	run := &agentRun{ref: prep.Run, outline: prep.Agent, llmStep: ActivityScheduledLLMTurn, toolStep: ActivityScheduledTool,
		llmOpts: llmActivityOptions, toolOpts: toolOptions(prep.ToolTimeout), approvals: prep.Approvals, localLLMTurns: prep.LocalLLMTurns,
		// The same pointer: the children it starts (Started) go on with a
		// continue-as-new in next.Prepared.
		delegation: prep.Delegation}
	res := run.runUntil(ctx, in.Continuation, in.Deadline)
	if res.next != nil && ctx.Err() == nil {
		next := in
		// The deadline as parked time moved it (unchanged without approvals).
		next.Prepared, next.Continuation, next.Deadline = prep, res.next, res.deadline
		return nil, workflow.NewContinueAsNewError(ctx, ScheduledAgentWorkflowName, next)
	}
	fin := ScheduledFinishInput{Run: prep.Run, Trigger: in.Trigger, SessionID: prep.SessionID, Status: models.ScheduleRunSucceeded}
	if res.out != nil {
		fin.Turns, fin.Usage = res.out.Turns, res.out.Usage
	}
	var app *temporal.ApplicationError
	switch {
	case res.timedOut:
		fin.Status, fin.Error = models.ScheduleRunFailed, "the run exceeded its time limit of "+ScheduledRunTimeout.String()
	case errors.As(res.err, &app) && app.Type() == ErrTypeCostRejected && fin.Turns == 0:
		// Refused before anything was paid: the firing is skipped, as
		// when admission refuses a synchronous run.
		fin.Status, fin.Error = models.ScheduleRunSkipped, "cost admission refused the run: "+app.Message()
		if app.HasDetails() {
			_ = app.Details(&fin.Code)
		}
	case res.err != nil:
		fin.Status, fin.Error = models.ScheduleRunFailed, res.err.Error()
	}
	var out ScheduledRunResult
	finishCtx, _ := workflow.NewDisconnectedContext(stepCtx)
	if err := workflow.ExecuteActivity(finishCtx, ActivityScheduledAgentFinish, fin).Get(finishCtx, &out); err != nil {
		return nil, stepError(err)
	}
	return &out, nil
}
