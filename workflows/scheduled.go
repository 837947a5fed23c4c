package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/schedules"
	"github.com/agentryhq/agentry/models"
)

// ScheduledRunTimeout bounds the agent run of one firing.
const ScheduledRunTimeout = 10 * time.Minute

// ErrTypeScheduledRunFailed is the failure type of a firing whose agent
// run failed.
const ErrTypeScheduledRunFailed = "ScheduledRunFailed"

// RegisterScheduled registers the ScheduledAgent workflow and its
// activities.
func RegisterScheduled(acts *activities.ScheduledActivities) func(sdkworker.Registry) {
	return func(r sdkworker.Registry) {
		r.RegisterWorkflowWithOptions(ScheduledAgent, workflow.RegisterOptions{Name: schedules.WorkflowName})
		r.RegisterActivity(acts)
	}
}

// ScheduledAgentResult is the outcome of one firing.
type ScheduledAgentResult struct {
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
}

// ScheduledAgent is one firing of a scheduled agent (started by its
// Temporal Schedule, or by POST /schedules/{agent_id}/trigger): run the
// agent once, then hand the reply to a Delivery workflow for the
// schedule's output channel. The firing does not wait for the delivery
// (it is abandoned to run on its own, with its own retries), so a
// receiver that is down never holds the schedule's next firings back.
func ScheduledAgent(ctx workflow.Context, in schedules.FiringInput) (*ScheduledAgentResult, error) {
	wid := workflow.GetInfo(ctx).WorkflowExecution.ID
	var acts *activities.ScheduledActivities
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
		_ = workflow.ExecuteActivity(recordCtx, acts.ScheduledAgentRecord, activities.ScheduledRecordInput{
			WorkflowID: wid, AgentID: in.AgentID, Trigger: in.Trigger, Status: status, Error: msg}).Get(ctx, nil)
	}
	var run activities.ScheduledRunResult
	if err := workflow.ExecuteActivity(runCtx, acts.ScheduledAgentRun, in).Get(ctx, &run); err != nil {
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
		WorkflowID:               delivery.WorkflowID(msg.DeliveryID),
		ParentClosePolicy:        enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: r.RetryFor + r.AttemptTimeout + 10*time.Minute,
		StaticSummary:            "Deliver " + msg.DeliveryID + " (scheduled output of " + in.AgentID + ")",
	})
	child := workflow.ExecuteChildWorkflow(childCtx, delivery.WorkflowName, msg)
	var started workflow.Execution
	if err := child.GetChildWorkflowExecution().Get(ctx, &started); err != nil {
		m := "could not start the delivery: " + err.Error()
		record(models.ScheduleRunFailed, m)
		res.Status, res.Error = models.ScheduleRunFailed, m
		return res, temporal.NewNonRetryableApplicationError(m, ErrTypeScheduledRunFailed, nil)
	}
	return res, nil
}
