package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/pkginstall"
	"github.com/agentryhq/agentry/workflows"
)

// PackageInstallActivities are the steps of the PackageInstall workflow
// (workflows/packageinstall_contract.go). Inputs and results carry the job
// id, the commit and the agent id; the package itself stays in the job's
// row. Every step heartbeats, so a gateway that dies in the middle of one
// is noticed within the workflow's heartbeat timeout and the step runs
// again on the next worker.
type PackageInstallActivities struct {
	Service *pkginstall.Service
}

// PackageInstallFetch clones the source and records the commit.
func (a *PackageInstallActivities) PackageInstallFetch(ctx context.Context, in workflows.PackageInstallStep) (workflows.PackageInstallFetchResult, error) {
	var commit string
	err := heartbeating(ctx, func(ctx context.Context) (err error) {
		commit, err = a.Service.Fetch(ctx, in.JobID)
		return err
	})
	return workflows.PackageInstallFetchResult{Commit: commit}, err
}

// PackageInstallVerify verifies the source against the job's approvals.
func (a *PackageInstallActivities) PackageInstallVerify(ctx context.Context, in workflows.PackageInstallStep) (workflows.PackageInstallVerifyResult, error) {
	var needsBuild bool
	err := heartbeating(ctx, func(ctx context.Context) (err error) {
		needsBuild, err = a.Service.Verify(ctx, in.JobID)
		return err
	})
	return workflows.PackageInstallVerifyResult{NeedsBuild: needsBuild}, err
}

// PackageInstallBuild runs the approved build on the gateway host.
func (a *PackageInstallActivities) PackageInstallBuild(ctx context.Context, in workflows.PackageInstallStep) error {
	return heartbeating(ctx, func(ctx context.Context) error { return a.Service.Build(ctx, in.JobID) })
}

// PackageInstallInstall installs the verified package (once).
func (a *PackageInstallActivities) PackageInstallInstall(ctx context.Context, in workflows.PackageInstallStep) (workflows.PackageInstallInstallResult, error) {
	var id string
	err := heartbeating(ctx, func(ctx context.Context) (err error) {
		id, err = a.Service.Install(ctx, in.JobID)
		return err
	})
	return workflows.PackageInstallInstallResult{AgentID: id}, err
}

// PackageInstallFail records the job's failure.
func (a *PackageInstallActivities) PackageInstallFail(ctx context.Context, in workflows.PackageInstallFailInput) error {
	return a.Service.Fail(ctx, in.JobID, in.Error)
}

// PackageInstallHeartbeat is how often a running step heartbeats.
var PackageInstallHeartbeat = 2 * time.Second

// heartbeating runs step while heartbeating, and turns a refusal into a
// non-retryable application error (its text only: it is shown to users).
func heartbeating(ctx context.Context, step func(context.Context) error) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(PackageInstallHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	err := step(ctx)
	var refused *pkginstall.RefusedError
	if errors.As(err, &refused) {
		return temporal.NewNonRetryableApplicationError(refused.Msg, workflows.ErrTypePackageInstallRefused, nil)
	}
	return err
}
