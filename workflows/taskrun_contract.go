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
	// ToolStepMargin is how long a tool activity may take beyond
	// runtime.tool_timeout, the bound of the tool call itself.
	ToolStepMargin = time.Minute
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
	Version            int    `json:"version,omitempty"`
	TaskID             int64  `json:"task_id"`
	RunID              int64  `json:"run_id"`
	Attempt            int    `json:"attempt"`
	AgentID            string `json:"agent_id"`
	Title              string `json:"title"`
	Trigger            string `json:"trigger"`
	Subject            string `json:"subject"`
	DataClassification string `json:"data_classification,omitempty"`
	// Agent is the outline of the agent input (agent.Input.Outline, since
	// version 2): the loop's shape without the texts, which the activities
	// load from the snapshot.
	Agent agent.Input `json:"agent"`
	// Snapshot is the content hash of the run's RunSnapshot in the run log
	// (internal/runlog): the agent as resolved when the run was requested.
	Snapshot string `json:"snapshot"`
	// Timeout overrides TaskRunTimeout (tests); 0 means TaskRunTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Deadline is when the run times out; set by the first execution and
	// carried across continue-as-new.
	Deadline time.Time `json:"deadline,omitempty"`
	// Continuation is where a continued-as-new run goes on from.
	Continuation *agent.Checkpoint `json:"continuation,omitempty"`
	// ContinueAfterEvents overrides DefaultContinueAsNewEvents (tests).
	ContinueAfterEvents int `json:"continue_after_events,omitempty"`
	// Approvals are the tools a person must approve before the run calls
	// them (the agent's approvals block as resolved when requested).
	Approvals ApprovalPolicy `json:"approvals,omitempty"`
	// BudgetWait is costs.run_budget_wait as resolved when requested: how
	// long in all the run may park waiting for budget (0: a budget or
	// quota refusal fails it). BudgetWaited is the time it parked so far,
	// carried across continue-as-new.
	BudgetWait   time.Duration `json:"budget_wait,omitempty"`
	BudgetWaited time.Duration `json:"budget_waited,omitempty"`
	// ToolTimeout is runtime.tool_timeout as resolved when requested: the
	// tool activity's start-to-close timeout is this plus ToolStepMargin
	// (0: the fixed 5 minutes of runs requested before the field existed).
	ToolTimeout time.Duration `json:"tool_timeout,omitempty"`
	// Reuse is set on a retry (TriggerRetry): the recorded steps of the
	// failed attempt this one goes on from (retry_contract.go).
	Reuse *ReusedSteps `json:"reuse,omitempty"`
	// LocalFileTools runs the built-in file tools (read_file, write_file)
	// as local activities: one workflow task and one activity task fewer
	// per call. Set on every run requested since; runs requested before
	// (false) keep their tool activities, so their histories replay.
	LocalFileTools bool `json:"local_file_tools,omitempty"`
	// LocalLLMTurns runs the LLM turns as local activities (CallLLM in
	// agentrun.go): per turn one workflow task, one activity task and
	// their matching hops fewer. Set on every run requested since; runs
	// requested before keep their LLM activities, so their histories
	// replay.
	LocalLLMTurns bool `json:"local_llm_turns,omitempty"`
	// Delegation is set when the agent has peers (docs/teams.md): its
	// ask_<peer> calls start peer runs as child workflows. Nil for runs of
	// agents without peers and runs requested before, so their histories
	// replay.
	Delegation *Delegation `json:"delegation,omitempty"`
}

func (in TaskRunInput) ref() RunRef {
	return RunRef{TaskID: in.TaskID, RunID: in.RunID, Attempt: in.Attempt, AgentID: in.AgentID,
		WorkflowID: TaskRunWorkflowID(in.TaskID), Trigger: in.Trigger, Subject: in.Subject, DataClassification: in.DataClassification,
		Snapshot: in.Snapshot}
}

// TaskRunResult is the outcome (and, through QueryTaskRunProgress, the
// progress) of a run.
type TaskRunResult struct {
	RunID      int64     `json:"run_id"`
	Status     string    `json:"status"`
	WaitingFor string    `json:"waiting_for,omitempty"`
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
	// ErrTypeProviderThrottled is a provider's 429 or Retry-After: retried
	// after the wait it asked for (capped at 30 s), without an attempt limit.
	ErrTypeProviderThrottled = "ProviderThrottled"
	// ErrTypeLLMRejected is a call that cannot succeed by repeating it
	// (4xx, admission rejected by cost governance, unknown provider).
	ErrTypeLLMRejected = "LLMCallRejected"
	// ErrTypeCostRejected is a cost-governance refusal that time alone does
	// not clear (a hard budget, a quota, a policy); the rejection's code is
	// the error's detail.
	ErrTypeCostRejected = "CostRejected"
	// ErrTypeCostThrottled is a cost-governance rejection that passes with
	// time (rate limit, token quota window, provider TPM, breaker): retried
	// after the Retry-After governance gave.
	ErrTypeCostThrottled = "CostThrottled"
	// ErrTypeRunGone is a run that no longer exists or already ended.
	ErrTypeRunGone = "RunGone"
	// ErrTypeArtifactOutsideArea is a tool that wrote outside the run's
	// artifact area.
	ErrTypeArtifactOutsideArea = "ArtifactOutsideArea"
	// ErrTypePayloadTooLarge fails a step whose result would exceed
	// MaxStepPayloadBytes.
	ErrTypePayloadTooLarge = "StepPayloadTooLarge"
	// ErrTypeRunLog is a run log that does not hold what a step needs.
	ErrTypeRunLog = "RunLogOutOfStep"
	// ErrTypeStorageFull is a step whose write the gateway's database
	// refused for lack of space: retried every StorageFullRetryDelay for as
	// long as the run may last, so the run resumes by itself once space
	// returns (the run record's stalled_reason says why meanwhile).
	ErrTypeStorageFull = "StorageFull"
)

// StorageFullRetryDelay is how long a step refused by a full database waits
// before its next attempt.
const StorageFullRetryDelay = 10 * time.Second

// ToolStepAttempts is how many attempts a tool step makes for failures
// other than a full database (which never burns attempts); the activity
// decides, since one retry policy cannot tell the two apart.
const ToolStepAttempts = 3

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
	// Snapshot is the content hash of the run's RunSnapshot (run log).
	Snapshot string `json:"snapshot,omitempty"`
	// ScheduleID names the schedule of a scheduled firing (empty for other
	// runs): its approvals are listed under it.
	ScheduleID string `json:"schedule_id,omitempty"`
	// SessionID is the chat session a channel message's run continues
	// (empty for other runs): its LLM calls are attributed to it.
	SessionID string `json:"session_id,omitempty"`
	// RootRunID is the ledger run id (models.TaskRunLedgerID, ...) of the
	// run tree's root when this run is a peer's child run started by
	// delegation; empty for a root run. Its LLM calls carry it
	// (llm.CallMeta.RootRunID), so cost rolls up and caps count the tree.
	RootRunID string `json:"root_run_id,omitempty"`
}

// Key names the run in the run log: one conversation per workflow and
// attempt.
func (r RunRef) Key() string { return fmt.Sprintf("%s-a%d", r.WorkflowID, r.Attempt) }

// RunSnapshot is what a durable run was started with, resolved once and
// stored by content hash (RunRef.Snapshot): a change of the agent's
// definition while the run is in flight never changes it.
type RunSnapshot struct {
	Agent agent.Input `json:"agent"`
	// Builtins are the tool grants: builtin names and mcp__<server>__*
	// patterns (Definition.ToolGrants).
	Builtins []string `json:"builtins"`
	// Memory is the memory scope of an agent with memory (its tools read
	// and write it); nil otherwise.
	Memory *agent.MemoryScope `json:"memory,omitempty"`
}

// LLMTurnInput is one LLM turn of a durable run. The conversation is not
// in it: the activity loads the first Messages stored messages of the run
// and stores the answer at position Messages.
type LLMTurnInput struct {
	Run  RunRef `json:"run"`
	Turn int    `json:"turn"`
	// Messages is how many stored messages the turn sends.
	Messages int `json:"messages"`
	// ToolChoice is the agent's tool_choice on the first turn, else empty.
	ToolChoice string `json:"tool_choice,omitempty"`
}

// ToolInput is one tool call of a durable run: the call is the Index-th of
// the assistant message at CallSeq; its result is stored at ResultSeq.
type ToolInput struct {
	Run       RunRef `json:"run"`
	Turn      int    `json:"turn"`
	CallSeq   int    `json:"call_seq"`
	Index     int    `json:"index"`
	ResultSeq int    `json:"result_seq"`
	// CallID and Name identify the call (checked against the stored one).
	CallID string `json:"call_id"`
	Name   string `json:"name"`
}

// Sizes of what a step hands back to the workflow (it lands in the run's
// history; the full texts are in the run log).
const (
	// MaxTurnTextBytes bounds an assistant text in a turn's result.
	MaxTurnTextBytes = 64 << 10
	// ToolSummaryBytes bounds a tool result's summary.
	ToolSummaryBytes = 256
	// MaxStepPayloadBytes is the largest step result a run accepts; a
	// larger one fails the step (ErrTypePayloadTooLarge) and so the run,
	// instead of straining Temporal's payload limit.
	MaxStepPayloadBytes = 256 << 10
)
