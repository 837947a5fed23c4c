package workflows

import (
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
)

// The contract of retries (retry.go, docs/retry.md): a failed task run is
// retried by a new attempt (TriggerRetry) whose TaskRunInput.Reuse holds
// the recorded steps of the failed one. The service that starts it
// (internal/taskruns) copies the failed attempt's run log up to those
// steps into the new attempt's run key; the workflow serves the steps from
// Reuse instead of running their activities, so no provider call is made
// and no turn paid again, and goes on with the first step not recorded.
const (
	// TriggerRetry marks runs started by POST .../runs/{run_id}/retry.
	TriggerRetry = "retry"
	// ReusedTextBytes bounds the text of a reused answer other than the
	// last one in the workflow input (only the last one can become the
	// reply; the full texts are in the run log).
	ReusedTextBytes = 512
)

// ReusedSteps are the recorded steps a retried run takes over.
type ReusedSteps struct {
	// RetryOf is the run retried; FromAttempt its attempt (its run key).
	RetryOf     int64 `json:"retry_of"`
	FromAttempt int   `json:"from_attempt"`
	// Turns are the recorded turns, turn 1 first.
	Turns []ReusedTurn `json:"turns"`
}

// ReusedTurn is one recorded LLM turn and the tool calls of it that
// finished.
type ReusedTurn struct {
	// Seq is the answer's position in the run log: the turn must send
	// exactly Seq messages (checked; a mismatch fails the run).
	Seq int `json:"seq"`
	// Answer is what the turn's activity returned (no tool arguments, text
	// shortened, no usage: the tokens were paid by the retried attempt).
	Answer llm.Response `json:"answer"`
	// Results are the summaries of the answer's first len(Results) tool
	// calls, whose results are recorded; the others run again.
	Results []agent.ToolResult `json:"results,omitempty"`
}

// answer is the recorded answer of turn, if any.
func (r *ReusedSteps) answer(turn int) (*ReusedTurn, bool) {
	if r == nil || turn < 1 || turn > len(r.Turns) {
		return nil, false
	}
	return &r.Turns[turn-1], true
}

// result is the recorded result of the index-th tool call of turn, if any.
func (r *ReusedSteps) result(turn, index int) (agent.ToolResult, bool) {
	t, ok := r.answer(turn)
	if !ok || index >= len(t.Results) {
		return agent.ToolResult{}, false
	}
	return t.Results[index], true
}
