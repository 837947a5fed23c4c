package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/workflows"
)

// TestRecordFiringDelegation records a manual firing of a scheduled agent
// that asks a peer (a PeerRun child workflow of the firing). It runs only
// with -update:
//
//	go test ./workflows/replay -run TestRecordFiringDelegation -update
func TestRecordFiringDelegation(t *testing.T) {
	if !*update {
		t.Skip("records only with -update")
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"fl.yaml": "id: fl\ntrigger: cron\nllm: {provider: ollama, model: llama3.2}\npeers: [fr]\nmax_turns: 4\n" +
			"schedule: {cron: \"0 0 1 1 *\", prompt: Firing report please}\n",
		"fr.yaml": "id: fr\ndescription: finds facts\nllm: {provider: ollama, model: llama3.2}\nmax_turns: 2\n",
	}})
	g.Fake.Script(
		fakellm.Rule{Contains: "Facts FR1.", Reply: "Firing report done."},
		fakellm.Rule{Contains: "Find facts FR1", Reply: "Facts FR1."},
		fakellm.Rule{Contains: "Firing report please", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("ask_fr", map[string]string{"task": "Find facts FR1"})}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := g.Do("POST", "/api/v1/schedules/fl/trigger", nil)
	if r.Status != 202 {
		t.Fatalf("trigger: %d %s", r.Status, r.Raw)
	}
	wid := r.JSON["workflow_id"].(string)
	var firing workflows.ScheduledAgentResult
	if err := g.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, &firing); err != nil || firing.Status != "succeeded" {
		t.Fatalf("firing: %+v %v", firing, err)
	}
	record(ctx, t, g.Temporal, wid, "ScheduledAgent-delegation.json")
}
