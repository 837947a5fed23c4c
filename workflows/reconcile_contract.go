package workflows

import "time"

// The Reconcile workflow's contract (spec cost rule 12). The workflow is in
// reconcile.go, its activities in activities/reconcile.go, the service that
// schedules and starts it in internal/reconcile.
const (
	// ReconcileWorkflowName is the registered workflow type.
	ReconcileWorkflowName = "Reconcile"
	// ErrTypeReconcileFailed is the failure type of a run that could not
	// import every provider.
	ErrTypeReconcileFailed = "ReconcileFailed"
	// ErrTypeReconcileConfig marks an import that retrying cannot fix (a
	// missing admin key variable, an unknown provider type): not retried.
	ErrTypeReconcileConfig = "ReconcileConfig"
	// ErrTypeReconcileImport marks an export API failure (401, 429, 5xx,
	// malformed answer): retried by ReconcileImportRetry.
	ErrTypeReconcileImport = "ReconcileImport"

	// Triggers of a run.
	ReconcileTriggerSchedule = "schedule"
	ReconcileTriggerManual   = "manual"
)

// ReconcileScheduleID is the id of the installation's reconciliation
// Schedule ("agentry:reconcile"); Temporal names its runs
// "<schedule id>-run-<fire time>".
func ReconcileScheduleID(taskQueue string) string { return taskQueue + ":reconcile" }

// ReconcileWorkflowID is the id of an on-demand run of one day
// ("agentry:reconcile:2026-03-04"): a second request for the day while one
// runs joins it.
func ReconcileWorkflowID(taskQueue, day string) string { return taskQueue + ":reconcile:" + day }

// ReconcileInput is the workflow input. Day is YYYY-MM-DD (UTC); empty
// means the previous completed UTC day at the workflow's start (the
// Schedule's runs). It carries no credential: admin keys are read by the
// import activity from the environment.
type ReconcileInput struct {
	// Version is ReconcileInputVersion when the run was started.
	Version int    `json:"version,omitempty"`
	Day     string `json:"day,omitempty"`
	Trigger string `json:"trigger"`
}

// ReconcileResult is the workflow result; the full per-provider and
// per-model figures are stored with the run (GET
// /costs/reconciliation/runs/{run_id}).
type ReconcileResult struct {
	RunID     string   `json:"run_id"`
	Day       string   `json:"day"`
	Status    string   `json:"status"`
	Providers []string `json:"providers"`
	Rows      int      `json:"rows"`
	Alerts    []string `json:"alerts,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// ReconcileImportRetry is the retry policy of one provider's import:
// export APIs rate-limit and fail transiently, so a few spaced attempts;
// the run fails (and readiness says so) when they are spent.
var ReconcileImportRetry = struct {
	InitialInterval, MaximumInterval time.Duration
	MaximumAttempts                  int32
}{5 * time.Second, time.Minute, 5}

// Activities of Reconcile: the method names of activities.ReconcileActivities.
const (
	// ActivityReconcileBegin records the run; input ReconcileBeginInput,
	// result ReconcileBeginResult.
	ActivityReconcileBegin = "ReconcileBegin"
	// ActivityReconcileImport imports one provider's day; input
	// ReconcileImportInput, result ReconcileImportResult; errors
	// ErrTypeReconcileImport (retried) or ErrTypeReconcileConfig (not).
	ActivityReconcileImport = "ReconcileImport"
	// ActivityReconcileCompare computes and stores the variance, ends the
	// run and publishes costs.variance; input ReconcileCompareInput,
	// result ReconcileCompareResult.
	ActivityReconcileCompare = "ReconcileCompare"
	// ActivityReconcileFail ends the run as failed; input ReconcileFailInput.
	ActivityReconcileFail = "ReconcileFail"
)

// ReconcileBeginInput names the run.
type ReconcileBeginInput struct {
	RunID      string `json:"run_id"`
	WorkflowID string `json:"workflow_id"`
	Day        string `json:"day"`
	Trigger    string `json:"trigger"`
}

// ReconcileBeginResult lists the provider ids to import.
type ReconcileBeginResult struct {
	Providers []string `json:"providers"`
}

// ReconcileImportInput is one provider's import of one day.
type ReconcileImportInput struct {
	RunID    string `json:"run_id"`
	Provider string `json:"provider"`
	Day      string `json:"day"`
}

// ReconcileImportResult is what one import stored.
type ReconcileImportResult struct {
	Provider string `json:"provider"`
	Rows     int    `json:"rows"`
	Pages    int    `json:"pages"`
}

// ReconcileCompareInput names the run to compare.
type ReconcileCompareInput struct {
	RunID string `json:"run_id"`
}

// ReconcileCompareResult lists the alerts (variance above the threshold).
type ReconcileCompareResult struct {
	Alerts []string `json:"alerts,omitempty"`
}

// ReconcileFailInput ends a run as failed.
type ReconcileFailInput struct {
	RunID string `json:"run_id"`
	Error string `json:"error"`
}
