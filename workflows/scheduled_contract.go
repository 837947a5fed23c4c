package workflows

import (
	"fmt"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
)

// The ScheduledAgent workflow's contract (the workflow is in
// scheduled.go, its activities in activities/scheduled.go, the Temporal
// Schedules that start it and the manual trigger in internal/schedules).
const (
	// ScheduledAgentWorkflowName is the registered workflow type.
	ScheduledAgentWorkflowName = "ScheduledAgent"
	// TriggerCron marks firings of the schedule, TriggerManual those of
	// POST /schedules/{agent_id}/trigger.
	TriggerCron   = "cron"
	TriggerManual = "manual"
	// FiringTimeout bounds one firing's workflow (agent run + handing the
	// reply to Delivery). Firings of agents with approvals have none (see
	// FiringExecutionTimeout).
	FiringTimeout = 30 * time.Minute
	// ScheduledRunTimeout bounds the working time of one firing's agent run
	// (time parked for a person does not count).
	ScheduledRunTimeout = 10 * time.Minute
	// ErrTypeScheduledRunFailed is the failure type of a firing whose agent
	// run failed.
	ErrTypeScheduledRunFailed = "ScheduledRunFailed"
)

// ScheduleID is the Temporal Schedule id of a scheduled agent:
// "<task_queue>:schedule:<agent_id>" (agentry:schedule:daily-report), so
// several installations can share a namespace. The firings it starts get
// the workflow id "<schedule id>-<fire time>" (Temporal appends the time).
func ScheduleID(taskQueue, agentID string) string { return ScheduleIDPrefix(taskQueue) + agentID }

// ScheduleIDPrefix starts the schedule ids of one installation.
func ScheduleIDPrefix(taskQueue string) string { return taskQueue + ":schedule:" }

// FiringExecutionTimeout is the Temporal execution timeout of the firings
// of an agent: FiringTimeout, or none when the agent has tools that need a
// person's approval (each park is bounded by the approval timeout and
// parked time does not count, so no backstop could know the total; the
// workflow bounds every wait itself), as for task runs.
func FiringExecutionTimeout(a *agentdef.Approvals) time.Duration {
	if len(PolicyOf(a).Tools) > 0 {
		return 0
	}
	return FiringTimeout
}

// ManualFiringWorkflowID is the workflow id of a firing started by hand.
func ManualFiringWorkflowID(scheduleID string, at time.Time) string {
	return fmt.Sprintf("%s-manual-%d", scheduleID, at.UnixMilli())
}

// ScheduledAgentInput is the input of one firing.
type ScheduledAgentInput struct {
	// Version is ScheduledAgentInputVersion when the firing was started.
	Version    int    `json:"version,omitempty"`
	AgentID    string `json:"agent_id"`
	ScheduleID string `json:"schedule_id"`
	Trigger    string `json:"trigger"`
	// Prepared is the firing's resolved run (since version 2), carried
	// across continue-as-new with the deadline and the checkpoint.
	Prepared     *ScheduledPrepared `json:"prepared,omitempty"`
	Deadline     time.Time          `json:"deadline,omitempty"`
	Continuation *agent.Checkpoint  `json:"continuation,omitempty"`
}

// ScheduledPrepared is what ActivityScheduledAgentPrepare hands the
// workflow: either a skip (Status skipped, with the reason) or the run to
// drive on the agent-run core.
type ScheduledPrepared struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Run names the firing's run: workflow id, attempt 1, the snapshot.
	Run RunRef `json:"run"`
	// Agent is the outline of the resolved agent (agent.Input.Outline).
	Agent     agent.Input `json:"agent"`
	SessionID string      `json:"session_id,omitempty"`
	// ToolTimeout is runtime.tool_timeout when the firing was prepared (0 in
	// histories from before: the fixed 5 minutes); see toolOptions.
	ToolTimeout time.Duration `json:"tool_timeout,omitempty"`
	// Approvals are the tools a person must approve before the firing
	// calls them (the agent's approvals block when the firing was
	// prepared; empty in histories from before, so their commands do not
	// change).
	Approvals ApprovalPolicy `json:"approvals,omitempty"`
	// LocalLLMTurns runs the firing's LLM turns as local activities (see
	// TaskRunInput.LocalLLMTurns); false in histories from before, which
	// keep their LLM activities.
	LocalLLMTurns bool `json:"local_llm_turns,omitempty"`
	// Delegation is set when the agent has peers (docs/teams.md): the
	// firing is the root of its tree and its ask_<peer> calls start peer
	// runs as child workflows, as a task run's do. Nil in histories from
	// before, which offer no ask_<peer> tools.
	Delegation *Delegation `json:"delegation,omitempty"`
}

// ScheduledFinishInput is how a firing's run ended.
type ScheduledFinishInput struct {
	Run       RunRef    `json:"run"`
	Trigger   string    `json:"trigger"`
	SessionID string    `json:"session_id"`
	Status    string    `json:"status"`
	Error     string    `json:"error,omitempty"`
	Code      string    `json:"code,omitempty"`
	Turns     int       `json:"turns"`
	Usage     llm.Usage `json:"usage"`
}

// ScheduledAgentResult is the outcome of one firing.
type ScheduledAgentResult struct {
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
}

// Activities of ScheduledAgent: the method names of
// activities.ScheduledActivities.
const (
	// ActivityScheduledAgentRun runs the agent once; input
	// ScheduledAgentInput, result ScheduledRunResult.
	ActivityScheduledAgentRun = "ScheduledAgentRun"
	// ActivityScheduledAgentPrepare records the firing, checks the agent and
	// its output channel and stores the run's snapshot; input
	// ScheduledAgentInput, result ScheduledPrepared. Since version 2 the
	// firing runs turn by turn on the agent-run core instead of
	// ActivityScheduledAgentRun.
	ActivityScheduledAgentPrepare = "ScheduledAgentPrepare"
	// ActivityScheduledLLMTurn and ActivityScheduledTool are the steps of a
	// firing's run (LLMTurnInput / ToolInput, like a task run's).
	ActivityScheduledLLMTurn = "ScheduledLLMTurn"
	ActivityScheduledTool    = "ScheduledTool"
	// ActivityScheduledAgentFinish stores the firing's outcome and its
	// session, and creates the delivery of the reply (its id derived from
	// the workflow id, so the same across retries); input
	// ScheduledFinishInput, result ScheduledRunResult.
	ActivityScheduledAgentFinish = "ScheduledAgentFinish"
	// ActivityScheduledAgentRecord changes a firing's record; input
	// ScheduledRecordInput.
	ActivityScheduledAgentRecord = "ScheduledAgentRecord"
)

// ScheduledRunResult is the outcome of a firing's agent run; Delivery is
// the message to hand to the Delivery workflow (nil: nothing to deliver).
type ScheduledRunResult struct {
	Status      string         `json:"status"`
	Error       string         `json:"error,omitempty"`
	Code        string         `json:"code,omitempty"`
	SessionID   string         `json:"session_id,omitempty"`
	RunID       string         `json:"run_id,omitempty"`
	Delivery    *DeliveryInput `json:"delivery,omitempty"`
	Destination string         `json:"destination,omitempty"`
}

// ScheduledRecordInput changes a firing's record after the run.
type ScheduledRecordInput struct {
	WorkflowID string `json:"workflow_id"`
	AgentID    string `json:"agent_id"`
	Trigger    string `json:"trigger"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
}
