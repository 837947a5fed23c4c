package replay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/workflows"
)

// TestRecordTeams records a task run whose agent delegates to a peer (a
// PeerRun child workflow) and the child's own history. It runs only with
// -update:
//
//	go test ./workflows/replay -run TestRecordTeams -update
func TestRecordTeams(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"lead.yaml":     "id: lead\nllm: {provider: openai, model: exact}\npeers: [research]\nmax_turns: 4\n",
		"research.yaml": "id: research\ndescription: finds things out\nllm: {provider: openai, model: exact}\nmax_turns: 2\n",
	}})
	g.Fake.Script(
		fakellm.Rule{Contains: "Found R1.", Reply: "Lead done."},
		fakellm.Rule{Contains: "Research R1", Reply: "Found R1."},
		fakellm.Rule{Contains: "Team report", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("ask_research", map[string]string{"task": "Research R1"})}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "Team report", "agent_id": "lead"})
	taskID := int64(r.JSON["id"].(float64))
	if r = g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", taskID), nil); r.Status != 202 {
		t.Fatalf("run task: %d %s", r.Status, r.Raw)
	}
	attempt := int(r.JSON["attempt"].(float64))
	wid := workflows.TaskRunWorkflowID(taskID)
	var run workflows.TaskRunResult
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, &run); err != nil || run.Status != "finished" || run.Reply != "Lead done." {
		t.Fatalf("task run: %+v %v", run, err)
	}
	record(ctx, t, g.Temporal, wid, "TaskRun-delegation.json")
	child := workflows.PeerRunWorkflowID(workflows.RunRef{WorkflowID: wid, Attempt: attempt}, 1, 0)
	record(ctx, t, g.Temporal, child, "PeerRun-answer.json")
}
