package replay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/workflows"
)

// TestRecordFiringApproval records a manual firing of a scheduled agent
// that parks for an approval of write_file, is approved through the API
// (the Update goes to the firing's workflow id), writes the file and
// hands its reply to Delivery. It runs only with -update:
//
//	go test ./workflows/replay -run TestRecordFiringApproval -update
func TestRecordFiringApproval(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer rcv.Close()
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"guarded.yaml": `
id: guarded
trigger: cron
llm: {provider: ollama, model: llama3.2}
builtins: [write_file]
max_turns: 4
approvals: {tools: [write_file], timeout: 1h}
schedule:
  cron: "0 0 1 1 *"
  prompt: guarded report please
  output: {channel: webhook}
`},
		Config: fmt.Sprintf(`
runtime:
  ssrf: {enabled: true, allow_loopback: true}
  delivery: {initial_interval: 100ms, max_interval: 400ms, retry_for: 1m, attempt_timeout: 5s}
channels:
  webhook: {enabled: true, url: %q, secret: replay-secret}
`, rcv.URL+"/hook"),
	})
	g.Fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "Written after approval."},
		fakellm.Rule{Contains: "guarded report please", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "approved.md", "content": "# ok\n"})}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := g.Do("POST", "/api/v1/schedules/guarded/trigger", nil)
	if r.Status != 202 {
		t.Fatalf("trigger: %d %s", r.Status, r.Raw)
	}
	wid := r.JSON["workflow_id"].(string)
	var id int64
	for deadline := time.Now().Add(time.Minute); id == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no pending approval")
		}
		if aps, _ := g.Do("GET", "/api/v1/approvals?status=pending&schedule=guarded", nil).JSON["approvals"].([]any); len(aps) == 1 {
			id = int64(aps[0].(map[string]any)["id"].(float64))
		}
	}
	if r = g.Do("POST", fmt.Sprintf("/api/v1/approvals/%d", id), map[string]any{"decision": "approve", "comment": "fine"}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	var firing workflows.ScheduledAgentResult
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, &firing); err != nil || firing.Status != "succeeded" || firing.DeliveryID == "" {
		t.Fatalf("firing: %+v %v", firing, err)
	}
	record(ctx, t, g.Temporal, wid, "ScheduledAgent-firing-approval.json")
}
