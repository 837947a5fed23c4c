package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// PackageInstall runs one package install job: fetch the git source,
// verify it (signature, approvals), build it on the gateway host when the
// source asks for a build and the job approved it, and install the agent.
// Each step is an activity that records its progress in the job's row, so
// a gateway restart resumes the job at the step that was running and a
// finished step is not repeated. The history carries the job id, the
// commit and the agent id, never the package itself.
func PackageInstall(ctx workflow.Context, in PackageInstallInput) (*PackageInstallResult, error) {
	res := &PackageInstallResult{JobID: in.JobID, Status: "running"}
	step := PackageInstallStep{JobID: in.JobID}
	opts := func(timeout time.Duration, summary string) workflow.Context {
		return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: timeout,
			// Steps heartbeat: a gateway that dies in one is noticed in
			// seconds and the step runs again, not after its timeout.
			HeartbeatTimeout: PackageInstallHeartbeatTimeout,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5,
				NonRetryableErrorTypes: []string{ErrTypePackageInstallRefused},
			},
			Summary: summary,
		})
	}
	fail := func(err error) (*PackageInstallResult, error) {
		res.Status, res.Error = "failed", activityErrorText(err)
		short := opts(PackageInstallStepTimeout.Step, "record the failure")
		if ferr := workflow.ExecuteActivity(short, ActivityPackageInstallFail,
			PackageInstallFailInput{JobID: in.JobID, Error: res.Error}).Get(ctx, nil); ferr != nil {
			workflow.GetLogger(ctx).Warn("could not record the package install failure", "err", ferr)
		}
		return res, temporal.NewNonRetryableApplicationError(res.Error, ErrTypePackageInstallFailed, nil)
	}

	var fetched PackageInstallFetchResult
	if err := workflow.ExecuteActivity(opts(PackageInstallStepTimeout.Step, "fetch"), ActivityPackageInstallFetch, step).Get(ctx, &fetched); err != nil {
		return fail(err)
	}
	var verified PackageInstallVerifyResult
	if err := workflow.ExecuteActivity(opts(PackageInstallStepTimeout.Step, "verify "+fetched.Commit), ActivityPackageInstallVerify, step).Get(ctx, &verified); err != nil {
		return fail(err)
	}
	if verified.NeedsBuild {
		if err := workflow.ExecuteActivity(opts(PackageInstallStepTimeout.Build, "build on the gateway host"), ActivityPackageInstallBuild, step).Get(ctx, nil); err != nil {
			return fail(err)
		}
	}
	var installed PackageInstallInstallResult
	if err := workflow.ExecuteActivity(opts(PackageInstallStepTimeout.Step, "install"), ActivityPackageInstallInstall, step).Get(ctx, &installed); err != nil {
		return fail(err)
	}
	res.Status, res.AgentID = "succeeded", installed.AgentID
	return res, nil
}
