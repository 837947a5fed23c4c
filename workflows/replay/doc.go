// Package replay holds the replay tests of every workflow: histories
// recorded from real runs (embedded Temporal, the whole gateway, the fake
// LLM provider) are checked into testdata/ and replayed against the
// current workflow code with worker.NewWorkflowReplayer, so a change that
// would break runs in flight fails `make test` instead of a deploy.
//
// The approval history (TaskRun-approval.json) is recorded by
// TestRecordApproval alone: go test ./workflows/replay -run TestRecordApproval -update;
// the budget-wait history (TaskRun-budget-wait.json) by TestRecordBudgetWait;
// the firing that waited for an approval (ScheduledAgent-firing-approval.json)
// by TestRecordFiringApproval.
//
// Re-record after an intended change of a workflow (and follow the
// versioning policy in docs/decisions.md first):
//
//	go test ./workflows/replay -run TestRecord -update
//
// Histories of other workflows may be dropped into testdata/ as
// <WorkflowType>-<what>.json (the JSON `temporal workflow show --output
// json` writes, or HistoryFile below); TestReplayRecordedHistories
// replays every file there, and TestEveryWorkflowHasAHistory asks for at
// least one history per workflow the worker registers.
package replay
