package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// capPricing prices openai/exact so that a turn of 100 output tokens costs
// exactly $0.01 (and so does its worst case with max_tokens 100).
const capPricing = `
costs:
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`

// capAgent is an agent whose every turn costs exactly $0.01 (capPricing).
func capAgent(id string) string {
	return "id: " + id + "\nllm: {provider: openai, model: exact, max_tokens: 100}\nbuiltins: [write_file]\nmax_turns: 12\n"
}

// scriptSteps scripts a run of the task titled title: turns 1..steps each
// write step<i>.md, turn steps+1 answers reply. Every turn reports exactly
// 100 output tokens.
func scriptSteps(fake *fakellm.Server, title string, steps int, reply string) {
	usage := &fakellm.Usage{InputTokens: 50, OutputTokens: 100}
	rules := []fakellm.Rule{{Contains: fmt.Sprintf("step%d.md", steps), Reply: reply, Usage: usage}}
	for i := steps - 1; i >= 1; i-- { // the latest file named wins: later steps first
		rules = append(rules, fakellm.Rule{Contains: fmt.Sprintf("step%d.md", i), Usage: usage, ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": fmt.Sprintf("step%d.md", i+1), "content": "x\n"})}})
	}
	rules = append(rules, fakellm.Rule{Contains: title, Usage: usage, ToolCalls: []fakellm.ToolCall{
		fakellm.NewToolCall("write_file", map[string]string{"path": "step1.md", "content": "x\n"})}})
	fake.Script(rules...)
}

// capTreeSpent is what the ledger recorded for the run tree rooted at the
// task run runID (its own rows and those of the runs it delegated to).
func capTreeSpent(t *testing.T, g *gatewaytest.Gateway, runID int64) (spent int64, rows []ledgerRow) {
	t.Helper()
	rows = ledger(t, g, fmt.Sprintf("root_run_id=taskrun-%d", runID))
	for _, r := range rows {
		spent += r.CostMicros
	}
	return spent, rows
}

// capWaitParked waits for the run to park for its cost cap and checks the
// task: needs_review, with the comment naming what was spent and the cap.
func capWaitParked(t *testing.T, g *gatewaytest.Gateway, taskID, runID int64, capText string) {
	t.Helper()
	parked := wbWaitRun(t, g, taskID, runID, 60*time.Second, "waiting", "failed", "finished")
	if parked["status"] != "waiting" || parked["waiting_for"] != "cost_cap" {
		t.Fatalf("run at the cap: %v", parked)
	}
	task := g.Do("GET", fmt.Sprintf("%s/tasks/%d", wb, taskID), nil)
	if task.JSON["status"] != "needs_review" {
		t.Fatalf("task while its run waits for the cap: %s", task.Raw)
	}
	cs := g.Do("GET", fmt.Sprintf("%s/tasks/%d/comments", wb, taskID), nil)
	if cs.Status != 200 || !strings.Contains(string(cs.Raw), "cost cap") || !strings.Contains(string(cs.Raw), capText) || !strings.Contains(string(cs.Raw), "spent $") {
		t.Fatalf("comments at the cap: %s", cs.Raw)
	}
}

// TestCostCapPausesAsksAndResumes: a task with max_cost_usd 0.05 whose run
// needs seven $0.01 turns pauses after five (spent = cap, never more),
// waiting for cost_cap with the task in needs_review and a comment; bad
// caps are refused naming the field and change nothing; a PATCH raising
// the cap resumes the run at once, which finishes from the refused turn
// with nothing paid twice.
func TestCostCapPausesAsksAndResumes(t *testing.T) {
	fake := startFake(t)
	scriptSteps(fake, "Capped report", 6, "All six steps are written.")
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: map[string]string{"capped.yaml": capAgent("capped")}, Config: capPricing})

	for _, bad := range []any{-1, "abc", true} {
		r := g.Do("POST", wb+"/tasks", map[string]any{"title": "Bad cap", "agent_id": "capped", "max_cost_usd": bad})
		if r.Status != 400 || !strings.Contains(string(r.Raw), "max_cost_usd") {
			t.Fatalf("create with max_cost_usd %v: %d %s", bad, r.Status, r.Raw)
		}
	}
	if l := g.Do("GET", wb+"/tasks", nil); strings.Contains(string(l.Raw), "Bad cap") {
		t.Fatalf("a refused create left a task: %s", l.Raw)
	}
	task := g.Do("POST", wb+"/tasks", map[string]any{"title": "Capped report", "agent_id": "capped", "max_cost_usd": 0.05})
	wbWantStatus(t, task, 201, "create task")
	if task.JSON["max_cost_usd"] != 0.05 {
		t.Fatalf("created task: %s", task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	run := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	wbWantStatus(t, run, 202, "start run")
	runID := int64(run.JSON["id"].(float64))

	capWaitParked(t, g, taskID, runID, "$0.050000")
	if n := fake.CallCount(); n != 5 {
		t.Fatalf("provider calls before the pause: %d, want 5 ($0.05 / $0.01)", n)
	}
	if spent, _ := capTreeSpent(t, g, runID); spent != 50_000 {
		t.Fatalf("tree spent %d micro-dollars at the pause, want the cap (50000) and never more", spent)
	}
	for _, bad := range []any{-0.5, "more"} {
		r := g.Do("PATCH", fmt.Sprintf("%s/tasks/%d", wb, taskID), map[string]any{"max_cost_usd": bad})
		if r.Status != 400 || !strings.Contains(string(r.Raw), "max_cost_usd") {
			t.Fatalf("PATCH max_cost_usd %v: %d %s", bad, r.Status, r.Raw)
		}
	}
	if r := g.Do("GET", fmt.Sprintf("%s/tasks/%d", wb, taskID), nil); r.JSON["max_cost_usd"] != 0.05 {
		t.Fatalf("a refused PATCH changed the task: %s", r.Raw)
	}

	p := g.Do("PATCH", fmt.Sprintf("%s/tasks/%d", wb, taskID), map[string]any{"max_cost_usd": 0.1})
	wbWantStatus(t, p, 200, "raise the cap")
	// The PATCH signals the run (its timer would take 30 s).
	done := wbWaitRun(t, g, taskID, runID, 20*time.Second, "finished", "failed")
	if done["status"] != "finished" || done["reply"] != "All six steps are written." || done["turns"] != float64(7) {
		t.Fatalf("run after the raise: %v", done)
	}
	if r := g.Do("GET", fmt.Sprintf("%s/tasks/%d", wb, taskID), nil); r.JSON["status"] != "needs_review" {
		t.Fatalf("task after the run: %s", r.Raw)
	}
	calls := fake.Calls()
	seen := map[string]int{}
	for _, c := range calls {
		seen[c.MessagesDigest]++
	}
	if len(calls) != 7 || len(seen) != 7 {
		t.Fatalf("provider saw %d calls (%d distinct conversations), want each of the 7 turns once", len(calls), len(seen))
	}
	spent, rows := capTreeSpent(t, g, runID)
	if spent != 70_000 || len(rows) != 7 {
		t.Fatalf("tree spent %d over %d rows, want 70000 over 7: %+v", spent, len(rows), rows)
	}
}
