package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	. "github.com/agentryhq/agentry/workflows"
)

func reconcileEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *activities.ReconcileActivities) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	acts := &activities.ReconcileActivities{}
	env.RegisterWorkflowWithOptions(Reconcile, workflow.RegisterOptions{Name: ReconcileWorkflowName})
	env.RegisterActivity(acts)
	return env, acts
}

func TestReconcileSchedulesPreviousDayAndCompares(t *testing.T) {
	env, acts := reconcileEnv(t)
	env.SetStartTime(time.Date(2026, 3, 5, 0, 30, 0, 0, time.UTC))
	var begun ReconcileBeginInput
	env.OnActivity(acts.ReconcileBegin, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ReconcileBeginInput) (ReconcileBeginResult, error) {
			begun = in
			return ReconcileBeginResult{Providers: []string{"anthropic", "openai"}}, nil
		})
	var imported []string
	env.OnActivity(acts.ReconcileImport, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ReconcileImportInput) (ReconcileImportResult, error) {
			imported = append(imported, in.Provider+"@"+in.Day)
			return ReconcileImportResult{Provider: in.Provider, Rows: 3}, nil
		})
	env.OnActivity(acts.ReconcileCompare, mock.Anything, mock.Anything).Return(ReconcileCompareResult{Alerts: []string{"x"}}, nil)
	env.ExecuteWorkflow(ReconcileWorkflowName, ReconcileInput{Trigger: ReconcileTriggerSchedule})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res ReconcileResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if begun.Day != "2026-03-04" || begun.Trigger != ReconcileTriggerSchedule {
		t.Fatalf("begin: %+v", begun)
	}
	if len(imported) != 2 || imported[0] != "anthropic@2026-03-04" || imported[1] != "openai@2026-03-04" {
		t.Fatalf("imports: %v", imported)
	}
	if res.Status != "succeeded" || res.Rows != 6 || len(res.Alerts) != 1 || res.Day != "2026-03-04" {
		t.Fatalf("result: %+v", res)
	}
}

func TestReconcileRetriesAnExportFailureThenSucceeds(t *testing.T) {
	env, acts := reconcileEnv(t)
	env.OnActivity(acts.ReconcileBegin, mock.Anything, mock.Anything).Return(ReconcileBeginResult{Providers: []string{"openai"}}, nil)
	calls := 0
	env.OnActivity(acts.ReconcileImport, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ReconcileImportInput) (ReconcileImportResult, error) {
			calls++
			if calls < 3 {
				return ReconcileImportResult{}, temporal.NewApplicationError("openai usage export answered HTTP 429: slow down", ErrTypeReconcileImport)
			}
			return ReconcileImportResult{Provider: "openai", Rows: 1}, nil
		})
	env.OnActivity(acts.ReconcileCompare, mock.Anything, mock.Anything).Return(ReconcileCompareResult{}, nil)
	env.ExecuteWorkflow(ReconcileWorkflowName, ReconcileInput{Day: "2026-03-01", Trigger: ReconcileTriggerManual})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Fatalf("import attempts: %d", calls)
	}
}

func TestReconcileMissingKeyFailsAtOnceAndRecordsIt(t *testing.T) {
	env, acts := reconcileEnv(t)
	env.OnActivity(acts.ReconcileBegin, mock.Anything, mock.Anything).Return(ReconcileBeginResult{Providers: []string{"openai"}}, nil)
	calls := 0
	env.OnActivity(acts.ReconcileImport, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ReconcileImportInput) (ReconcileImportResult, error) {
			calls++
			return ReconcileImportResult{}, temporal.NewNonRetryableApplicationError(
				"environment variable OPENAI_ADMIN_KEY is not set", ErrTypeReconcileConfig, nil)
		})
	var failed ReconcileFailInput
	env.OnActivity(acts.ReconcileFail, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ReconcileFailInput) error { failed = in; return nil })
	env.ExecuteWorkflow(ReconcileWorkflowName, ReconcileInput{Day: "2026-03-01"})
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeReconcileFailed {
		t.Fatalf("workflow error: %v", err)
	}
	if calls != 1 || failed.Error != "environment variable OPENAI_ADMIN_KEY is not set" {
		t.Fatalf("calls %d, failure recorded %+v", calls, failed)
	}
}

func TestReconcileGivesUpAfterTheRetryPolicy(t *testing.T) {
	env, acts := reconcileEnv(t)
	env.OnActivity(acts.ReconcileBegin, mock.Anything, mock.Anything).Return(ReconcileBeginResult{Providers: []string{"openai"}}, nil)
	calls := 0
	env.OnActivity(acts.ReconcileImport, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ReconcileImportInput) (ReconcileImportResult, error) {
			calls++
			return ReconcileImportResult{}, temporal.NewApplicationError("openai usage export answered HTTP 500: boom", ErrTypeReconcileImport)
		})
	env.OnActivity(acts.ReconcileFail, mock.Anything, mock.Anything).Return(nil)
	env.ExecuteWorkflow(ReconcileWorkflowName, ReconcileInput{Day: "2026-03-01"})
	if env.GetWorkflowError() == nil {
		t.Fatal("no error")
	}
	if calls != int(ReconcileImportRetry.MaximumAttempts) {
		t.Fatalf("attempts %d", calls)
	}
}
