package replay_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentryhq/agentry/dev/fakeexport"
	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/workflows"
	"github.com/agentryhq/agentry/workflows/replay"
)

var update = flag.Bool("update", false, "record the histories in testdata from real runs (embedded Temporal, fake LLM)")

const recordAgents = `
id: reporter
trigger: cron
llm: {provider: ollama, model: llama3.2}
schedule:
  cron: "0 0 1 1 *"
  prompt: status report please
  output: {channel: webhook}
`

// TestRecord runs every workflow for real - a whole gateway on the
// embedded Temporal server with the fake LLM provider - and writes their
// histories to testdata. It runs only with -update.
func TestRecord(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer rcv.Close()
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{
			"writer.yaml":   "id: writer\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 4\nsystem_prompt: You write files.\n",
			"reporter.yaml": recordAgents,
			"hook.yaml":     "id: hook\ntrigger: webhook\nbuiltins: [write_file]\nmax_turns: 4\n",
		},
		Config: fmt.Sprintf(`
runtime:
  ssrf: {enabled: true, allow_loopback: true}
  delivery: {initial_interval: 100ms, max_interval: 400ms, retry_for: 1m, attempt_timeout: 5s}
channels:
  webhook: {enabled: true, url: %q, secret: replay-secret}
`, rcv.URL+"/hook"),
	})
	g.Fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "The report is written."},
		fakellm.Rule{Contains: "Quarterly report", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "out/report.md", "content": "# Q3\n"})}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := g.Temporal

	// TaskRun: an LLM turn asking for a tool, the tool call, a final turn.
	r := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "Quarterly report", "agent_id": "writer"})
	if r.Status != 201 {
		t.Fatalf("create task: %d %s", r.Status, r.Raw)
	}
	taskID := int64(r.JSON["id"].(float64))
	if r = g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", taskID), nil); r.Status != 202 {
		t.Fatalf("run task: %d %s", r.Status, r.Raw)
	}
	var run workflows.TaskRunResult
	taskWID := workflows.TaskRunWorkflowID(taskID)
	if err := c.GetWorkflow(ctx, taskWID, "").Get(ctx, &run); err != nil || run.Status != "finished" || run.Turns != 2 {
		t.Fatalf("task run: %+v %v", run, err)
	}
	record(ctx, t, c, taskWID, "TaskRun-tool-call.json")

	// ScheduledAgent (a manual firing) and the Delivery of its reply.
	r = g.Do("POST", "/api/v1/schedules/reporter/trigger", nil)
	if r.Status != 202 {
		t.Fatalf("trigger: %d %s", r.Status, r.Raw)
	}
	firingWID := r.JSON["workflow_id"].(string)
	var firing workflows.ScheduledAgentResult
	if err := c.GetWorkflow(ctx, firingWID, "").Get(ctx, &firing); err != nil || firing.DeliveryID == "" {
		t.Fatalf("firing: %+v %v", firing, err)
	}
	record(ctx, t, c, firingWID, "ScheduledAgent-manual-firing.json")
	deliveryWID := workflows.DeliveryWorkflowID(firing.DeliveryID)
	var delivered workflows.DeliveryResult
	if err := c.GetWorkflow(ctx, deliveryWID, "").Get(ctx, &delivered); err != nil || delivered.Status != "delivered" {
		t.Fatalf("delivery: %+v %v", delivered, err)
	}
	record(ctx, t, c, deliveryWID, "Delivery-scheduled-output.json")

	// WebhookRun: an asynchronous webhook call with a tool call.
	r = g.Do("POST", "/api/v1/webhooks/hook?async=true", map[string]any{"text": "Quarterly report"})
	if r.Status != 202 {
		t.Fatalf("async webhook: %d %s", r.Status, r.Raw)
	}
	hookWID := workflows.WebhookRunWorkflowID(r.JSON["run_id"].(string))
	var hook workflows.WebhookRunResult
	if err := c.GetWorkflow(ctx, hookWID, "").Get(ctx, &hook); err != nil || hook.Status != "succeeded" {
		t.Fatalf("webhook run: %+v %v", hook, err)
	}
	record(ctx, t, c, hookWID, "WebhookRun-async-tool-call.json")

	recordReconcile(ctx, t)
	recordVersionDemo(ctx, t, c)
}

// recordReconcile records an on-demand Reconcile run of one day against the
// fake usage/cost export APIs, on a gateway of its own (reconciliation is
// configured at start).
func recordReconcile(ctx context.Context, t *testing.T) {
	t.Helper()
	const day = "2026-01-15"
	exp := fakeexport.New("sk-admin-replay-record")
	if err := exp.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	exp.AddCost(day, fakeexport.Line{Provider: "openai", Model: "gpt-4o-mini", LineItem: "completions", USD: 1.25})
	t.Setenv("AGENTRY_TEST_RECORD_OPENAI_ADMIN", "sk-admin-replay-record")
	g := gatewaytest.Start(t, gatewaytest.Options{Config: fmt.Sprintf(`
costs:
  reconciliation:
    enabled: true
    interval: 1h
    providers:
      openai: {type: openai, base_url: %q, api_key_env: AGENTRY_TEST_RECORD_OPENAI_ADMIN, organization: org-record}
`, exp.URL()+"/v1")})
	r := g.Do("POST", "/api/v1/costs/reconciliation/run", map[string]string{"day": day})
	if r.Status != 202 {
		t.Fatalf("reconcile: %d %s", r.Status, r.Raw)
	}
	wid := r.JSON["workflow_id"].(string)
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, nil); err != nil {
		t.Fatalf("reconcile run: %v", err)
	}
	record(ctx, t, g.Temporal, wid, "Reconcile-on-demand.json")
}

func record(ctx context.Context, t *testing.T, c client.Client, wid, name string) {
	t.Helper()
	if err := replay.HistoryFile(ctx, c, wid, "", filepath.Join("testdata", name)); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s (%s)", name, wid)
}

// recordVersionDemo records a run of the versioning example's first
// version (versioning_test.go) on its own task queue.
func recordVersionDemo(ctx context.Context, t *testing.T, c client.Client) {
	const queue = "replay-version-demo"
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(versionDemoV1, workflow.RegisterOptions{Name: versionDemoName})
	registerDemoActivities(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wid := fmt.Sprintf("version-demo-%d", time.Now().UnixNano())
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: queue}, versionDemoName, "Ada")
	if err != nil {
		t.Fatal(err)
	}
	if err := we.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := replay.HistoryFile(ctx, c, wid, "", filepath.Join("testdata", "versioning", "VersionDemo-v1.json")); err != nil {
		t.Fatal(err)
	}
}
