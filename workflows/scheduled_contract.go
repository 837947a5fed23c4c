package workflows

import (
	"fmt"
	"time"
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
	// reply to Delivery).
	FiringTimeout = 30 * time.Minute
	// ScheduledRunTimeout bounds the agent run of one firing.
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
