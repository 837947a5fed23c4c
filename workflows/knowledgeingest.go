package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/models"
)

// KnowledgeIngest indexes one document of a knowledge base: extract its
// text (prepare), embed its chunks batch by batch (one activity per batch,
// whose vectors go straight to the vector store's staging, never into this
// history), then publish the version atomically. A document whose content
// hash is already published is unchanged and nothing is embedded. Each
// finished batch is in the history, and a batch activity skips positions
// already staged, so a crash resumes at the last finished batch without
// embedding or paying for one twice (each batch's ledger call id is
// stable: KnowledgeBatchCallID). A batch refused for a hard budget parks
// the ingestion (waiting for budget) until the budget allows it: on a
// timer doubling from BudgetCheckFirst to BudgetCheckMax, or at once on
// SignalCostsChanged, bounded by in.BudgetWait. The last step always
// records the final state (ready or failed).
func KnowledgeIngest(ctx workflow.Context, in KnowledgeIngestInput) (*KnowledgeIngestResult, error) {
	res := &KnowledgeIngestResult{Document: in.Document, Status: models.KnowledgeIndexing}
	step := KnowledgeStep{Document: in.Document}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: KnowledgeStepTimeout,
		HeartbeatTimeout:    KnowledgeHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 6,
			NonRetryableErrorTypes: []string{ErrTypeKnowledgeRefused, ErrTypeCostRejected},
		},
	})
	finish := func(fin KnowledgeFinishInput) (*KnowledgeIngestResult, error) {
		if err := workflow.ExecuteActivity(actx, ActivityKnowledgeFinish, fin).Get(ctx, nil); err != nil {
			// The status read reconciles a row left non-final.
			workflow.GetLogger(ctx).Warn("could not record the document's final state", "err", err)
		}
		res.Status, res.Error, res.Unchanged = models.KnowledgeReady, fin.Error, fin.Unchanged
		if fin.Error != "" {
			res.Status = models.KnowledgeFailed
		}
		return res, nil
	}

	var prep KnowledgePrepareResult
	if err := workflow.ExecuteActivity(actx, ActivityKnowledgePrepare, step).Get(ctx, &prep); err != nil {
		return finish(KnowledgeFinishInput{Document: in.Document, Error: activityErrorText(err)})
	}
	res.Chunks = prep.Chunks
	if prep.Unchanged {
		return finish(KnowledgeFinishInput{Document: in.Document, Unchanged: true})
	}
	wfID := workflow.GetInfo(ctx).WorkflowExecution.ID
	waited := time.Duration(0)
	for b := range prep.Batches() {
		batch := KnowledgeBatchInput{Document: in.Document, Version: prep.Version, Batch: b, BatchSize: prep.BatchSize,
			CallID: KnowledgeBatchCallID(wfID, prep.Version, b)}
		err := workflow.ExecuteActivity(actx, ActivityKnowledgeEmbedBatch, batch).Get(ctx, nil)
		if _, refused := budgetRefusal(err); refused {
			err = knowledgeBudgetWait(ctx, actx, in, batch, err, &waited)
		}
		if err != nil {
			return finish(KnowledgeFinishInput{Document: in.Document, Error: activityErrorText(err)})
		}
	}
	if err := workflow.ExecuteActivity(actx, ActivityKnowledgePublish,
		KnowledgeBatchInput{Document: in.Document, Version: prep.Version, BatchSize: prep.BatchSize}).Get(ctx, nil); err != nil {
		return finish(KnowledgeFinishInput{Document: in.Document, Error: activityErrorText(err)})
	}
	res.Status = models.KnowledgeReady
	return res, nil
}

// knowledgeBudgetWait parks the ingestion after batch was refused for
// budget and tries the batch again until it passes (nil), fails
// otherwise, or the wait allowance in.BudgetWait is used up (the refusal).
func knowledgeBudgetWait(ctx, actx workflow.Context, in KnowledgeIngestInput, batch KnowledgeBatchInput, refusal error, waited *time.Duration) error {
	left := in.BudgetWait - *waited
	if left <= 0 {
		return refusal
	}
	parkedAt := workflow.Now(ctx)
	until := parkedAt.Add(left)
	park := KnowledgeWaitInput{Document: in.Document, WaitingFor: WaitingForBudget, Reason: activityErrorText(refusal), Until: until}
	if err := workflow.ExecuteActivity(actx, ActivityKnowledgeWait, park).Get(ctx, nil); err != nil {
		return err
	}
	defer func() { *waited += workflow.Now(ctx).Sub(parkedAt) }()
	signals := workflow.GetSignalChannel(ctx, SignalCostsChanged)
	for signals.ReceiveAsync(nil) { // a change from before this wait is no news
	}
	interval := BudgetCheckFirst
	for {
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(timerCtx, min(interval, until.Sub(workflow.Now(ctx))))
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.Select(ctx)
		cancelTimer()
		if ctx.Err() != nil {
			return temporal.NewCanceledError("cancelled while waiting for budget")
		}
		interval = min(2*interval, BudgetCheckMax)
		err := workflow.ExecuteActivity(actx, ActivityKnowledgeEmbedBatch, batch).Get(ctx, nil)
		if err == nil {
			resume := KnowledgeWaitInput{Document: in.Document}
			return workflow.ExecuteActivity(actx, ActivityKnowledgeWait, resume).Get(ctx, nil)
		}
		if _, still := budgetRefusal(err); !still {
			return err
		}
		if !workflow.Now(ctx).Before(until) {
			var app *temporal.ApplicationError
			msg := err.Error()
			if errors.As(err, &app) {
				msg = app.Message()
			}
			return fmt.Errorf("waited %s for budget (costs.run_budget_wait) and cost governance still refuses embedding batch %d: %s",
				in.BudgetWait.Round(time.Second), batch.Batch, msg)
		}
	}
}
