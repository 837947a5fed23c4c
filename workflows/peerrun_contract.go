package workflows

import (
	"fmt"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
)

// The PeerRun workflow's contract (docs/teams.md). A durable run whose
// agent has peers holds a Delegation; its model's ask_<peer> {task} call
// does not go to the toolbox: the agent-run core (delegate.go) prepares the
// peer's run (PeerPrepare: checks, snapshot, record), starts it as a child
// workflow, waits for its answer and stores that as the call's tool result
// (PeerDone). The child is the same agent-run core with its own run log
// key, approvals and budget waits (peerrun.go).
const (
	// PeerRunWorkflowName is the registered child workflow type.
	PeerRunWorkflowName = "PeerRun"
	// TriggerPeer is the trigger of a peer run's LLM calls.
	TriggerPeer = "peer"
	// DefaultPeerMaxDepth is how deep delegation may go: a root run is at
	// depth 0, the peers it asks at 1, ... A peer at this depth gets no
	// ask_ tool calls through (a tool error).
	DefaultPeerMaxDepth = 3
	// DefaultPeerMaxChildren is how many peer runs one run may start in all.
	DefaultPeerMaxChildren = 8
	// PeerRunExecutionTimeout is Temporal's backstop of a child (the root's
	// deadline, passed down, is the real bound).
	PeerRunExecutionTimeout = TaskRunExecutionTimeout
)

// Activities of delegation (in the parent) and of PeerRun (in the child):
// the method names of activities.PeerActivities.
const (
	// ActivityPeerPrepare (local) checks and prepares one ask_<peer> call;
	// input PeerPrepareInput, result PeerPrepared.
	ActivityPeerPrepare = "PeerPrepare"
	// ActivityPeerDone (local) stores the child's answer as the tool
	// result; input PeerDoneInput, result agent.ToolResult.
	ActivityPeerDone = "PeerDone"
	// ActivityPeerRunStart and ActivityPeerRunFinish (local) mark the
	// peer run running and record its outcome.
	ActivityPeerRunStart  = "PeerRunStart"
	ActivityPeerRunFinish = "PeerRunFinish"
	// ActivityPeerRunWait (local) records a park or resume (RunWaitInput).
	ActivityPeerRunWait = "PeerRunWait"
	// ActivityPeerLLMTurn and ActivityPeerTool are the child's steps.
	ActivityPeerLLMTurn = "PeerLLMTurn"
	ActivityPeerTool    = "PeerTool"
)

// Delegation is what a run may delegate: set on a run whose agent has
// peers (nil otherwise, which keeps older histories replaying unchanged).
type Delegation struct {
	// Peers are the agent's peers as resolved when the run was requested.
	Peers []string `json:"peers"`
	// Depth is this run's depth (0: a root run).
	Depth int `json:"depth"`
	// MaxDepth and MaxChildren are the limits (0: the defaults).
	MaxDepth    int `json:"max_depth,omitempty"`
	MaxChildren int `json:"max_children,omitempty"`
	// RunID is this run's ledger run id; RootRunID the tree root's (equal
	// for a root run).
	RunID     string `json:"run_id"`
	RootRunID string `json:"root_run_id"`
	// RootTaskID and RootTaskRunID name the root when it is a task run.
	RootTaskID    int64 `json:"root_task_id,omitempty"`
	RootTaskRunID int64 `json:"root_task_run_id,omitempty"`
	// Lineage are the agent ids from the root to this run (this run's
	// last): asking one of them again is a cycle.
	Lineage []string `json:"lineage"`
	// Started is how many peer runs this run started so far (carried
	// across continue-as-new).
	Started int `json:"started,omitempty"`
}

// Limits are the depth and fan-out limits in force.
func (d *Delegation) Limits() (maxDepth, maxChildren int) {
	maxDepth, maxChildren = d.MaxDepth, d.MaxChildren
	if maxDepth <= 0 {
		maxDepth = DefaultPeerMaxDepth
	}
	if maxChildren <= 0 {
		maxChildren = DefaultPeerMaxChildren
	}
	return maxDepth, maxChildren
}

// PeerRunWorkflowID is the id of the child started by the index-th tool
// call of a run's turn: readable and stable across replays and crashes.
func PeerRunWorkflowID(parent RunRef, turn, index int) string {
	return fmt.Sprintf("%s-peer-%d-%d", parent.Key(), turn, index)
}

// PeerPrepareInput is one ask_<peer> call to check and prepare.
type PeerPrepareInput struct {
	Parent     RunRef     `json:"parent"`
	Delegation Delegation `json:"delegation"`
	Turn       int        `json:"turn"`
	CallSeq    int        `json:"call_seq"`
	Index      int        `json:"index"`
	ResultSeq  int        `json:"result_seq"`
	CallID     string     `json:"call_id"`
	Name       string     `json:"name"`
	// ChildWorkflowID is PeerRunWorkflowID of the call.
	ChildWorkflowID string `json:"child_workflow_id"`
	// Deadline is the parent's deadline now: the child's working time ends
	// with it (the root's bound covers the tree).
	Deadline time.Time `json:"deadline"`
}

// PeerPrepared is a prepared delegation: Refused (the tool error the model
// sees, already stored as the call's result; nothing was started) or the
// child's input.
type PeerPrepared struct {
	Refused *agent.ToolResult `json:"refused,omitempty"`
	Child   *PeerRunInput     `json:"child,omitempty"`
}

// PeerRunInput starts (or continues) a peer run.
type PeerRunInput struct {
	PeerRunID int64 `json:"peer_run_id"`
	// Run is the child's RunRef (TaskID 0, RunID the peer run's id,
	// RootRunID the tree root's ledger id).
	Run              RunRef      `json:"run"`
	ParentWorkflowID string      `json:"parent_workflow_id"`
	Agent            agent.Input `json:"agent"`
	// Delegation is set when the peer has peers of its own.
	Delegation   *Delegation       `json:"delegation,omitempty"`
	Approvals    ApprovalPolicy    `json:"approvals,omitempty"`
	BudgetWait   time.Duration     `json:"budget_wait,omitempty"`
	BudgetWaited time.Duration     `json:"budget_waited,omitempty"`
	ToolTimeout  time.Duration     `json:"tool_timeout,omitempty"`
	Deadline     time.Time         `json:"deadline"`
	Continuation *agent.Checkpoint `json:"continuation,omitempty"`
	// ContinueAfterEvents overrides DefaultContinueAsNewEvents (tests).
	ContinueAfterEvents int `json:"continue_after_events,omitempty"`
}

// PeerRunResult is how a peer run ended. Deadline is its deadline at the
// end (moved by its parked time): the parent goes on with it.
type PeerRunResult struct {
	PeerRunID  int64     `json:"peer_run_id"`
	Status     string    `json:"status"`
	Reply      string    `json:"reply,omitempty"`
	Error      string    `json:"error,omitempty"`
	TimedOut   bool      `json:"timed_out,omitempty"`
	Turns      int       `json:"turns"`
	Usage      llm.Usage `json:"usage"`
	StopReason string    `json:"stop_reason,omitempty"`
	Deadline   time.Time `json:"deadline"`
}

// PeerRunOutcome is what PeerRunFinish records.
type PeerRunOutcome struct {
	Run    RunRef        `json:"run"`
	Result PeerRunResult `json:"result"`
}

// PeerDoneInput stores a child's answer (or failure) as the result of the
// parent's ask_<peer> call.
type PeerDoneInput struct {
	Parent          RunRef        `json:"parent"`
	Delegation      Delegation    `json:"delegation"`
	Turn            int           `json:"turn"`
	ResultSeq       int           `json:"result_seq"`
	CallID          string        `json:"call_id"`
	Name            string        `json:"name"`
	ChildWorkflowID string        `json:"child_workflow_id"`
	Result          PeerRunResult `json:"result"`
}
