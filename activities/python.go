package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/agentryhq/agentry/internal/agent"
)

// PythonAttempts is how many times one run_python execution may start: a
// crash during an execution (the gateway killed, the activity's heartbeat
// lost) runs it again once; a second interruption gives the model an error
// result instead, and the run continues.
const PythonAttempts = 2

// pythonRerun is the result a run_python step returns without executing,
// when its execution already started PythonAttempts times.
func pythonRerun(ctx context.Context, tool string) (agent.ToolResult, bool) {
	if tool != agent.RunPythonTool || !activity.IsActivity(ctx) || activity.GetInfo(ctx).Attempt <= PythonAttempts {
		return agent.ToolResult{}, false
	}
	return agent.ToolResult{IsError: true, Content: "run_python: the execution was interrupted twice (the gateway stopped while it ran); it is not run again"}, true
}
