package workflows

import (
	"fmt"

	"github.com/agentryhq/agentry/internal/llm"
)

// Retries in the agent-run core. A retried task run starts from the
// beginning of the loop like any run, but the executor answers the steps
// its ReusedSteps hold itself: a recorded LLM turn returns the recorded
// answer and a recorded tool call its recorded result, with no activity
// (so no provider call, no ledger row, no tool run again). The loop
// therefore rebuilds exactly the conversation the failed attempt had (the
// run log of the new attempt holds a copy of it) and the first step that
// was not recorded runs as an activity, as in any run. Old histories never
// carry Reuse, so their command sequence is unchanged and no GetVersion
// marker is needed.

// reusedAnswer is the recorded answer of turn when the run reuses one; n
// is how many messages the turn sends, which must be where the answer was
// recorded.
func (e *durableExecutor) reusedAnswer(turn, n int) (llm.Response, bool, error) {
	rec, ok := e.run.reuse.answer(turn)
	if !ok {
		return llm.Response{}, false, nil
	}
	if rec.Seq != n {
		return llm.Response{}, false, fmt.Errorf("the recorded turn %d of run %d is at position %d of its conversation, the retry counts %d messages",
			turn, e.run.reuse.RetryOf, rec.Seq, n)
	}
	return rec.Answer, true, nil
}
