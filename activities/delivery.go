package activities

import (
	"context"
	"errors"
	"log/slog"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/telemetry"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Targets resolves where a message goes at attempt time (the webhook
// channel adapter, *delivery.Channels).
type Targets interface {
	Target(ctx context.Context, msg workflows.DeliveryInput) (delivery.Target, error)
}

// DeliveryActivities are the activities of the Delivery workflow.
type DeliveryActivities struct {
	Store   models.DeliveryStore
	Targets Targets
	Sender  *delivery.Sender
	Log     *slog.Logger
}

// DeliveryAttempt makes one HTTP attempt of a delivery and records it.
// The destination is resolved now (secrets never enter workflow history).
// A 2xx answer returns; 5xx, 429 and network errors return a retryable
// error (honouring Retry-After through NextRetryDelay); other 4xx answers,
// refused destinations and disabled channels return a non-retryable one
// (type workflows.ErrTypeDeliveryRejected).
func (a *DeliveryActivities) DeliveryAttempt(ctx context.Context, msg workflows.DeliveryInput) (*workflows.DeliveryAttemptResult, error) {
	info := activity.GetInfo(ctx)
	attempt := int(info.Attempt)
	ident := models.Delivery{ID: msg.DeliveryID, Channel: msg.Channel, Source: msg.Source, AgentID: msg.AgentID, WorkflowID: info.WorkflowExecution.ID}
	target, err := a.Targets.Target(ctx, msg)
	if err != nil {
		var perm *delivery.PermanentError
		if !errors.As(err, &perm) {
			return nil, temporal.NewApplicationError(err.Error(), workflows.ErrTypeDeliveryAttemptFailed)
		}
		a.record(ctx, models.AttemptRecord{Delivery: ident, Attempt: attempt, Error: err.Error(), Final: true})
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeDeliveryRejected, nil)
	}
	ident.Target = delivery.DisplayURL(target.URL)
	res := a.Sender.Send(ctx, target, msg.DeliveryID, []byte(msg.Body))
	rec := models.AttemptRecord{Delivery: ident, Attempt: attempt, StatusCode: res.StatusCode, Duration: res.Duration,
		Delivered: res.Err == nil, Final: res.Err == nil || !res.Retryable}
	if res.Err != nil {
		rec.Error = res.Err.Error()
	}
	a.record(ctx, rec)
	switch {
	case res.Err == nil:
		return &workflows.DeliveryAttemptResult{Attempt: attempt, StatusCode: res.StatusCode}, nil
	case !res.Retryable:
		return nil, temporal.NewNonRetryableApplicationError(res.Err.Error(), workflows.ErrTypeDeliveryRejected, nil, res.StatusCode)
	default:
		opts := temporal.ApplicationErrorOptions{Details: []any{res.StatusCode}}
		if d := res.RetryAfter; d > 0 {
			if max := msg.Retry.WithDefaults().MaxInterval; d > max {
				d = max
			}
			opts.NextRetryDelay = d
		}
		return nil, temporal.NewApplicationErrorWithOptions(res.Err.Error(), workflows.ErrTypeDeliveryAttemptFailed, opts)
	}
}

// record stores an attempt. A failure to record is logged, not returned:
// retrying the activity would send the message again.
func (a *DeliveryActivities) record(ctx context.Context, r models.AttemptRecord) {
	if err := a.Store.RecordAttempt(context.WithoutCancel(ctx), r); err != nil && a.Log != nil {
		a.Log.Warn("delivery: could not record attempt", "delivery", r.Delivery.ID, "attempt", r.Attempt, "err", err)
	}
}

// DeliveryFinish records the final outcome once retries have ended.
func (a *DeliveryActivities) DeliveryFinish(ctx context.Context, in workflows.DeliveryFinishInput) error {
	if err := a.Store.FinishDelivery(ctx, in.DeliveryID, in.Status, in.Error); err != nil {
		return err
	}
	telemetry.DeliveryEnded(in.Status)
	return nil
}
