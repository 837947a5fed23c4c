package workflows

import "github.com/agentryhq/agentry/internal/agent"

// IdempotencyKey is the idempotency key of the tool call the step runs
// (agent.IdempotencyKey over the run's run-log key, the turn, the call's
// index and its id): the same for every execution of this step (activity
// retries, a local activity run again after a crash, the same step after
// continue-as-new, which keeps the workflow id, attempt and turn
// numbering), different for any other step. It is worked out from the
// step's input in the activity, so nothing of it is in the history and no
// workflow code depends on it.
func (in ToolInput) IdempotencyKey() string {
	return agent.IdempotencyKey(in.Run.Key(), in.Turn, in.Index, in.CallID)
}
