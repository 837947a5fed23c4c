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

// TestRecordCostCapWait records a task run whose third turn its task's
// cost cap ($0.02, two $0.01 turns) refuses: the run parks waiting for
// cost_cap, a PATCH raises the task's max_cost_usd (which signals the run)
// and it finishes. It runs only with -update:
//
//	go test ./workflows/replay -run TestRecordCostCapWait -update
func TestRecordCostCapWait(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"capped.yaml": "id: capped\nllm: {provider: openai, model: exact, max_tokens: 100}\nbuiltins: [write_file]\nmax_turns: 6\n",
	}, Config: `
costs:
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`})
	usage := &fakellm.Usage{InputTokens: 50, OutputTokens: 100}
	g.Fake.Script(
		fakellm.Rule{Contains: "step2.md", Reply: "Both steps are written.", Usage: usage},
		fakellm.Rule{Contains: "step1.md", Usage: usage, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "step2.md", "content": "two\n"})}},
		fakellm.Rule{Contains: "Capped report", Usage: usage, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "step1.md", "content": "one\n"})}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "Capped report", "agent_id": "capped", "max_cost_usd": 0.02})
	taskID := int64(r.JSON["id"].(float64))
	if r = g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", taskID), nil); r.Status != 202 {
		t.Fatalf("run task: %d %s", r.Status, r.Raw)
	}
	runPath := fmt.Sprintf("/api/v1/workboard/tasks/%d/runs/%d", taskID, int64(r.JSON["id"].(float64)))
	for deadline := time.Now().Add(time.Minute); g.Do("GET", runPath, nil).JSON["waiting_for"] != "cost_cap"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run did not park for its cost cap")
		}
	}
	if r = g.Do("PATCH", fmt.Sprintf("/api/v1/workboard/tasks/%d", taskID), map[string]any{"max_cost_usd": 1}); r.Status != 200 {
		t.Fatalf("raise the cap: %d %s", r.Status, r.Raw)
	}
	wid := workflows.TaskRunWorkflowID(taskID)
	var run workflows.TaskRunResult
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, &run); err != nil || run.Status != "finished" {
		t.Fatalf("task run: %+v %v", run, err)
	}
	record(ctx, t, g.Temporal, wid, "TaskRun-cost-cap-wait.json")
}
