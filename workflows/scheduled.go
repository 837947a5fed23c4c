package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
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
	if err := workflow.ExecuteActivity(runCtx, ActivityScheduledAgentRun, in).Get(ctx, &run); err != nil {
		msg := "the agent run did not finish: " + err.Error()
		record(models.ScheduleRunFailed, msg)
		return &ScheduledAgentResult{Status: models.ScheduleRunFailed, Error: msg}, temporal.NewNonRetryableApplicationError(msg, ErrTypeScheduledRunFailed, nil)
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
	r := msg.Retry.WithDefaults()
	childCtx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:               DeliveryWorkflowID(msg.DeliveryID),
		ParentClosePolicy:        enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: r.RetryFor + r.AttemptTimeout + 10*time.Minute,
		StaticSummary:            "Deliver " + msg.DeliveryID + " (scheduled output of " + in.AgentID + ")",
	})
	child := workflow.ExecuteChildWorkflow(childCtx, DeliveryWorkflowName, msg)
	var started workflow.Execution
	if err := child.GetChildWorkflowExecution().Get(ctx, &started); err != nil {
		m := "could not start the delivery: " + err.Error()
		record(models.ScheduleRunFailed, m)
		res.Status, res.Error = models.ScheduleRunFailed, m
		return res, temporal.NewNonRetryableApplicationError(m, ErrTypeScheduledRunFailed, nil)
	}
	return res, nil
}
