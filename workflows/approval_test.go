package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// approvalSteps mocks the approval steps of the agent-run core in a test
// environment and sends decisions; the harnesses of each run kind embed it.
type approvalSteps struct {
	testEnv   *testsuite.TestWorkflowEnvironment
	stepsMu   sync.Mutex
	requested []workflows.ApprovalRequestInput
	done      []workflows.ApprovalDoneInput
	doneAt    []time.Time
	answers   []string // how each update ended: "accepted:<status>" or "rejected:<err>"
	sent      int
}

func mockApprovalSteps(env *testsuite.TestWorkflowEnvironment) *approvalSteps {
	a := &approvalSteps{testEnv: env}
	acts := &activities.ApprovalActivities{}
	env.RegisterActivity(acts)
	env.OnActivity(acts.ApprovalRequest, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in workflows.ApprovalRequestInput) (workflows.ApprovalTicket, error) {
			a.stepsMu.Lock()
			defer a.stepsMu.Unlock()
			a.requested = append(a.requested, in)
			return workflows.ApprovalTicket{ID: int64(len(a.requested)), Status: models.ApprovalPending}, nil
		})
	env.OnActivity(acts.ApprovalDone, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in workflows.ApprovalDoneInput) (agent.ToolResult, error) {
			a.stepsMu.Lock()
			defer a.stepsMu.Unlock()
			a.done = append(a.done, in)
			a.doneAt = append(a.doneAt, env.Now())
			if in.Status == models.ApprovalApproved {
				return agent.ToolResult{}, nil
			}
			return agent.ToolResult{Content: activities.RejectionText(&models.Approval{Status: in.Status, DecidedBy: in.Subject,
				Comment: in.Comment, Tool: in.Tool}, in.Wait)}, nil
		})
	return a
}

// decide sends a decision as the Update after the given workflow time.
func (a *approvalSteps) decide(after time.Duration, d workflows.ApprovalDecision) {
	a.sent++
	id := fmt.Sprintf("u-%d", a.sent) // distinct: an update id seen before gets that update's answer
	a.testEnv.RegisterDelayedCallback(func() {
		a.testEnv.UpdateWorkflow(workflows.UpdateApprovalDecision, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { a.answers = append(a.answers, "rejected:"+err.Error()) },
			OnComplete: func(v any, err error) {
				if err != nil {
					a.answers = append(a.answers, "failed:"+err.Error())
					return
				}
				a.answers = append(a.answers, "accepted:"+v.(workflows.ApprovalAnswer).Status)
			},
		}, d)
	}, after)
}

// approvalHarness is the TaskRun harness with the approval steps mocked.
type approvalHarness struct {
	*harness
	*approvalSteps
}

func newApprovalHarness(t *testing.T, turnTakes time.Duration) *approvalHarness {
	h := &approvalHarness{harness: newHarness(t)}
	h.approvalSteps = mockApprovalSteps(h.env)
	// Turn 1 asks for write_file, turn 2 answers.
	h.onLLM(turnTakes, func(n int, in workflows.LLMTurnInput) (*llm.Response, error) {
		if n == 1 {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"r.md","content":"x"}`)}}}, nil
		}
		return &llm.Response{Content: "Done."}, nil
	})
	return h
}

func approvalInput() workflows.TaskRunInput {
	in := input()
	in.Approvals = workflows.ApprovalPolicy{Tools: []string{"write_file"}, Timeout: 24 * time.Hour}
	return in
}

// An approved call runs once, after the decision; the run parked for two
// hours, far beyond its 15-minute bound, and still finished: parked time
// is not working time. A bad decision and a second decision are refused by
// the validator.
func TestApprovalApprovedRunsTheCallOnce(t *testing.T) {
	h := newApprovalHarness(t, 0)
	h.decide(time.Hour, workflows.ApprovalDecision{ApprovalID: 1, Decision: "maybe", Subject: "ops"})
	h.decide(time.Hour+time.Minute, workflows.ApprovalDecision{ApprovalID: 9, Decision: "approve", Subject: "ops"})
	h.decide(2*time.Hour, workflows.ApprovalDecision{ApprovalID: 1, Decision: "approve", Subject: "ops", Comment: "go"})
	start := h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, approvalInput())
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(t); o.Status != models.RunFinished || o.Reply != "Done." {
		t.Fatalf("outcome %+v", o)
	}
	if len(h.requested) != 1 || h.requested[0].Tool != "write_file" || h.requested[0].CallSeq != 1 ||
		h.requested[0].ExpiresAt.Sub(h.requested[0].RequestedAt) != 24*time.Hour {
		t.Fatalf("requested %+v", h.requested)
	}
	if len(h.tools) != 1 || len(h.done) != 1 || h.done[0].Status != models.ApprovalApproved || h.done[0].Subject != "ops" {
		t.Fatalf("tools %d, done %+v", len(h.tools), h.done)
	}
	if got := h.doneAt[0].Sub(start); got < 2*time.Hour {
		t.Fatalf("decision recorded after %s", got)
	}
	if len(h.answers) != 3 || !strings.HasPrefix(h.answers[0], `rejected:decision "maybe" is neither approve nor reject`) ||
		!strings.HasPrefix(h.answers[1], "rejected:the run is not waiting for approval 9") || h.answers[2] != "accepted:approved" {
		t.Fatalf("update answers %q", h.answers)
	}
}

// A rejected call is never executed: the model is told who rejected it and
// why, and the run goes on.
func TestApprovalRejectedCallIsNeverExecuted(t *testing.T) {
	h := newApprovalHarness(t, 0)
	h.decide(time.Minute, workflows.ApprovalDecision{ApprovalID: 1, Decision: "reject", Subject: "alice", Comment: "not this file"})
	h.decide(time.Minute, workflows.ApprovalDecision{ApprovalID: 1, Decision: "approve", Subject: "bob"})
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, approvalInput())
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(h.tools) != 0 {
		t.Fatalf("a rejected call was executed: %+v", h.tools)
	}
	if len(h.done) != 1 || h.done[0].Status != models.ApprovalRejected || h.done[0].ResultSeq != 2 {
		t.Fatalf("done %+v", h.done)
	}
	if got := activities.RejectionText(&models.Approval{Status: models.ApprovalRejected, DecidedBy: "alice", Comment: "not this file"}, 0); got != "rejected by alice: not this file" {
		t.Fatalf("rejection text %q", got)
	}
	if len(h.llmCalls) != 2 || h.llmCalls[1].Messages != 3 {
		t.Fatalf("llm turns %+v", h.llmCalls)
	}
	// The second decision arrives while the first is being recorded.
	if len(h.answers) != 2 || h.answers[1] != "accepted:rejected" || !strings.HasPrefix(h.answers[0], "rejected:approval 1 was already decided") {
		t.Fatalf("answers %q", h.answers)
	}
}

// Nobody decides: the approval expires after its timeout and counts as
// rejected; the run still finishes within its working time.
func TestApprovalExpiresAsRejection(t *testing.T) {
	h := newApprovalHarness(t, 0)
	in := approvalInput()
	in.Approvals.Timeout = 3 * time.Hour
	start := h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, in)
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(h.tools) != 0 || len(h.done) != 1 || h.done[0].Status != models.ApprovalExpired {
		t.Fatalf("tools %d, done %+v", len(h.tools), h.done)
	}
	if got := h.doneAt[0].Sub(start); got < 3*time.Hour || got > 3*time.Hour+time.Minute {
		t.Fatalf("expired after %s, want 3h", got)
	}
	if o := h.outcome(t); o.Status != models.RunFinished {
		t.Fatalf("outcome %+v", o)
	}
}

// Working time still bounds the run: 10 minutes before the park and 10
// after exceed the 15 minutes, however short the park.
func TestApprovalParkedTimeDoesNotCountButWorkingTimeDoes(t *testing.T) {
	h := newApprovalHarness(t, 10*time.Minute)
	h.decide(time.Hour, workflows.ApprovalDecision{ApprovalID: 1, Decision: "approve", Subject: "ops"})
	start := h.env.Now()
	h.env.ExecuteWorkflow(workflows.TaskRunWorkflowName, approvalInput())
	o := h.outcome(t)
	if o.Status != models.RunFailed || !o.TimedOut {
		t.Fatalf("outcome %+v", o)
	}
	// 10 min turn + 50 min park (decided at 1h) + 5 min of the second turn.
	if got := h.env.Now().Sub(start); got < time.Hour+5*time.Minute || got >= time.Hour+10*time.Minute {
		t.Fatalf("timed out after %s of workflow time, want 1h05m", got)
	}
}
