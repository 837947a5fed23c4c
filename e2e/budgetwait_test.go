package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// budgetAgent's turns each cost exactly $0.01 (100 output tokens at $100 per
// million, free input; the fake reports exactly 100 output tokens), so a
// $0.02 daily budget pays two turns and refuses the third.
const budgetAgent = "id: budgeted\nllm: {provider: openai, model: exact, max_tokens: 100}\nbuiltins: [write_file]\nmax_turns: 6\n"

// TestBudgetWaitParksAndResumes: a hard budget exhausted mid-run parks the
// task run (waiting for budget, run.waiting, counted by /costs/status)
// instead of failing it; raising the budget with PATCH /config applies it
// at once and signals the run, which goes on from the refused turn: the
// provider saw each finished turn once and the ledger has one row per
// turn.
func TestBudgetWaitParksAndResumes(t *testing.T) {
	fake := startFake(t)
	usage := &fakellm.Usage{InputTokens: 50, OutputTokens: 100}
	fake.Script(
		fakellm.Rule{Contains: "step2.md", Reply: "Both steps are written.", Usage: usage},
		fakellm.Rule{Contains: "step1.md", Usage: usage, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "step2.md", "content": "two\n"})}},
		fakellm.Rule{Contains: "Budgeted report", Usage: usage, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "step1.md", "content": "one\n"})}},
	)
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: map[string]string{"budgeted.yaml": budgetAgent}, Config: `
costs:
  enforcement_mode: hard
  daily_budget_usd: 0.02
  run_budget_wait: 1h
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`})
	events := wbSubscribe(t, g, "type=run.waiting,run.resumed,run.finished", "")
	task := g.Do("POST", wb+"/tasks", map[string]any{"title": "Budgeted report", "agent_id": "budgeted"})
	wbWantStatus(t, task, 201, "create task")
	taskID := int64(task.JSON["id"].(float64))
	run := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	wbWantStatus(t, run, 202, "start run")
	runID := int64(run.JSON["id"].(float64))

	parked := wbWaitRun(t, g, taskID, runID, 60*time.Second, "waiting", "failed", "finished")
	if parked["status"] != "waiting" || parked["waiting_for"] != "budget" {
		t.Fatalf("run after the budget ran out: %v", parked)
	}
	if n := fake.CallCount(); n != 2 {
		t.Fatalf("provider calls before the park: %d, want 2", n)
	}
	if r := g.Do("GET", "/api/v1/costs/status", nil); r.JSON["runs_waiting_for_budget"] != float64(1) {
		t.Fatalf("costs status while parked: %s", r.Raw)
	}
	wait := wbCollect(t, events, "run.waiting", 30*time.Second)
	if ev := wait[len(wait)-1].Event; ev.RunID != runID || !strings.Contains(ev.Payload, `"code":"budget_exceeded"`) ||
		!strings.Contains(ev.Payload, `"waiting_for":"budget"`) || !strings.Contains(ev.Payload, `"turn":3`) {
		t.Fatalf("run.waiting event %+v", ev)
	}

	p := g.Do("PATCH", "/api/v1/config", map[string]any{"set": map[string]any{"costs.daily_budget_usd": 1}})
	if p.Status != 200 || p.JSON["restart_required"] != false || fmt.Sprint(p.JSON["applied"]) != "[costs.daily_budget_usd]" {
		t.Fatalf("raise the budget: %d %s", p.Status, p.Raw)
	}
	// The signal resumes the run at once (its timer would take 30 s).
	done := wbWaitRun(t, g, taskID, runID, 20*time.Second, "finished", "failed")
	if done["status"] != "finished" || done["reply"] != "Both steps are written." || done["turns"] != float64(3) || done["waiting_for"] != nil {
		t.Fatalf("run after the raise: %v", done)
	}
	if got := wbCollect(t, events, "run.finished", 30*time.Second); len(got) < 2 || got[0].Type != "run.resumed" {
		t.Fatalf("events after the raise: %+v", got)
	}

	calls := fake.Calls()
	seen := map[string]int{}
	for _, c := range calls {
		seen[c.MessagesDigest]++
	}
	if len(calls) != 3 || len(seen) != 3 {
		t.Fatalf("provider saw %d calls (%d distinct conversations), want each of the 3 turns once", len(calls), len(seen))
	}
	rows := ledger(t, g, fmt.Sprintf("run_id=taskrun-%d", runID))
	ids := map[string]bool{}
	for _, r := range rows {
		ids[r.CallID] = true
		if r.Outcome != "succeeded" || r.CostMicros != 10_000 {
			t.Errorf("ledger row %+v", r)
		}
	}
	if len(rows) != 3 || len(ids) != 3 {
		t.Fatalf("ledger rows %+v", rows)
	}
	if r := g.Do("GET", "/api/v1/costs/status", nil); r.JSON["runs_waiting_for_budget"] != float64(0) {
		t.Fatalf("costs status after: %s", r.Raw)
	}
}
