package workflows_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// firingApprovals is a firing environment whose agent lists write_file
// under approvals.tools, with the approval steps mocked.
type firingApprovals struct {
	*firingEnv
	*approvalSteps
}

// guardedFiring is preparedRun with write_file needing approval.
func guardedFiring(timeout time.Duration) workflows.ScheduledPrepared {
	prep := preparedRun
	prep.Run.ScheduleID = "agentry:schedule:reporter"
	prep.Approvals = workflows.ApprovalPolicy{Tools: []string{"write_file"}, Timeout: timeout}
	return prep
}

// newFiringApprovals: turn 1 calls tool first (read_file needs no
// approval), the next turn write_file, the last one answers.
func newFiringApprovals(t *testing.T, prep workflows.ScheduledPrepared, toolTakes time.Duration, first string) *firingApprovals {
	f := &firingApprovals{}
	f.firingEnv = newFiringEnv(t, prep, func(in workflows.LLMTurnInput) (*llm.Response, error) {
		call := func(name string) (*llm.Response, error) {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("c%d", in.Turn), Name: name, Arguments: json.RawMessage(`{"path":"r.md"}`)}}}, nil
		}
		switch {
		case in.Turn == 1 && first != "":
			return call(first)
		case in.Turn == 1 || in.Turn == 2 && first != "":
			return call("write_file")
		}
		return &llm.Response{Content: "The report."}, nil
	}, toolTakes)
	f.approvalSteps = mockApprovalSteps(f.env)
	return f
}

// A firing whose agent needs approval of write_file parks like a task run:
// the approval names the firing's schedule and workflow id, nothing runs
// until the decision (an hour later, far beyond the firing's 10 minutes
// of working time and the 30-minute firing bound), then the call runs
// once, the firing succeeds and its reply is delivered once.
func TestFiringParksForApprovalAndDeliversOnce(t *testing.T) {
	f := newFiringApprovals(t, guardedFiring(24*time.Hour), 0, "")
	f.decide(time.Hour, workflows.ApprovalDecision{ApprovalID: 1, Decision: "approve", Subject: "olga"})
	f.decide(time.Hour, workflows.ApprovalDecision{ApprovalID: 1, Decision: "reject", Subject: "bob"})
	res := f.run(t)
	if err := f.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.requested) != 1 || f.requested[0].Run.ScheduleID != "agentry:schedule:reporter" ||
		f.requested[0].Run.WorkflowID != preparedRun.Run.WorkflowID || f.requested[0].Tool != "write_file" {
		t.Fatalf("requested %+v", f.requested)
	}
	if len(f.done) != 1 || f.done[0].Status != models.ApprovalApproved || f.done[0].Subject != "olga" {
		t.Fatalf("done %+v", f.done)
	}
	if len(f.tools) != 1 || f.tools[0].Name != "write_file" {
		t.Fatalf("tools %+v", f.tools)
	}
	// The second decision arrives while the first is being recorded.
	if len(f.answers) != 2 || f.answers[1] != "accepted:approved" || !strings.HasPrefix(f.answers[0], "rejected:approval 1 was already decided") {
		t.Fatalf("answers %q", f.answers)
	}
	want := activities.FiringDeliveryID(preparedRun.Run.WorkflowID)
	if res.Status != models.ScheduleRunSucceeded || len(f.finished) != 1 || len(f.delivered) != 1 || f.delivered[0].DeliveryID != want {
		t.Fatalf("result %+v finished %+v delivered %+v", res, f.finished, f.delivered)
	}
}

// Nobody decides: the approval expires and counts as rejected; the call is
// never executed, the model is told, and the firing still succeeds and
// delivers its reply once.
func TestFiringApprovalExpiresAsRejection(t *testing.T) {
	f := newFiringApprovals(t, guardedFiring(3*time.Hour), 0, "")
	start := f.env.Now()
	res := f.run(t)
	if err := f.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.tools) != 0 || len(f.done) != 1 || f.done[0].Status != models.ApprovalExpired {
		t.Fatalf("tools %+v done %+v", f.tools, f.done)
	}
	if got := f.env.Now().Sub(start); got < 3*time.Hour {
		t.Fatalf("the firing ended after %s, before the approval expired", got)
	}
	if len(f.turns) != 2 || f.turns[1].Messages != 4 {
		t.Fatalf("turns %+v", f.turns)
	}
	if res.Status != models.ScheduleRunSucceeded || len(f.delivered) != 1 {
		t.Fatalf("result %+v delivered %d", res, len(f.delivered))
	}
}

// Working time still bounds a firing: 6 minutes of tool work before the
// park and 6 after exceed its 10 minutes, however long the park; the
// firing fails at 10 minutes of working time and delivers nothing.
func TestFiringParkedTimeDoesNotCountButWorkingTimeDoes(t *testing.T) {
	f := newFiringApprovals(t, guardedFiring(24*time.Hour), 6*time.Minute, "read_file")
	f.decide(time.Hour, workflows.ApprovalDecision{ApprovalID: 1, Decision: "approve", Subject: "olga"})
	start := f.env.Now()
	f.run(t)
	if f.env.GetWorkflowError() == nil || len(f.delivered) != 0 || len(f.finished) != 1 || f.finished[0].Status != models.ScheduleRunFailed {
		t.Fatalf("err %v finished %+v delivered %d", f.env.GetWorkflowError(), f.finished, len(f.delivered))
	}
	// 6 min read_file + 54 min parked (decided at 1h) + 4 min of write_file.
	if got := f.env.Now().Sub(start); got < time.Hour+4*time.Minute || got >= time.Hour+6*time.Minute {
		t.Fatalf("timed out after %s of workflow time, want 1h04m", got)
	}
}
