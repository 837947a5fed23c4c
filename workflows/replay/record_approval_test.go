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

// TestRecordApproval records a task run that parks for an approval of
// write_file, is approved through the API (a Temporal Update) and
// finishes. It runs only with -update:
//
//	go test ./workflows/replay -run TestRecordApproval -update
func TestRecordApproval(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"guarded.yaml": "id: guarded\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 4\n" +
			"approvals: {tools: [write_file], timeout: 1h}\n",
	}})
	g.Fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "Written after approval."},
		fakellm.Rule{Contains: "Approved report", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "out/approved.md", "content": "# ok\n"})}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "Approved report", "agent_id": "guarded"})
	taskID := int64(r.JSON["id"].(float64))
	if r = g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", taskID), nil); r.Status != 202 {
		t.Fatalf("run task: %d %s", r.Status, r.Raw)
	}
	var id int64
	for deadline := time.Now().Add(time.Minute); id == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no pending approval")
		}
		if aps, _ := g.Do("GET", "/api/v1/approvals?status=pending", nil).JSON["approvals"].([]any); len(aps) == 1 {
			id = int64(aps[0].(map[string]any)["id"].(float64))
		}
	}
	if r = g.Do("POST", fmt.Sprintf("/api/v1/approvals/%d", id), map[string]any{"decision": "approve", "comment": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	wid := workflows.TaskRunWorkflowID(taskID)
	var run workflows.TaskRunResult
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, &run); err != nil || run.Status != "finished" {
		t.Fatalf("task run: %+v %v", run, err)
	}
	record(ctx, t, g.Temporal, wid, "TaskRun-approval.json")
}
