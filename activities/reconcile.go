package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/reconcile"
	"github.com/agentryhq/agentry/workflows"
)

// ReconcileActivities are the steps of the Reconcile workflow
// (workflows/reconcile_contract.go). Their inputs and results carry
// provider ids, days and run ids, never a credential: the admin key is read
// from the environment inside ReconcileImport.
type ReconcileActivities struct {
	Service *reconcile.Service
}

// ReconcileBegin records the run as running and lists the providers.
func (a *ReconcileActivities) ReconcileBegin(ctx context.Context, in workflows.ReconcileBeginInput) (workflows.ReconcileBeginResult, error) {
	ids, err := a.Service.Begin(ctx, reconcile.RunRef{RunID: in.RunID, WorkflowID: in.WorkflowID, Day: in.Day, Trigger: in.Trigger})
	return workflows.ReconcileBeginResult{Providers: ids}, err
}

// ReconcileImport imports one provider's export of the day (all pages,
// stored whole or not at all). Export API failures (401, 429, 5xx,
// malformed answers) are retried by Temporal's policy; a missing key
// variable or a bad provider entry is not.
func (a *ReconcileActivities) ReconcileImport(ctx context.Context, in workflows.ReconcileImportInput) (workflows.ReconcileImportResult, error) {
	res, err := a.Service.Import(ctx, in.RunID, in.Provider, in.Day)
	out := workflows.ReconcileImportResult{Provider: res.Provider, Rows: res.Rows, Pages: res.Pages}
	if err != nil && (errors.Is(err, reconcile.ErrMissingKey) || errors.Is(err, reconcile.ErrConfig)) {
		return out, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeReconcileConfig, nil)
	}
	if err != nil {
		// Only the (scrubbed) text travels into the history.
		return out, temporal.NewApplicationError(err.Error(), workflows.ErrTypeReconcileImport)
	}
	return out, nil
}

// ReconcileCompare computes and stores the variance, ends the run and
// publishes costs.variance alerts.
func (a *ReconcileActivities) ReconcileCompare(ctx context.Context, in workflows.ReconcileCompareInput) (workflows.ReconcileCompareResult, error) {
	res, err := a.Service.Compare(ctx, in.RunID)
	return workflows.ReconcileCompareResult{Alerts: res.Alerts}, err
}

// ReconcileFail records the run's failure.
func (a *ReconcileActivities) ReconcileFail(ctx context.Context, in workflows.ReconcileFailInput) error {
	return a.Service.Fail(ctx, in.RunID, in.Error)
}
