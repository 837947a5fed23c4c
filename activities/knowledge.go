package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/knowledge"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/workflows"
)

// KnowledgeActivities are the steps of the KnowledgeIngest workflow
// (workflows/knowledgeingest_contract.go). Inputs and results carry the
// document id, the version and counts; the text waits in the database and
// the vectors go straight to the vector store. Every step heartbeats, so
// a gateway that dies in one is noticed within the heartbeat timeout and
// the step runs again on the next worker.
type KnowledgeActivities struct {
	Service *knowledge.Service
}

// KnowledgePrepare extracts the document and stores its text.
func (a *KnowledgeActivities) KnowledgePrepare(ctx context.Context, in workflows.KnowledgeStep) (workflows.KnowledgePrepareResult, error) {
	var res workflows.KnowledgePrepareResult
	err := heartbeating(ctx, func(ctx context.Context) error {
		r, err := a.Service.Prepare(ctx, in.Document)
		if r != nil {
			res = *r
		}
		return err
	})
	return res, knowledgeError(err)
}

// KnowledgeEmbedBatch embeds and stages one batch.
func (a *KnowledgeActivities) KnowledgeEmbedBatch(ctx context.Context, in workflows.KnowledgeBatchInput) error {
	return knowledgeError(heartbeating(ctx, func(ctx context.Context) error {
		_, err := a.Service.EmbedBatch(ctx, in)
		return err
	}))
}

// KnowledgePublish publishes the staged version and records it ready.
func (a *KnowledgeActivities) KnowledgePublish(ctx context.Context, in workflows.KnowledgeBatchInput) error {
	return knowledgeError(heartbeating(ctx, func(ctx context.Context) error { return a.Service.Publish(ctx, in) }))
}

// KnowledgeFinish records a final state without a publish.
func (a *KnowledgeActivities) KnowledgeFinish(ctx context.Context, in workflows.KnowledgeFinishInput) error {
	return a.Service.Finish(ctx, in)
}

// KnowledgeWait records a budget wait or its end.
func (a *KnowledgeActivities) KnowledgeWait(ctx context.Context, in workflows.KnowledgeWaitInput) error {
	return a.Service.Wait(ctx, in)
}

// knowledgeError turns a document retrying cannot fix into a non-retryable
// KnowledgeRefused error and a cost refusal into the error types the
// workflow knows (CostRejected with the rejection code: it waits out
// budget_exceeded and quota; CostThrottled: retried after the delay).
func knowledgeError(err error) error {
	if err == nil {
		return nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	if knowledge.IsRefusal(err) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeKnowledgeRefused, nil)
	}
	var rej *costs.Rejection
	if errors.As(err, &rej) {
		if rej.RetryAfter > 0 && !(rej.Code == costs.CodeQuota && rej.RetryAfter > llm.MaxRetryAfter) && rej.Code != costs.CodeBudgetExceeded {
			return temporal.NewApplicationErrorWithOptions(err.Error(), workflows.ErrTypeCostThrottled,
				temporal.ApplicationErrorOptions{NextRetryDelay: min(rej.RetryAfter, llm.MaxRetryAfter)})
		}
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeCostRejected, nil, rej.Code)
	}
	if errors.Is(err, costs.ErrBudgetExceeded) {
		return temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeCostRejected, nil, costs.CodeBudgetExceeded)
	}
	return err
}
