package workflows

import (
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
)

// The WebhookRun workflow's contract: the asynchronous mode of inbound
// webhooks (POST /webhooks/{agent_id}?async=true). The workflow is in
// webhookrun.go, its activities in activities/webhookrun.go, the start in
// internal/webhook.
const (
	// WebhookRunWorkflowName is the registered workflow type.
	WebhookRunWorkflowName = "WebhookRun"
	// WebhookRunTimeout bounds the agent run (the spec's 15 minutes).
	WebhookRunTimeout = 15 * time.Minute
	// WebhookRunExecutionTimeout bounds the whole workflow: the run plus
	// storing and handing over the reply.
	WebhookRunExecutionTimeout = WebhookRunTimeout + 10*time.Minute
	// ErrTypeWebhookRunFailed is the failure type of a failed run.
	ErrTypeWebhookRunFailed = "WebhookRunFailed"
)

// WebhookRunWorkflowID is the workflow id of an asynchronous webhook run.
func WebhookRunWorkflowID(runID string) string { return "webhook-" + runID }

// Activities of WebhookRun: method names of activities.WebhookRunActivities.
const (
	ActivityWebhookRunPrepare = "WebhookRunPrepare"
	ActivityWebhookLLMTurn    = "WebhookLLMTurn"
	ActivityWebhookTool       = "WebhookTool"
	ActivityWebhookRunFinish  = "WebhookRunFinish"
)

// WebhookRunInput is a mapped webhook payload to run asynchronously.
type WebhookRunInput struct {
	// Version is WebhookRunInputVersion when the run was requested.
	Version   int    `json:"version,omitempty"`
	RunID     string `json:"run_id"`
	AgentID   string `json:"agent_id"`
	Subject   string `json:"subject"`
	UserID    string `json:"user_id"`
	Username  string `json:"username,omitempty"`
	SessionID string `json:"session_id"`
	ThreadID  string `json:"thread_id,omitempty"`
	// Text is the mapped user text (bounded by the webhook body limit).
	Text string `json:"text"`
	// Metadata is the action-log metadata (JSON).
	Metadata string `json:"metadata,omitempty"`
	// Timeout overrides WebhookRunTimeout (tests).
	Timeout time.Duration `json:"timeout,omitempty"`

	// Carried across continue-as-new.
	Prepared     *WebhookPrepared  `json:"prepared,omitempty"`
	Deadline     time.Time         `json:"deadline,omitempty"`
	Continuation *agent.Checkpoint `json:"continuation,omitempty"`
}

// WebhookPrepared is the resolved run: its reference (with the snapshot)
// and the outline of the agent input.
type WebhookPrepared struct {
	Run   RunRef      `json:"run"`
	Agent agent.Input `json:"agent"`
	// ToolTimeout is runtime.tool_timeout when the run was prepared (0 in
	// histories from before: the fixed 5 minutes); see toolOptions.
	ToolTimeout time.Duration `json:"tool_timeout,omitempty"`
	// LocalLLMTurns runs the run's LLM turns as local activities (see
	// TaskRunInput.LocalLLMTurns); false in histories from before, which
	// keep their LLM activities.
	LocalLLMTurns bool `json:"local_llm_turns,omitempty"`
}

// WebhookFinishInput is how the run ended.
type WebhookFinishInput struct {
	In     WebhookRunInput `json:"in"`
	Run    RunRef          `json:"run"`
	Status string          `json:"status"`
	Error  string          `json:"error,omitempty"`
	Turns  int             `json:"turns"`
	Usage  llm.Usage       `json:"usage"`
}

// WebhookRunResult is the outcome; Delivery is the reply's message for
// the Delivery workflow when the agent names a reply channel.
type WebhookRunResult struct {
	Status   string         `json:"status"`
	Error    string         `json:"error,omitempty"`
	Delivery *DeliveryInput `json:"delivery,omitempty"`
}
