package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Reconcile imports every configured provider's usage and cost export of
// one UTC day, one activity per provider (each stores its provider's day
// whole or not at all), then compares them with the ledger and stores the
// variance with the run. The history carries provider ids, the day and
// counts, never an admin key.
func Reconcile(ctx workflow.Context, in ReconcileInput) (*ReconcileResult, error) {
	day := in.Day
	if day == "" {
		// The previous completed UTC day at the start of the run.
		day = workflow.Now(ctx).UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	}
	info := workflow.GetInfo(ctx)
	res := &ReconcileResult{RunID: info.WorkflowExecution.RunID, Day: day, Status: "running"}
	short := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	var plan ReconcileBeginResult
	ref := ReconcileBeginInput{RunID: res.RunID, WorkflowID: info.WorkflowExecution.ID, Day: day, Trigger: in.Trigger}
	if err := workflow.ExecuteActivity(short, ActivityReconcileBegin, ref).Get(ctx, &plan); err != nil {
		return res, err
	}
	res.Providers = plan.Providers
	importCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        ReconcileImportRetry.InitialInterval,
			BackoffCoefficient:     2,
			MaximumInterval:        ReconcileImportRetry.MaximumInterval,
			MaximumAttempts:        ReconcileImportRetry.MaximumAttempts,
			NonRetryableErrorTypes: []string{ErrTypeReconcileConfig},
		},
		Summary: "import " + day,
	})
	for _, p := range plan.Providers {
		var imp ReconcileImportResult
		err := workflow.ExecuteActivity(importCtx, ActivityReconcileImport,
			ReconcileImportInput{RunID: res.RunID, Provider: p, Day: day}).Get(ctx, &imp)
		if err != nil {
			res.Status, res.Error = "failed", activityErrorText(err)
			if ferr := workflow.ExecuteActivity(short, ActivityReconcileFail,
				ReconcileFailInput{RunID: res.RunID, Error: res.Error}).Get(ctx, nil); ferr != nil {
				workflow.GetLogger(ctx).Warn("could not record the reconciliation failure", "err", ferr)
			}
			return res, temporal.NewNonRetryableApplicationError(res.Error, ErrTypeReconcileFailed, nil)
		}
		res.Rows += imp.Rows
	}
	var cmp ReconcileCompareResult
	if err := workflow.ExecuteActivity(short, ActivityReconcileCompare, ReconcileCompareInput{RunID: res.RunID}).Get(ctx, &cmp); err != nil {
		return res, err
	}
	res.Status, res.Alerts = "succeeded", cmp.Alerts
	return res, nil
}

// activityErrorText is the application error's message (the activity's
// own text, without Temporal's wrapping).
func activityErrorText(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}
