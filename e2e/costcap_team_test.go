package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestCostCapTeamPausesWithFourChildren: the Show test. A task with
// max_cost_usd 0.05 whose lead asks four peers in one turn (the four child
// workflows call the provider concurrently), each peer needing three $0.01
// turns: the tree pauses at the cap (spent <= cap: the lead's turn and one
// turn of each child, never more), every child waits for cost_cap, the task
// is in needs_review with the comment; a PATCH raising the cap resumes the
// children at once, the tree finishes, and no turn was paid twice.
func TestCostCapTeamPausesWithFourChildren(t *testing.T) {
	fake := startFake(t)
	u := &fakellm.Usage{InputTokens: 50, OutputTokens: 100}
	var asks []fakellm.ToolCall
	rules := []fakellm.Rule{{Contains: "Part 4 done.", Reply: "The capped team report is done.", Usage: u}}
	for k := 1; k <= 4; k++ {
		asks = append(asks, fakellm.NewToolCall("ask_part", map[string]string{"task": fmt.Sprintf("Write part %d of the report", k)}))
		write := func(name string) []fakellm.ToolCall {
			return []fakellm.ToolCall{fakellm.NewToolCall("write_file", map[string]string{"path": name, "content": "x\n"})}
		}
		rules = append(rules,
			fakellm.Rule{Contains: fmt.Sprintf("p%ds2.md", k), Reply: fmt.Sprintf("Part %d done.", k), Usage: u},
			fakellm.Rule{Contains: fmt.Sprintf("p%ds1.md", k), ToolCalls: write(fmt.Sprintf("p%ds2.md", k)), Usage: u},
			fakellm.Rule{Contains: fmt.Sprintf("Write part %d of the report", k), ToolCalls: write(fmt.Sprintf("p%ds1.md", k)), Usage: u})
	}
	rules = append(rules, fakellm.Rule{Contains: "Capped team report", ToolCalls: asks, Usage: u})
	fake.Script(rules...)
	agents := map[string]string{
		"boss.yaml": "id: boss\nllm: {provider: openai, model: exact, max_tokens: 100}\npeers: [part]\nmax_turns: 4\n",
		"part.yaml": "id: part\ndescription: writes one part\n" + strings.TrimPrefix(capAgent("part"), "id: part\n"),
	}
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Agents: agents, Config: capPricing})

	task := g.Do("POST", wb+"/tasks", map[string]any{"title": "Capped team report", "agent_id": "boss", "max_cost_usd": 0.05})
	wbWantStatus(t, task, 201, "create task")
	taskID := int64(task.JSON["id"].(float64))
	run := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, taskID), nil)
	wbWantStatus(t, run, 202, "start run")
	runID := int64(run.JSON["id"].(float64))

	// All four children park for the cap.
	var last map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; {
		last = g.Do("GET", fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, runID), nil).JSON
		children, _ := last["children"].([]any)
		waiting := 0
		for _, c := range children {
			if c := c.(map[string]any); c["status"] == "waiting" && c["waiting_for"] == "cost_cap" {
				waiting++
			}
		}
		if waiting == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children not all waiting for the cost cap: %v", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	spent, rows := capTreeSpent(t, g, runID)
	paid, refused := 0, 0
	for _, r := range rows {
		switch {
		case r.RejectionCode == "cost_cap" && r.CostMicros == 0:
			refused++
		case r.RejectionCode == "" && r.CostMicros > 0:
			paid++
		}
	}
	// Each child's second turn was refused before any provider access.
	if spent > 50_000 || paid != 5 || refused != 4 || len(rows) != 9 || fake.CallCount() != 5 {
		t.Fatalf("at the pause: tree spent %d micro-dollars, %d paid rows, %d refused, %d rows, %d provider calls; want at most the cap (50000): the lead's turn and one of each child paid, each child's next refused",
			spent, paid, refused, len(rows), fake.CallCount())
	}
	if r := g.Do("GET", fmt.Sprintf("%s/tasks/%d", wb, taskID), nil); r.JSON["status"] != "needs_review" {
		t.Fatalf("task while its tree waits for the cap: %s", r.Raw)
	}
	cs := g.Do("GET", fmt.Sprintf("%s/tasks/%d/comments", wb, taskID), nil)
	if cs.Status != 200 || !strings.Contains(string(cs.Raw), "Peer run") || !strings.Contains(string(cs.Raw), "cost cap") || !strings.Contains(string(cs.Raw), "spent $") {
		t.Fatalf("comments at the cap: %s", cs.Raw)
	}

	p := g.Do("PATCH", fmt.Sprintf("%s/tasks/%d", wb, taskID), map[string]any{"max_cost_usd": 1})
	wbWantStatus(t, p, 200, "raise the cap")
	// The PATCH signals the waiting children (their timers would take 30 s).
	done := wbWaitRun(t, g, taskID, runID, 20*time.Second, "finished", "failed", "cancelled")
	if done["status"] != "finished" || done["reply"] != "The capped team report is done." {
		t.Fatalf("run after the raise: %v", done)
	}
	children, _ := done["children"].([]any)
	if len(children) != 4 {
		t.Fatalf("children: %v", done["children"])
	}
	for _, c := range children {
		if c := c.(map[string]any); c["status"] != "finished" || c["turns"] != float64(3) {
			t.Errorf("child after the raise: %v", c)
		}
	}
	calls := fake.Calls()
	seen := map[string]int{}
	for _, c := range calls {
		seen[c.MessagesDigest]++
	}
	// The lead's two turns and three of each child, each asked once.
	if len(calls) != 14 || len(seen) != 14 {
		t.Fatalf("provider saw %d calls (%d distinct conversations), want each of the 14 turns once", len(calls), len(seen))
	}
	spent, rows = capTreeSpent(t, g, runID)
	ids := map[string]bool{}
	for _, r := range rows {
		ids[r.CallID] = true
	}
	if spent != 140_000 || len(rows) != 14 || len(ids) != 14 {
		t.Fatalf("tree spent %d over %d rows (%d call ids), want 140000 over 14", spent, len(rows), len(ids))
	}
}
