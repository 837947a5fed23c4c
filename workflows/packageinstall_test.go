package workflows_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/activities"
	. "github.com/agentryhq/agentry/workflows"
)

// packageInstallSteps mocks every step; each appends its name to the
// returned list. needsBuild is Verify's answer; fail names a step that
// fails with err.
func packageInstallSteps(t *testing.T, needsBuild bool, fail string, err error) (*testsuite.TestWorkflowEnvironment, *[]string) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	acts := &activities.PackageInstallActivities{}
	env.RegisterWorkflowWithOptions(PackageInstall, workflow.RegisterOptions{Name: PackageInstallWorkflowName})
	env.RegisterActivity(acts)
	var steps []string
	step := func(name string) error {
		steps = append(steps, name)
		if name == fail {
			return err
		}
		return nil
	}
	env.OnActivity(acts.PackageInstallFetch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in PackageInstallStep) (PackageInstallFetchResult, error) {
			return PackageInstallFetchResult{Commit: "abc123"}, step("fetch")
		})
	env.OnActivity(acts.PackageInstallVerify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in PackageInstallStep) (PackageInstallVerifyResult, error) {
			return PackageInstallVerifyResult{NeedsBuild: needsBuild}, step("verify")
		})
	env.OnActivity(acts.PackageInstallBuild, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in PackageInstallStep) error { return step("build") })
	env.OnActivity(acts.PackageInstallInstall, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in PackageInstallStep) (PackageInstallInstallResult, error) {
			return PackageInstallInstallResult{AgentID: "triage"}, step("install")
		})
	env.OnActivity(acts.PackageInstallFail, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in PackageInstallFailInput) error { return step("fail:" + in.Error) })
	return env, &steps
}

func TestPackageInstallRunsEveryStepInOrder(t *testing.T) {
	for _, tc := range []struct {
		build bool
		want  []string
	}{
		{false, []string{"fetch", "verify", "install"}},
		{true, []string{"fetch", "verify", "build", "install"}},
	} {
		env, steps := packageInstallSteps(t, tc.build, "", nil)
		env.ExecuteWorkflow(PackageInstallWorkflowName, PackageInstallInput{Version: PackageInstallInputVersion, JobID: "pkginstall-1"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var res PackageInstallResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(*steps, tc.want) || res.Status != "succeeded" || res.AgentID != "triage" || res.JobID != "pkginstall-1" {
			t.Fatalf("build %v: steps %v, result %+v", tc.build, *steps, res)
		}
	}
}

// A refusal (missing approval, failed verification) is not retried: the
// job is recorded as failed with the step's own text and nothing after
// the step runs.
func TestPackageInstallRefusalFailsAtOnce(t *testing.T) {
	msg := "raw source: approve it with --allow-unverified"
	env, steps := packageInstallSteps(t, false, "verify", temporal.NewNonRetryableApplicationError(msg, ErrTypePackageInstallRefused, nil))
	env.ExecuteWorkflow(PackageInstallWorkflowName, PackageInstallInput{JobID: "pkginstall-2"})
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != ErrTypePackageInstallFailed {
		t.Fatalf("workflow error: %v", err)
	}
	if want := []string{"fetch", "verify", "fail:" + msg}; !slices.Equal(*steps, want) {
		t.Fatalf("steps %v, want %v", *steps, want)
	}
}

// A transient failure (the git host did not answer) is retried by the
// workflow's policy and the job goes on.
func TestPackageInstallRetriesATransientFetchFailure(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	acts := &activities.PackageInstallActivities{}
	env.RegisterWorkflowWithOptions(PackageInstall, workflow.RegisterOptions{Name: PackageInstallWorkflowName})
	env.RegisterActivity(acts)
	fetches := 0
	env.OnActivity(acts.PackageInstallFetch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in PackageInstallStep) (PackageInstallFetchResult, error) {
			if fetches++; fetches < 3 {
				return PackageInstallFetchResult{}, errors.New("fetch: connection reset")
			}
			return PackageInstallFetchResult{Commit: "abc"}, nil
		})
	env.OnActivity(acts.PackageInstallVerify, mock.Anything, mock.Anything).Return(PackageInstallVerifyResult{}, nil)
	env.OnActivity(acts.PackageInstallInstall, mock.Anything, mock.Anything).Return(PackageInstallInstallResult{AgentID: "a"}, nil)
	env.ExecuteWorkflow(PackageInstallWorkflowName, PackageInstallInput{JobID: "pkginstall-3"})
	if err := env.GetWorkflowError(); err != nil || fetches != 3 {
		t.Fatalf("error %v after %d fetches", err, fetches)
	}
}
