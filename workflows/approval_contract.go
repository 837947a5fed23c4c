package workflows

import (
	"strconv"
	"time"

	"github.com/agentryhq/agentry/internal/agentdef"
)

// The contract of tool approvals in the agent-run core (agentrun.go): a
// durable run parks before a tool call its agent lists under
// approvals.tools until a person decides through the Update
// UpdateApprovalDecision (internal/approvals sends it), or the approval's
// timeout passes (then it counts as rejected). docs/approvals.md.
const (
	// UpdateApprovalDecision is the Update a person's decision arrives as;
	// input ApprovalDecision, result ApprovalAnswer. Its validator refuses
	// an approval the run does not wait for, or one already decided.
	UpdateApprovalDecision = "approval_decision"
	// ActivityApprovalRequest (local) records a pending approval, parks the
	// run record and publishes run.approval_requested; input
	// ApprovalRequestInput, result ApprovalTicket.
	ActivityApprovalRequest = "ApprovalRequest"
	// ActivityApprovalDone (local) records the decision, resumes the run
	// record and, for a rejected or expired call, stores the tool result
	// the model sees; input ApprovalDoneInput, result agent.ToolResult.
	ActivityApprovalDone = "ApprovalDone"
	// ErrTypeApprovalNotPending is the validator's refusal of a decision
	// for an approval the run is not waiting for (or already decided).
	ErrTypeApprovalNotPending = "ApprovalNotPending"
	// ErrTypeApprovalBadDecision is the validator's refusal of a decision
	// that is neither approve nor reject.
	ErrTypeApprovalBadDecision = "ApprovalBadDecision"
)

// Decisions a person can send.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// ApprovalPolicy is the approvals block of the run's agent as resolved
// when the run was requested. Empty: no tool needs approval.
type ApprovalPolicy struct {
	// Tools are names or prefixes ending in * (agentdef.ApprovalNeeded).
	Tools []string `json:"tools,omitempty"`
	// Timeout is how long one approval waits; 0 means
	// agentdef.DefaultApprovalTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Needs reports whether calling tool needs a person's approval.
func (p ApprovalPolicy) Needs(tool string) bool { return agentdef.ApprovalNeeded(p.Tools, tool) }

func (p ApprovalPolicy) wait() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return agentdef.DefaultApprovalTimeout
}

// PolicyOf converts an agent's approvals block.
func PolicyOf(a *agentdef.Approvals) ApprovalPolicy {
	if a == nil || len(a.Tools) == 0 {
		return ApprovalPolicy{}
	}
	return ApprovalPolicy{Tools: append([]string(nil), a.Tools...), Timeout: a.Wait()}
}

// ApprovalRequestInput asks for a person's approval of the Index-th tool
// call of the assistant message at CallSeq.
type ApprovalRequestInput struct {
	Run     RunRef `json:"run"`
	Turn    int    `json:"turn"`
	CallSeq int    `json:"call_seq"`
	Index   int    `json:"index"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	// RequestedAt and ExpiresAt come from the workflow clock.
	RequestedAt time.Time `json:"requested_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// ApprovalKey names one call's approval (the row's unique key).
func (in ApprovalRequestInput) ApprovalKey() string {
	return in.Run.Key() + "-s" + strconv.Itoa(in.CallSeq) + "-" + strconv.Itoa(in.Index)
}

// ApprovalTicket is the recorded approval.
type ApprovalTicket struct {
	ID int64 `json:"id"`
	// Status is pending, or a decision recorded before (a repeated step).
	Status    string `json:"status"`
	DecidedBy string `json:"decided_by,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// ApprovalDecision is a person's decision, the Update's input.
type ApprovalDecision struct {
	ApprovalID int64  `json:"approval_id"`
	Decision   string `json:"decision"`
	Subject    string `json:"subject"`
	Comment    string `json:"comment,omitempty"`
}

// ApprovalAnswer is the Update's result: how the run recorded it.
type ApprovalAnswer struct {
	ApprovalID int64 `json:"approval_id"`
	// Status is approved or rejected.
	Status string `json:"status"`
}

// ApprovalDoneInput records how an approval ended and, unless approved,
// stores the tool result the model sees at ResultSeq.
type ApprovalDoneInput struct {
	Run        RunRef `json:"run"`
	ApprovalID int64  `json:"approval_id"`
	// Status is models.ApprovalApproved, ApprovalRejected or ApprovalExpired.
	Status    string        `json:"status"`
	Subject   string        `json:"subject,omitempty"`
	Comment   string        `json:"comment,omitempty"`
	DecidedAt time.Time     `json:"decided_at"`
	Wait      time.Duration `json:"wait,omitempty"`
	ResultSeq int           `json:"result_seq"`
	CallID    string        `json:"call_id"`
	Tool      string        `json:"tool"`
}
