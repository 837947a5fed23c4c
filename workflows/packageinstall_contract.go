package workflows

import "time"

// The PackageInstall workflow's contract (`agentry package install <git
// URL>`, docs/package-install.md). The workflow is in packageinstall.go,
// its activities in activities/packageinstall.go, the service that records
// jobs and starts the workflow in internal/pkginstall.
const (
	// PackageInstallWorkflowName is the registered workflow type.
	PackageInstallWorkflowName = "PackageInstall"
	// PackageInstallInputVersion is the current version of
	// PackageInstallInput.
	PackageInstallInputVersion = 1
	// ErrTypePackageInstallRefused marks a step that retrying cannot fix:
	// not a git repository, no package in it, a failed verification, a
	// missing approval, a failed build, an existing agent. Not retried.
	ErrTypePackageInstallRefused = "PackageInstallRefused"
	// ErrTypePackageInstallFailed is the failure type of the workflow.
	ErrTypePackageInstallFailed = "PackageInstallFailed"
)

// PackageInstallWorkflowID is the workflow id of a job: the job id itself,
// so the job's database row and its workflow cannot part (starting the
// workflow of a job twice finds the first).
func PackageInstallWorkflowID(jobID string) string { return jobID }

// PackageInstallInput is the workflow input: only the job id; the source
// and the approvals are in the job's row, written before the start.
type PackageInstallInput struct {
	Version int    `json:"version,omitempty"`
	JobID   string `json:"job_id"`
}

// PackageInstallResult is the workflow result (the job row holds the
// progress and the details).
type PackageInstallResult struct {
	JobID   string `json:"job_id"`
	Status  string `json:"status"`
	AgentID string `json:"agent_id,omitempty"`
	Error   string `json:"error,omitempty"`
}

// PackageInstallStepTimeout bounds one step; the build step has its own,
// longer bound (a host build may compile).
var PackageInstallStepTimeout = struct{ Step, Build time.Duration }{2 * time.Minute, 15 * time.Minute}

// PackageInstallHeartbeatTimeout is how long a step may go without a
// heartbeat before it counts as lost (its worker died) and runs again.
const PackageInstallHeartbeatTimeout = 10 * time.Second

// Activities of PackageInstall: the method names of
// activities.PackageInstallActivities. Every one takes PackageInstallStep.
const (
	// ActivityPackageInstallFetch clones the source (shallow) and records
	// the commit; result PackageInstallFetchResult.
	ActivityPackageInstallFetch = "PackageInstallFetch"
	// ActivityPackageInstallVerify finds the package in the checkout,
	// checks signature and approvals and, when no build is needed, stores
	// the verified package; result PackageInstallVerifyResult.
	ActivityPackageInstallVerify = "PackageInstallVerify"
	// ActivityPackageInstallBuild runs the source's build script on the
	// gateway host (approved with --allow-host-build) and stores the
	// package built from the result.
	ActivityPackageInstallBuild = "PackageInstallBuild"
	// ActivityPackageInstallInstall installs the stored package;
	// idempotent (a retry after a crash finds its own install done).
	ActivityPackageInstallInstall = "PackageInstallInstall"
	// ActivityPackageInstallFail ends the job as failed; input
	// PackageInstallFailInput.
	ActivityPackageInstallFail = "PackageInstallFail"
)

// PackageInstallStep names the job a step works on.
type PackageInstallStep struct {
	JobID string `json:"job_id"`
}

// PackageInstallFetchResult is what the fetch found.
type PackageInstallFetchResult struct {
	Commit string `json:"commit"`
}

// PackageInstallVerifyResult tells whether a build step follows.
type PackageInstallVerifyResult struct {
	NeedsBuild bool `json:"needs_build"`
}

// PackageInstallInstallResult names the installed agent.
type PackageInstallInstallResult struct {
	AgentID string `json:"agent_id"`
}

// PackageInstallFailInput ends a job as failed.
type PackageInstallFailInput struct {
	JobID string `json:"job_id"`
	Error string `json:"error"`
}
