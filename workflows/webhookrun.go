package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/models"
)

// WebhookRun is an inbound webhook run asynchronously: the caller got 202
// with the run id; the run goes on the agent-run core (each LLM turn and
// tool call its own activity, call ids from the run id), its outcome is
// stored for GET /webhooks/{agent_id}/runs/{run_id} and, when the agent
// names a reply channel, handed to a Delivery workflow under a delivery id
// derived from the run id.
func WebhookRun(ctx workflow.Context, in WebhookRunInput) (*WebhookRunResult, error) {
	stepCtx := workflow.WithActivityOptions(ctx, firingActivityOptions)
	prep := in.Prepared
	if prep == nil {
		prep = new(WebhookPrepared)
		if err := workflow.ExecuteActivity(stepCtx, ActivityWebhookRunPrepare, in).Get(ctx, prep); err != nil {
			// Nothing ran; the finish step records why.
			return finishWebhookRun(ctx, WebhookFinishInput{In: in, Status: models.WebhookRunFailed, Error: stepError(err).Error()})
		}
	}
	if in.Deadline.IsZero() {
		in.Deadline = workflow.Now(ctx).Add(webhookRunTimeout(in))
	}
	run := &agentRun{ref: prep.Run, outline: prep.Agent, llmStep: ActivityWebhookLLMTurn, toolStep: ActivityWebhookTool,
		llmOpts: llmActivityOptions, toolOpts: toolOptions(prep.ToolTimeout), localLLMTurns: prep.LocalLLMTurns}
	res := run.runUntil(ctx, in.Continuation, in.Deadline)
	if res.next != nil && ctx.Err() == nil {
		next := in
		next.Prepared, next.Continuation = prep, res.next
		return nil, workflow.NewContinueAsNewError(ctx, WebhookRunWorkflowName, next)
	}
	fin := WebhookFinishInput{In: in, Run: prep.Run, Status: models.WebhookRunSucceeded}
	if res.out != nil {
		fin.Turns, fin.Usage = res.out.Turns, res.out.Usage
	}
	switch {
	case res.timedOut:
		fin.Status, fin.Error = models.WebhookRunFailed, "the run exceeded its time limit of "+webhookRunTimeout(in).String()
	case res.err != nil:
		fin.Status, fin.Error = models.WebhookRunFailed, res.err.Error()
	}
	return finishWebhookRun(ctx, fin)
}

func webhookRunTimeout(in WebhookRunInput) time.Duration {
	if in.Timeout > 0 {
		return in.Timeout
	}
	return WebhookRunTimeout
}

// finishWebhookRun stores the outcome and starts the reply's delivery.
func finishWebhookRun(ctx workflow.Context, fin WebhookFinishInput) (*WebhookRunResult, error) {
	finishCtx, _ := workflow.NewDisconnectedContext(ctx)
	finishCtx = workflow.WithActivityOptions(finishCtx, firingActivityOptions)
	var out WebhookRunResult
	if err := workflow.ExecuteActivity(finishCtx, ActivityWebhookRunFinish, fin).Get(finishCtx, &out); err != nil {
		return nil, stepError(err)
	}
	if out.Delivery != nil {
		msg := *out.Delivery
		if err := startDelivery(finishCtx, msg, "Deliver "+msg.DeliveryID+" (async webhook reply of "+fin.In.AgentID+")"); err != nil {
			out.Error = "could not start the delivery of the reply: " + err.Error()
		}
	}
	if out.Status == models.WebhookRunFailed {
		return &out, temporal.NewNonRetryableApplicationError(out.Error, ErrTypeWebhookRunFailed, nil)
	}
	return &out, nil
}
