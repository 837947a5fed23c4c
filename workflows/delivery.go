package workflows

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/models"
)

// Delivery sends one outbound message (webhook channel, scheduled output,
// event hook). Each attempt is the DeliveryAttempt activity, which signs
// the body when a secret is set and records itself; Temporal retries it
// with exponential backoff (msg.Retry: from InitialInterval doubling up to
// MaxInterval) until RetryFor has passed since the first attempt. 5xx,
// 429 and network errors retry; other 4xx answers and refused
// destinations end the delivery at once. The final outcome is recorded
// before the workflow ends: by the successful attempt itself, else by
// DeliveryFinish.
func Delivery(ctx workflow.Context, msg DeliveryInput) (*DeliveryResult, error) {
	if msg.Messaging {
		return deliverOnChannel(ctx, msg)
	}
	r := msg.Retry.WithDefaults()
	attemptCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// The request's own timeout plus time to record the attempt.
		StartToCloseTimeout:    r.AttemptTimeout + 15*time.Second,
		ScheduleToCloseTimeout: r.RetryFor,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        r.InitialInterval,
			BackoffCoefficient:     2,
			MaximumInterval:        r.MaxInterval,
			NonRetryableErrorTypes: []string{ErrTypeDeliveryRejected},
		},
		Summary: "POST " + msg.DeliveryID,
	})
	var att DeliveryAttemptResult
	err := workflow.ExecuteActivity(attemptCtx, ActivityDeliveryAttempt, msg).Get(ctx, &att)
	res := &DeliveryResult{DeliveryID: msg.DeliveryID, Status: models.DeliveryDelivered, Attempts: att.Attempt, StatusCode: att.StatusCode}
	if err != nil {
		res.Status, res.Error = models.DeliveryFailed, deliveryFailure(err, r.RetryFor)
	}
	if res.Status == models.DeliveryDelivered {
		// The successful attempt recorded the outcome itself.
		return res, nil
	}
	finishCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Hour,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	if ferr := workflow.ExecuteActivity(finishCtx, ActivityDeliveryFinish,
		DeliveryFinishInput{DeliveryID: msg.DeliveryID, Status: res.Status, Error: res.Error}).Get(ctx, nil); ferr != nil {
		workflow.GetLogger(ctx).Warn("could not record the delivery outcome", "delivery", msg.DeliveryID, "err", ferr)
	}
	return res, temporal.NewNonRetryableApplicationError(res.Error, ErrTypeDeliveryFailed, nil)
}

// startDelivery starts msg's Delivery workflow as a child that outlives
// its parent (a run's reply is delivered even when the run's workflow has
// ended) and waits until it has started. The one place a workflow starts a
// delivery; the gateway starts its own in internal/delivery with the same
// id and bound. The same delivery id twice is refused by Temporal.
func startDelivery(ctx workflow.Context, msg DeliveryInput, summary string) error {
	childCtx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:               DeliveryWorkflowID(msg.DeliveryID),
		ParentClosePolicy:        enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: DeliveryExecutionTimeout(msg.Retry),
		StaticSummary:            summary,
	})
	var started workflow.Execution
	return workflow.ExecuteChildWorkflow(childCtx, DeliveryWorkflowName, msg).GetChildWorkflowExecution().Get(ctx, &started)
}

// deliveryFailure describes why a delivery ended: the last attempt's
// error, prefixed with the retry window when it ran out. Retries have no
// attempt limit, so a retryable error that ends them means the window
// (ScheduleToClose) is over.
func deliveryFailure(err error, window time.Duration) string {
	last := err.Error()
	var app *temporal.ApplicationError
	isApp := errors.As(err, &app)
	if isApp {
		last = app.Message()
	}
	var te *temporal.TimeoutError
	var ae *temporal.ActivityError
	if errors.As(err, &te) || (errors.As(err, &ae) && ae.RetryState() == enumspb.RETRY_STATE_TIMEOUT) ||
		(isApp && !app.NonRetryable() && app.Type() != ErrTypeDeliveryRejected) {
		return fmt.Sprintf("gave up after retrying for %s (runtime.delivery.retry_for); last error: %s", window, last)
	}
	return last
}

// deliverOnChannel sends a message to a messaging channel's chat (a
// scheduled report to a Telegram chat, an API send): the text cut to the
// platform's limit, each part its own ChannelSend (paced, a 429's
// retry_after honoured) retried within the delivery's window, then the
// outcome recorded.
func deliverOnChannel(ctx workflow.Context, msg DeliveryInput) (*DeliveryResult, error) {
	r := msg.Retry.WithDefaults()
	stepCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Hour,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	done := ChannelDeliveryDone{Delivery: msg, Delivered: true}
	var parts []string
	if err := workflow.ExecuteActivity(stepCtx, ActivityChannelDeliveryParts, msg).Get(ctx, &parts); err != nil {
		done.Delivered, done.Error = false, stepError(err).Error()
	}
	for i, part := range parts {
		opts := channelSendOptions
		opts.ScheduleToCloseTimeout, opts.Summary = r.RetryFor, "send "+msg.DeliveryID+"/"+strconv.Itoa(i)
		var sent ChannelSent
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), ActivityChannelSend,
			ChannelSendInput{ChannelID: msg.Channel, ChatID: msg.To, Text: part, Key: msg.DeliveryID + "/" + strconv.Itoa(i)}).Get(ctx, &sent)
		if err != nil {
			done.Delivered, done.Error = false, deliveryFailure(err, r.RetryFor)
			break
		}
		done.PlatformIDs = append(done.PlatformIDs, sent.PlatformID)
	}
	res := &DeliveryResult{DeliveryID: msg.DeliveryID, Status: models.DeliveryDelivered, Attempts: 1}
	if !done.Delivered {
		res.Status, res.Error = models.DeliveryFailed, done.Error
	}
	if err := workflow.ExecuteActivity(stepCtx, ActivityChannelDeliveryDone, done).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not record the delivery outcome", "delivery", msg.DeliveryID, "err", err)
	}
	if !done.Delivered {
		return res, temporal.NewNonRetryableApplicationError(res.Error, ErrTypeDeliveryFailed, nil)
	}
	return res, nil
}
