package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// The team of issue 47: lead asks research (which asks fact) and then
// writer. Every turn costs $0.01 (100 output tokens at $100 per million).
var teamAgents = map[string]string{
	"lead.yaml":     "id: lead\nllm: {provider: openai, model: exact}\npeers: [research, writer]\nmax_turns: 6\n",
	"research.yaml": "id: research\ndescription: finds things out\nllm: {provider: openai, model: exact}\npeers: [fact]\nmax_turns: 4\n",
	"writer.yaml":   "id: writer\ndescription: writes\nllm: {provider: openai, model: exact}\nmax_turns: 2\n",
	"fact.yaml":     "id: fact\ndescription: checks one fact\nllm: {provider: openai, model: exact}\nmax_turns: 2\n",
}

const teamConfig = `
costs:
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`

// teamScript scripts the tree; writerDelay holds the writer's turn (the
// cancel test cancels while it runs).
func teamScript(fake *fakellm.Server, writerDelay time.Duration) {
	u := &fakellm.Usage{InputTokens: 10, OutputTokens: 100}
	ask := func(peer, task string) []fakellm.ToolCall {
		return []fakellm.ToolCall{fakellm.NewToolCall("ask_"+peer, map[string]string{"task": task})}
	}
	fake.Script(
		fakellm.Rule{Contains: "Written W1.", Reply: "Team done.", Usage: u},
		fakellm.Rule{Contains: "Write it up W1", Reply: "Written W1.", Usage: u, Delay: fakellm.Duration(writerDelay)},
		fakellm.Rule{Contains: "Research done R1.", ToolCalls: ask("writer", "Write it up W1"), Usage: u},
		fakellm.Rule{Contains: "Fact one F1.", Reply: "Research done R1.", Usage: u},
		fakellm.Rule{Contains: "Check fact F1", Reply: "Fact one F1.", Usage: u},
		fakellm.Rule{Contains: "Research topic R1", ToolCalls: ask("fact", "Check fact F1"), Usage: u},
		fakellm.Rule{Contains: "Team report", ToolCalls: ask("research", "Research topic R1"), Usage: u},
	)
}

func startTeamRun(t *testing.T, g *gatewaytest.Gateway) (taskID, runID int64) {
	t.Helper()
	task := g.Do("POST", wb+"/tasks", map[string]any{"title": "Team report", "agent_id": "lead"})
	wbWantStatus(t, task, 201, "create task")
	taskID = int64(task.JSON["id"].(float64))
	run := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	wbWantStatus(t, run, 202, "start run")
	return taskID, int64(run.JSON["id"].(float64))
}

// treeLedger sums the ledger rows of the root run and of its peer runs,
// and checks that no call id is there twice.
func treeLedger(t *testing.T, g *gatewaytest.Gateway, runID int64, run map[string]any) (micros int64, rows int) {
	t.Helper()
	ids := []string{fmt.Sprintf("taskrun-%d", runID)}
	children, _ := run["children"].([]any)
	for _, c := range children {
		ids = append(ids, c.(map[string]any)["run_id"].(string))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		for _, r := range ledger(t, g, "run_id="+id) {
			if seen[r.CallID] {
				t.Errorf("call %s in the ledger twice", r.CallID)
			}
			seen[r.CallID] = true
			micros += r.CostMicros
			rows++
		}
	}
	return micros, rows
}

// TestTeamDelegationFinishes: a parent with two peers, one of them asking
// a third: each peer runs as a child workflow, its answer is the parent's
// tool result, the run record shows the tree (children, tree cost = the
// sum of the tree's ledger rows, own cost = the root's rows).
func TestTeamDelegationFinishes(t *testing.T) {
	fake := startFake(t)
	teamScript(fake, 0)
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: teamAgents, Config: teamConfig})
	taskID, runID := startTeamRun(t, g)
	done := wbWaitRun(t, g, taskID, runID, 60*time.Second, "finished", "failed", "cancelled")
	if done["status"] != "finished" || done["reply"] != "Team done." || done["turns"] != float64(3) {
		t.Fatalf("run: %v", done)
	}
	children, _ := done["children"].([]any)
	if len(children) != 3 {
		t.Fatalf("children: %v", done["children"])
	}
	want := map[string]float64{"research": 1, "fact": 2, "writer": 1}
	for _, c := range children {
		c := c.(map[string]any)
		if c["status"] != "finished" || want[c["agent_id"].(string)] != c["depth"] || c["root_run_id"] != fmt.Sprintf("taskrun-%d", runID) {
			t.Errorf("child %v", c)
		}
	}
	micros, rows := treeLedger(t, g, runID, done)
	if rows != 7 || micros != 70_000 {
		t.Fatalf("tree ledger: %d rows, %d micros", rows, micros)
	}
	if done["tree_cost_micros"] != float64(micros) || done["cost_micros"] != float64(30_000) {
		t.Fatalf("run cost %v, tree cost %v; ledger %d", done["cost_micros"], done["tree_cost_micros"], micros)
	}
	if n := fake.CallCount(); n != 7 {
		t.Fatalf("provider calls: %d, want 7", n)
	}
}

// TestTeamCancelStopsEveryChild: cancelling the parent while a peer works
// stops the whole tree: every peer run ends (cancelled or finished before),
// no provider call is made after the cancel was accepted, and the tree's
// cost equals the sum of its ledger rows.
func TestTeamCancelStopsEveryChild(t *testing.T) {
	fake := startFake(t)
	teamScript(fake, time.Minute)
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: teamAgents, Config: teamConfig})
	taskID, runID := startTeamRun(t, g)
	deadline := time.Now().Add(60 * time.Second)
	for fake.CallCount() < 6 && time.Now().Before(deadline) { // the writer's turn is in flight
		time.Sleep(50 * time.Millisecond)
	}
	if n := fake.CallCount(); n != 6 {
		t.Fatalf("provider calls before the cancel: %d", n)
	}
	c := g.Do("POST", fmt.Sprintf("%s/tasks/%d/runs/%d/cancel", wb, taskID, runID), nil)
	wbWantStatus(t, c, 202, "cancel")
	accepted := fake.CallCount()
	done := wbWaitRun(t, g, taskID, runID, 30*time.Second, "cancelled", "finished", "failed")
	if done["status"] != "cancelled" {
		t.Fatalf("run: %v", done)
	}
	children, _ := done["children"].([]any)
	if len(children) != 3 {
		t.Fatalf("children: %v", done["children"])
	}
	for _, ch := range children {
		ch := ch.(map[string]any)
		want := "finished"
		if ch["agent_id"] == "writer" {
			want = "cancelled"
		}
		if ch["status"] != want {
			t.Errorf("child %s: %v, want %s", ch["agent_id"], ch["status"], want)
		}
	}
	time.Sleep(3 * time.Second) // anything still going would call now
	if n := fake.CallCount(); n != accepted {
		t.Fatalf("provider calls: %d when the cancel was accepted, %d after", accepted, n)
	}
	micros, _ := treeLedger(t, g, runID, done)
	if done["tree_cost_micros"] != float64(micros) {
		t.Fatalf("tree cost %v, ledger rows sum to %d", done["tree_cost_micros"], micros)
	}
}
