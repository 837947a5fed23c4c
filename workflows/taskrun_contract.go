package workflows

import (
	"fmt"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
)

// The TaskRun workflow's contract (the workflow is in taskrun.go, its
// activities in activities/taskrun.go, the service that starts and
// cancels it in internal/taskruns).
const (
	// TaskRunWorkflowName is the registered workflow type.
	TaskRunWorkflowName = "TaskRun"
	// TaskRunTimeout bounds a run (spec: 15 minutes). The workflow's own
	// timer enforces it and records the failure.
	TaskRunTimeout = 15 * time.Minute
	// TaskRunExecutionTimeout is Temporal's backstop should the workflow
	// be unable to end itself (it then cannot record the outcome; the next
	// run request of the task repairs the record, see taskruns.Service).
	TaskRunExecutionTimeout = TaskRunTimeout + 5*time.Minute
	// QueryTaskRunProgress answers a TaskRunResult with the progress so far.
	QueryTaskRunProgress = "progress"
	// TriggerAPI marks runs started through the HTTP API.
	TriggerAPI = "api"
	// ErrTypeTaskRunFailed is the failure type of a workflow whose run
	// failed or timed out.
	ErrTypeTaskRunFailed = "TaskRunFailed"
)

// TaskRunWorkflowID is the workflow id of a task's runs: one id per task,
// so Temporal itself refuses a second concurrent run.
func TaskRunWorkflowID(taskID int64) string { return fmt.Sprintf("task-%d", taskID) }

// TaskRunInput starts a run. The agent's settings are resolved when the
// run is requested, so a later change of the agent file does not change a
// running (or replaying) run.
type TaskRunInput struct {
	// Version is TaskRunInputVersion when the run was requested.
	Version            int         `json:"version,omitempty"`
	TaskID             int64       `json:"task_id"`
	RunID              int64       `json:"run_id"`
	Attempt            int         `json:"attempt"`
	AgentID            string      `json:"agent_id"`
	Title              string      `json:"title"`
	Trigger            string      `json:"trigger"`
	Subject            string      `json:"subject"`
	DataClassification string      `json:"data_classification,omitempty"`
	Agent              agent.Input `json:"agent"`
	Builtins           []string    `json:"builtins"` // tool grants: builtins and mcp__<server>__* (Definition.ToolGrants)
	// Timeout overrides TaskRunTimeout (tests); 0 means TaskRunTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
}

func (in TaskRunInput) ref() RunRef {
	return RunRef{TaskID: in.TaskID, RunID: in.RunID, Attempt: in.Attempt, AgentID: in.AgentID,
		WorkflowID: TaskRunWorkflowID(in.TaskID), Trigger: in.Trigger, Subject: in.Subject, DataClassification: in.DataClassification}
}

// TaskRunResult is the outcome (and, through QueryTaskRunProgress, the
// progress) of a run.
type TaskRunResult struct {
	RunID      int64     `json:"run_id"`
	Status     string    `json:"status"`
	Turns      int       `json:"turns"`
	Usage      llm.Usage `json:"usage"`
	Reply      string    `json:"reply,omitempty"`
	StopReason string    `json:"stop_reason,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// Activities of TaskRun: the method names of activities.TaskRunActivities
// (the worker registers the struct; worker's test checks the names).
const (
	// ActivityTaskRunStart (local) marks the run running; input RunRef.
	ActivityTaskRunStart = "TaskRunStart"
	// ActivityTaskRunFinish (local) records the outcome; input
	// models.RunOutcome.
	ActivityTaskRunFinish = "TaskRunFinish"
	// ActivityTaskRunLLMTurn makes one LLM call; input LLMTurnInput,
	// result llm.Response.
	ActivityTaskRunLLMTurn = "TaskRunLLMTurn"
	// ActivityTaskRunTool makes one tool call; input ToolInput, result
	// agent.ToolResult.
	ActivityTaskRunTool = "TaskRunTool"
)

// Error types of the task-run activities. The workflow's retry policies
// name the non-retryable ones.
const (
	// ErrTypeProvider is a provider failure worth retrying (429, 5xx,
	// network): the activity is retried with backoff.
	ErrTypeProvider = "ProviderError"
	// ErrTypeLLMRejected is a call that cannot succeed by repeating it
	// (4xx, admission rejected by cost governance, unknown provider).
	ErrTypeLLMRejected = "LLMCallRejected"
	// ErrTypeCostThrottled is a cost-governance rejection that passes with
	// time (rate limit, token quota window, provider TPM, breaker): retried
	// after the Retry-After governance gave.
	ErrTypeCostThrottled = "CostThrottled"
	// ErrTypeRunGone is a run that no longer exists or already ended.
	ErrTypeRunGone = "RunGone"
	// ErrTypeArtifactOutsideArea is a tool that wrote outside the run's
	// artifact area.
	ErrTypeArtifactOutsideArea = "ArtifactOutsideArea"
)

// RunRef identifies the run an activity works for.
type RunRef struct {
	TaskID     int64  `json:"task_id"`
	RunID      int64  `json:"run_id"`
	Attempt    int    `json:"attempt"`
	AgentID    string `json:"agent_id"`
	WorkflowID string `json:"workflow_id"`
	Trigger    string `json:"trigger"`
	// Subject is who started the run (ledger attribution).
	Subject            string `json:"subject"`
	DataClassification string `json:"data_classification,omitempty"`
}

// LLMTurnInput is one LLM turn of a run.
type LLMTurnInput struct {
	Run  RunRef            `json:"run"`
	Turn agent.TurnRequest `json:"turn"`
}

// ToolInput is one tool call of a run.
type ToolInput struct {
	Run        RunRef               `json:"run"`
	Invocation agent.ToolInvocation `json:"invocation"`
	// Builtins are the tool grants: builtin names and mcp__<server>__* patterns.
	Builtins []string `json:"builtins"`
}
