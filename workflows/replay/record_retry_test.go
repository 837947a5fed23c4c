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

// TestRecordRetry records a retried task run: the first attempt writes a
// file in turn 1 and fails at turn 2 (the provider refuses it), the retry
// takes over turn 1 and its tool call from the input and runs turn 2. It
// runs only with -update:
//
//	go test ./workflows/replay -run TestRecordRetry -update
func TestRecordRetry(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"stepper.yaml": "id: stepper\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 3\n",
	}})
	script := func(turn2 fakellm.Rule) {
		g.Fake.Script(
			fakellm.Rule{Contains: "Retried report", ToolCalls: []fakellm.ToolCall{
				fakellm.NewToolCall("write_file", map[string]string{"path": "step1.md", "content": "one\n"})}},
			turn2)
	}
	script(fakellm.Rule{Contains: "step1.md", Status: 400, Message: "not now"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "Retried report", "agent_id": "stepper"})
	taskID := int64(r.JSON["id"].(float64))
	if r = g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", taskID), nil); r.Status != 202 {
		t.Fatalf("run task: %d %s", r.Status, r.Raw)
	}
	wid := workflows.TaskRunWorkflowID(taskID)
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, nil); err == nil {
		t.Fatal("the first attempt did not fail")
	}
	script(fakellm.Rule{Contains: "step1.md", Reply: "Written."})
	retry := fmt.Sprintf("/api/v1/workboard/tasks/%d/runs/%d/retry", taskID, int64(r.JSON["id"].(float64)))
	// The failed workflow records its outcome just before it closes.
	for r = g.Do("POST", retry, nil); r.Status == 409 && ctx.Err() == nil; r = g.Do("POST", retry, nil) {
		time.Sleep(50 * time.Millisecond)
	}
	if r.Status != 202 {
		t.Fatalf("retry: %d %s", r.Status, r.Raw)
	}
	var run workflows.TaskRunResult
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, &run); err != nil || run.Status != "finished" || run.Turns != 2 {
		t.Fatalf("retried run: %+v %v", run, err)
	}
	record(ctx, t, g.Temporal, wid, "TaskRun-retry.json")
}
